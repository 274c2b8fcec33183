package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/runnel/runnel"
)

// DecodeRequest reads one run request of at most limit bytes (a limit <= 0
// means DefaultMaxBodyBytes). It is the one decoder behind POST /run and
// `runnel run`. Unknown fields are ignored (DESIGN §3). Errors are
// *runnel.Error: CodeTooLarge past the limit, CodeInvalidRequest for an
// empty body or anything that is not a JSON run request, with a sentence
// saying what to fix.
func DecodeRequest(r io.Reader, limit int64) (*runnel.RunRequest, error) {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) || int64(len(body)) > limit {
		return nil, &runnel.Error{Code: runnel.CodeTooLarge, Message: fmt.Sprintf(
			"request body is larger than the %s limit; send a smaller request, or raise RUNNEL_MAX_BODY_BYTES on the server",
			byteSize(limit))}
	}
	if err != nil {
		return nil, runnel.Errorf(runnel.CodeInvalidRequest, "could not read the request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &runnel.Error{Code: runnel.CodeInvalidRequest, Message: `request body is empty; ` +
			`send a JSON run request such as {"model":"openai/gpt-5","messages":[{"role":"user","content":"hi"}]}`}
	}
	var req runnel.RunRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &runnel.Error{Code: runnel.CodeInvalidRequest, Message: "invalid JSON: " + describeJSONError(err), Err: err}
	}
	return &req, nil
}

// describeJSONError says what is wrong in the caller's terms, not Go's.
func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(syntax.Error(), "json: "), syntax.Offset)
	case errors.As(err, &typ):
		want := jsonKind(typ.Type)
		if typ.Field == "" {
			return fmt.Sprintf("the request must be %s, not %s", want, article(typ.Value))
		}
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, want, article(typ.Value))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() == "RawMessage" {
			return "any JSON value"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// article names the JSON value the decoder met: "array" → "an array",
// "number 1.5" → "a number (1.5)".
func article(value string) string {
	kind, detail, _ := strings.Cut(value, " ")
	a := "a "
	if kind == "array" || kind == "object" {
		a = "an "
	}
	if detail != "" {
		return a + kind + " (" + detail + ")"
	}
	return a + kind
}

// byteSize writes a limit the way people configure it: 8 MiB, 512 KiB, 1000 bytes.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
