package redact_test

import (
	"encoding/json"
	"fmt"

	"github.com/runnel/runnel/internal/redact"
)

func Example() {
	r := redact.New("sk-live-0123/4567", "postgres://app:hunter2pw@db:5432/app")

	// Text, in any spelling a reader can undo.
	fmt.Println(r.String(`key sk-live-0123\/4567, pw hunter2pw, url-encoded sk-live-0123%2F4567`))

	// JSON stays JSON: a secret spanning tokens takes the value holding it.
	out := r.JSON(json.RawMessage(`{"token":"\u0073k-live-0123/4567","pin":{"a":1,"b":2}}`))
	fmt.Println(string(out))
	// Output:
	// key [REDACTED], pw [REDACTED], url-encoded [REDACTED]
	// {"token":"[REDACTED]","pin":{"a":1,"b":2}}
}
