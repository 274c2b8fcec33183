package run

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/harness/native"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/tools"
)

// FuzzRulesSeeWhatToolsTouch drives the real loop and gate with a model
// whose arguments the fuzzer writes, under deny rules for bash commands
// starting "rm" and for writes under secret/. Whenever the gate lets a
// call run, not even the loosest readers of its arguments — encoding/json
// into a struct (names in any case, the last duplicate wins) or into a map
// — may find an rm command, or a write path that resolves under secret/.
// (The builtins' own strict decoding is what the gate reads.) The tools
// themselves never run: a recorder stands in for them.
func FuzzRulesSeeWhatToolsTouch(f *testing.F) {
	for _, s := range []string{
		`{"command":"echo hello","COMMAND":"rm -rf /"}`,
		`{"command":"echo hello","command":"rm -rf /"}`,
		`{"Command":"rm -rf /"}`,
		`{"content":"1","path":"secret/x"}`,
		`{"path":"./public/../secret/x","content":"1"}`,
		`{"path":"public/x","PATH":"secret/x","content":"1"}`,
		`{"path":"alias/x","content":"1"}`,
		`{"command":" rm -rf /"}`,
	} {
		f.Add("bash", []byte(s))
		f.Add("write", []byte(s))
	}
	ws, err := sandbox.NewWorkspace(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = ws.Close() })
	if err := ws.Root().MkdirAll("secret", 0o755); err != nil {
		f.Fatal(err)
	}
	if err := ws.Root().Symlink("secret", "alias"); err != nil {
		f.Fatal(err)
	}
	plan := permission.ParsePlan(json.RawMessage(`{"default":"allow","rules":[
		{"pattern":"Bash(rm:*)","permission":"deny"},{"pattern":"Write(secret/:*)","permission":"deny"}]}`))
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		if tool != "bash" && tool != "write" {
			return
		}
		ran := runGated(t, ws, plan, tool, args)
		if ran == nil {
			return
		}
		for _, read := range readers(*ran) {
			switch {
			case tool == "bash" && strings.HasPrefix(read.command, "rm"):
				t.Fatalf("the gate let %s run; %s reads the command %q", args, read.by, read.command)
			case tool == "write" && read.path != "":
				if rel, err := ws.Rel(read.path); err == nil && strings.HasPrefix(rel+"/", "secret/") {
					t.Fatalf("the gate let %s run; %s reads the path %q, which is %s", args, read.by, read.path, rel)
				}
			}
		}
	})
}

// runGated runs one model step calling tool with args through the real
// loop and gate, the builtins' permissions and rule subjects included,
// and returns the arguments of the call if the gate let it run.
func runGated(t *testing.T, ws *sandbox.Workspace, plan permission.Plan, tool string, args []byte) *json.RawMessage {
	t.Helper()
	var mu sync.Mutex
	var ran *json.RawMessage
	g := &gate{tools: map[string]*gatedTool{}, plan: plan, store: &permission.Store{}}
	var advert []provider.Tool
	for _, b := range tools.NewBuiltins([]string{tool}, ws, nil) {
		readOnly := b.ReadOnly
		g.tools[b.Name] = &gatedTool{executor: permission.ExecutorHarness, readOnly: &readOnly, subject: b.Subject,
			run: func(_ context.Context, c harness.Call) harness.ToolResult {
				mu.Lock()
				defer mu.Unlock()
				in := append(json.RawMessage(nil), c.Input...)
				ran = &in
				return harness.TextResult("recorded", false)
			}}
		advert = append(advert, provider.Tool{Name: b.Name, Schema: b.Schema})
	}
	model := &oneStep{call: harness.Call{ID: "c1", Name: tool, Input: json.RawMessage(args)}}
	if _, err := native.Run(context.Background(), &native.Turn{
		Model: model, Messages: []runnel.Message{runnel.UserText("go")}, Tools: advert, Dispatcher: g,
	}, runnel.Discard{}); err != nil {
		t.Fatal(err)
	}
	return ran
}

// reading is what one decoder reads from a call's arguments.
type reading struct {
	by            string
	command, path string
}

// readers decodes args the ways an executor might.
func readers(args json.RawMessage) []reading {
	var out []reading
	var loose struct {
		Command string `json:"command"`
		Path    string `json:"path"`
	}
	if json.Unmarshal(args, &loose) == nil {
		out = append(out, reading{"encoding/json into a struct", loose.Command, loose.Path})
	}
	var m map[string]any
	if json.Unmarshal(args, &m) == nil {
		c, _ := m["command"].(string)
		p, _ := m["path"].(string)
		out = append(out, reading{"encoding/json into a map", c, p})
	}
	return out
}
