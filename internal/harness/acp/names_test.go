package acp

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel/internal/conformance"
	"github.com/runnel/runnel/internal/harness"
)

// Every agent's spelling of a call names the same tool for the gate
// (ACP-AGENTS.md), and a builtin's arguments come in the shape its rule
// reads.
func TestIdentify(t *testing.T) {
	n := newNamer([]Tool{{Name: "get_user"}, {Name: "pick_date"}}, []Server{{Name: "github"}, {Name: "github_enterprise"}}, "/ws/run1")
	ro := true
	tests := []struct {
		name                   string
		frameName, title, kind string
		input                  string
		want                   harness.AgentCall
	}{
		{"claude runnel tool", "mcp__runnel__get_user", "mcp__runnel__get_user", "other", `{"id":1}`,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{"id":1}`)}, Owner: harness.OwnerRunnel, Title: "mcp__runnel__get_user"}},
		{"gemini runnel tool", "", "mcp_runnel_get_user", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerRunnel, Title: "mcp_runnel_get_user"}},
		{"opencode runnel tool", "", "runnel_get_user", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerRunnel, Title: "runnel_get_user"}},
		{"gemini human title", "", "get_user (runnel MCP Server)", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerRunnel, Title: "get_user (runnel MCP Server)"}},
		{"slash title", "", "Tool: runnel/pick_date", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "pick_date", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerRunnel, Title: "Tool: runnel/pick_date"}},
		{"codex mcp call", "", "mcp.runnel.get_user", "execute", `{"server":"runnel","tool":"get_user","arguments":{"id":7}}`,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{"id":7}`)}, Owner: harness.OwnerRunnel, Title: "mcp.runnel.get_user"}},
		{"codex title alone", "", "mcp.runnel.get_user", "execute", ``,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerRunnel, Title: "mcp.runnel.get_user"}},
		{"pi bare name", "get_user", "get_user", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "get_user", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerRunnel, Title: "get_user"}},
		{"user server, longest name first", "", "mcp__github_enterprise__list", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "mcp__github_enterprise__list", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerServer, Server: "github_enterprise", Title: "mcp__github_enterprise__list"}},
		{"opencode user server", "", "github_enterprise_list", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "mcp__github_enterprise__list", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerServer, Server: "github_enterprise", Title: "github_enterprise_list"}},
		{"claude bash", "Bash", "ls -la", "execute", `{"command":"ls -la","description":"list"}`,
			harness.AgentCall{Call: harness.Call{Name: "Bash", Input: json.RawMessage(`{"command":"ls -la"}`)}, Owner: harness.OwnerAgent, Title: "ls -la"}},
		{"codex exec argv", "", "Run ls", "execute", `{"command":["/bin/bash","-lc","npm run test"],"cwd":"/ws/run1"}`,
			harness.AgentCall{Call: harness.Call{Name: "Bash", Input: json.RawMessage(`{"command":"npm run test"}`)}, Owner: harness.OwnerAgent, Title: "Run ls"}},
		{"claude read, path made relative", "Read", "Read /ws/run1/src/a.go", "read", `{"file_path":"/ws/run1/src/a.go"}`,
			harness.AgentCall{Call: harness.Call{Name: "Read", Input: json.RawMessage(`{"path":"src/a.go"}`)}, Owner: harness.OwnerAgent, Title: "Read /ws/run1/src/a.go", ReadOnly: &ro}},
		{"path outside the workspace stays absolute", "Write", "", "edit", `{"file_path":"/etc/passwd","content":"x"}`,
			harness.AgentCall{Call: harness.Call{Name: "Write", Input: json.RawMessage(`{"content":"x","path":"/etc/passwd"}`)}, Owner: harness.OwnerAgent}},
		{"pi edit", "edit", "edit", "edit", `{"path":"a.txt","oldText":"a","newText":"b"}`,
			harness.AgentCall{Call: harness.Call{Name: "Edit", Input: json.RawMessage(`{"newText":"b","oldText":"a","path":"a.txt"}`)}, Owner: harness.OwnerAgent, Title: "edit"}},
		{"gemini shell", "", "run_shell_command", "execute", `{"command":"echo hi"}`,
			harness.AgentCall{Call: harness.Call{Name: "Bash", Input: json.RawMessage(`{"command":"echo hi"}`)}, Owner: harness.OwnerAgent, Title: "run_shell_command"}},
		{"pi bash titled by its command", "", "ls", "execute", ``,
			harness.AgentCall{Call: harness.Call{Name: "Bash", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerAgent, Title: "ls"}},
		{"pi grep", "", "grep", "other", `{"pattern":"x","path":"src"}`,
			harness.AgentCall{Call: harness.Call{Name: "Grep", Input: json.RawMessage(`{"path":"src","pattern":"x"}`)}, Owner: harness.OwnerAgent, Title: "grep", ReadOnly: &ro}},
		{"kind only", "", "Apply patch", "edit", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "Edit", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerAgent, Title: "Apply patch"}},
		{"unknown tool keeps its name", "TodoWrite", "Update todos", "think", `{"todos":[]}`,
			harness.AgentCall{Call: harness.Call{Name: "TodoWrite", Input: json.RawMessage(`{"todos":[]}`)}, Owner: harness.OwnerAgent, Title: "Update todos"}},
		{"runnel prefix with an unknown tool is not runnel's", "", "mcp__runnel__nope", "", `{}`,
			harness.AgentCall{Call: harness.Call{Name: "mcp__runnel__nope", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerAgent, Title: "mcp__runnel__nope"}},
		{"arguments that are not an object", "Bash", "", "execute", `"rm -rf /"`,
			harness.AgentCall{Call: harness.Call{Name: "Bash", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerAgent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := n.identify(tt.frameName, tt.title, tt.kind, json.RawMessage(tt.input))
			if diff := cmp.Diff(tt.want, got, cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("identify (-want +got):\n%s", diff)
			}
		})
	}
}

// Pi's seven builtins reach the gate under the rule names Agenta pins
// (shared/conformance/agenta-v0.113/pi_builtin_tools.json), read-only
// exactly where Agenta's allow_reads lets them run unasked.
func TestPiBuiltinsAsAgentaNamesThem(t *testing.T) {
	raw, err := conformance.Read("agenta-v0.113/pi_builtin_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Builtins []struct {
			Name     string `json:"name"`
			RuleName string `json:"ruleName"`
			ReadOnly bool   `json:"readOnly"`
		} `json:"builtins"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Builtins) != 7 {
		t.Fatalf("%d builtins in the golden file, want Pi's seven", len(golden.Builtins))
	}
	n := newNamer([]Tool{{Name: "get_user"}}, nil, "/ws/run1")
	for _, b := range golden.Builtins {
		got := n.identify(b.Name, b.Name, "", json.RawMessage(`{}`))
		if got.Name != b.RuleName || got.Owner != harness.OwnerAgent {
			t.Errorf("Pi's %s: gate sees %q owned by %v, want %q owned by the agent", b.Name, got.Name, got.Owner, b.RuleName)
		}
		if ro := got.ReadOnly != nil && *got.ReadOnly; ro != b.ReadOnly {
			t.Errorf("Pi's %s: read-only %v, want %v", b.Name, ro, b.ReadOnly)
		}
	}
}
