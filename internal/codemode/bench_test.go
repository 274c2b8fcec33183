package codemode

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchPayload is what the benchmark's tool returns, on this side and on
// Node's (bench/codemode/vm.mjs).
const benchPayload = `{"ok":true,"n":1,"items":["a","b","c"]}`

// BenchmarkRun100Calls measures a fresh sandbox running a script that makes
// 100 tool calls, with a Caller that answers at once: the sandbox and the
// call plumbing, no network. The scripts are bench/codemode/*.js, which
// bench/codemode.sh also runs in Node's node:vm for comparison.
func BenchmarkRun100Calls(b *testing.B) {
	tools := []Tool{{Server: "bench", Name: "echo"}}
	caller := CallerFunc(func(context.Context, string, string, json.RawMessage) (CallResult, error) {
		return CallResult{Content: benchPayload}, nil
	})
	for _, name := range []string{"sequential", "parallel"} {
		script, err := os.ReadFile(filepath.Join("..", "..", "bench", "codemode", name+".js"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				out := Run(context.Background(), string(script), tools, caller, nil)
				if out.Error != "" || strings.TrimSpace(string(out.Result)) != "100" {
					b.Fatalf("got %+v", out)
				}
			}
		})
	}
}

// BenchmarkRunEmpty is the fixed cost of a sandbox: a script that returns.
func BenchmarkRunEmpty(b *testing.B) {
	for b.Loop() {
		if out := Run(context.Background(), "return 1", nil, nil, nil); out.Error != "" {
			b.Fatalf("got %+v", out)
		}
	}
}
