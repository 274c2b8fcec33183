package runnel_test

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// TestArchitecture guards DESIGN §1 in one table: what each package may
// import beyond the standard library, and the imports that would break a
// boundary ("the harnesses never know about HTTP, and the server never
// knows about a provider"). Test files are not checked.
func TestArchitecture(t *testing.T) {
	const (
		mod    = "github.com/runnel/runnel"
		jsonv2 = "github.com/go-json-experiment/json/"
	)
	tests := []struct {
		dir string
		// allowed are the non-standard import prefixes the package may use;
		// nil means any.
		allowed []string
		// forbidden are imports the package must never have.
		forbidden []string
	}{
		// encoding/json/v2, published as a module until it leaves
		// GOEXPERIMENT: names matched exactly (docs/decisions.md).
		{dir: ".", allowed: []string{jsonv2}},
		{dir: "internal/strictjson", allowed: []string{jsonv2}},
		{dir: "internal/redact", allowed: []string{mod}},
		{dir: "internal/permission", allowed: []string{mod, mod + "/internal/strictjson"}},
		{dir: "internal/sandbox", allowed: []string{mod, "github.com/landlock-lsm/go-landlock/", "golang.org/x/sys/unix"}},
		{dir: "internal/netguard", allowed: []string{}},
		{dir: "internal/egress", allowed: []string{mod + "/internal/netguard"}},
		{dir: "internal/conformance", allowed: []string{}},
		{dir: "internal/llmtest", allowed: []string{}},
		{dir: "internal/mcp", allowed: []string{mod, mod + "/internal/netguard", "github.com/modelcontextprotocol/go-sdk/"}},
		// Code mode knows no MCP (the run adapts tools to it) and nothing
		// that could give a script a way out.
		{dir: "internal/codemode", allowed: []string{"modernc.org/quickjs"},
			forbidden: []string{"os", "os/exec", "net", "net/http", mod + "/internal/mcp"}},
		// The vocabulary both harnesses share with the gate knows no
		// harness, tool or transport.
		{dir: "internal/harness", allowed: []string{mod, mod + "/internal/strictjson"},
			forbidden: []string{"net/http", "net", "os/exec"}},
		{dir: "internal/harness/native", allowed: []string{mod, mod + "/internal/harness", mod + "/internal/provider", mod + "/internal/strictjson"},
			forbidden: []string{"net/http", "net", "os/exec", mod + "/internal/tools", mod + "/internal/server"}},
		{dir: "internal/server", allowed: []string{mod, mod + "/internal/strictjson", mod + "/internal/uistream", jsonv2}},
		// The UI Message Stream is a translation: no I/O, no run.
		{dir: "internal/uistream", allowed: []string{mod, mod + "/internal/strictjson"},
			forbidden: []string{"net/http", "net", "os", "os/exec", mod + "/internal/run"}},
		// The playground is static files.
		{dir: "internal/playground", allowed: []string{}},
		// The client speaks HTTP to a runnel; it runs nothing itself.
		{dir: "runnelclient", allowed: []string{mod, mod + "/internal/server", mod + "/internal/strictjson"},
			forbidden: []string{"os/exec", mod + "/internal/run"}},
		// Tracing and metrics know no run, tool or transport: the run
		// reports to them.
		{dir: "internal/telemetry", allowed: []string{"go.opentelemetry.io/", "github.com/prometheus/client_golang/"},
			forbidden: []string{mod, mod + "/internal/run", mod + "/internal/server"}},
		// jsonv2 decodes the streamed chunks, with encoding/json's rules
		// (provider.DecodeChunk).
		{dir: "internal/provider", allowed: []string{mod, jsonv2}},
		{dir: "internal/provider/openai", allowed: []string{mod, mod + "/internal/provider"}},
		{dir: "internal/provider/anthropic", allowed: []string{mod, mod + "/internal/provider"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			pkg, err := build.ImportDir(tt.dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(pkg.GoFiles) == 0 {
				t.Fatal("no source files found")
			}
			for _, imp := range pkg.Imports {
				if slices.Contains(tt.forbidden, imp) {
					t.Errorf("%s imports %s, which crosses a boundary", tt.dir, imp)
				}
				first, _, _ := strings.Cut(imp, "/")
				if !strings.Contains(first, ".") || tt.allowed == nil {
					continue // the standard library
				}
				if !slices.ContainsFunc(tt.allowed, func(a string) bool { return permits(a, imp) }) {
					t.Errorf("%s imports %s; it may import only the standard library and %v", tt.dir, imp, tt.allowed)
				}
			}
		})
	}
}

// permits reports whether an allowed entry admits imp: an entry ending in
// "/" admits everything under it, any other entry only itself.
func permits(allowed, imp string) bool {
	if prefix, ok := strings.CutSuffix(allowed, "/"); ok {
		return imp == prefix || strings.HasPrefix(imp, allowed)
	}
	return imp == allowed
}
