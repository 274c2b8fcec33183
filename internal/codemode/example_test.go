package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runnel/runnel/internal/codemode"
)

func ExampleRun() {
	tools := []codemode.Tool{{Server: "math", Name: "add"}}
	caller := codemode.CallerFunc(func(_ context.Context, server, tool string, args json.RawMessage) (codemode.CallResult, error) {
		var in struct{ A, B float64 }
		if err := json.Unmarshal(args, &in); err != nil {
			return codemode.CallResult{Content: err.Error(), IsError: true}, nil
		}
		return codemode.CallResult{Content: fmt.Sprint(in.A + in.B)}, nil
	})
	script := `
let sum = 0;
for (const n of [1, 2, 3]) sum = await tools.math.add({a: sum, b: n});
console.log("sum", sum);
return {sum};`
	limiter := codemode.NewLimiter(0) // one per process, shared by every run
	out := codemode.Run(context.Background(), script, tools, caller, &codemode.Options{Limiter: limiter})
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	// Output:
	// {"result":{"sum":6},"logs":["sum 6"]}
}
