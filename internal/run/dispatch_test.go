package run

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/harness/native"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/provider"
)

// oneStep is an in-process model for gate tests: it calls one tool, then
// ends the turn.
type oneStep struct {
	call  harness.Call
	steps int
}

func (m *oneStep) Stream(context.Context, *provider.Request, func(provider.Chunk)) (*provider.Response, error) {
	m.steps++
	if m.steps == 1 {
		return &provider.Response{Content: []runnel.Block{{Type: runnel.BlockToolCall, ToolCallID: m.call.ID, ToolName: m.call.Name, Input: m.call.Input}}}, nil
	}
	return &provider.Response{Content: []runnel.Block{{Type: runnel.BlockText, Text: "ok"}}}, nil
}

// verdictOf runs the gate's verdict through a one-call loop and reports
// it as text: "run", "pause <kind>", or the answer.
func verdictOf(t *testing.T, g *gate, c harness.Call) string {
	t.Helper()
	v := g.Dispatch(context.Background(), c)
	// A Verdict is opaque outside the loop, so a one-call turn reads it.
	m := &oneStep{call: c}
	out, err := native.Run(context.Background(), &native.Turn{
		Model: m, Messages: []runnel.Message{runnel.UserText("go")},
		Tools:      []provider.Tool{{Name: c.Name, Schema: runnel.PermissiveSchema()}},
		Dispatcher: harness.DispatcherFunc(func(context.Context, harness.Call) harness.Verdict { return v }),
	}, runnel.Discard{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Interactions) > 0 {
		return "pause " + string(out.Interactions[0].Kind)
	}
	r := out.Messages[1].Content[0]
	if r.OutputText() == "ran" {
		return "run"
	}
	return r.OutputText()
}

func TestGateVerdicts(t *testing.T) {
	yes := true
	ran := func(context.Context, harness.Call) harness.ToolResult { return harness.TextResult("ran", false) }
	gated := map[string]*gatedTool{
		"lookup":  {executor: permission.ExecutorRelay, readOnly: &yes, run: ran},
		"change":  {executor: permission.ExecutorRelay, run: ran},
		"pinned":  {executor: permission.ExecutorRelay, specPermission: "allow", run: ran},
		"connect": {executor: permission.ExecutorClient},
		"bound":   {executor: permission.ExecutorRelay, boundPaths: []string{"project"}, run: ran},
	}
	call := func(id, name, input string) harness.Call {
		return harness.Call{ID: id, Name: name, Input: json.RawMessage(input)}
	}
	history := func(blocks ...runnel.Block) []runnel.Message {
		return []runnel.Message{runnel.UserText("go"), {Role: runnel.RoleTool, Content: blocks}}
	}
	tests := []struct {
		name       string
		perms      string
		history    []runnel.Message
		superseded bool
		call       harness.Call
		want       string
	}{
		{"allow_reads runs a read", "", nil, false, call("c", "lookup", `{}`), "run"},
		{"allow_reads asks for a write", "", nil, false, call("c", "change", `{}`), "pause user_approval"},
		{"the spec's permission wins", `{"default":"deny"}`, nil, false, call("c", "pinned", `{}`), "run"},
		{"a deny rule", `{"default":"allow","rules":[{"pattern":"change","permission":"deny"}]}`, nil, false, call("c", "change", `{}`),
			policyDeniedText("change")},
		{"a stored approval runs the call", "", history(approval("c", "change", `{"approved":true}`)), false, call("c", "change", `{}`), "run"},
		{"a stored denial with its reason", "", history(approval("c", "change", `{"approved":false,"reason":"no"}`)), false, call("c", "change", `{}`),
			declinedText("change", "no")},
		{"a stored approval matched by key under a new id, bound fields ignored", "",
			history(runnel.Block{Type: runnel.BlockToolResult, ToolCallID: "old", ToolName: "bound", Input: json.RawMessage(`{"a":1,"project":"x"}`),
				Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)}),
			false, call("new", "bound", `{"a":1,"project":"y"}`), "run"},
		{"a client tool pauses for the browser", "", nil, false, call("c", "connect", `{}`), "pause client_tool"},
		{"a client tool under ask still pauses for the browser, not a person", `{"default":"ask"}`, nil, false, call("c", "connect", `{}`), "pause client_tool"},
		{"a client tool's stored output answers it", "", history(clientOutput("c", "connect", `{"ok":true}`)), false, call("c", "connect", `{}`), `{"ok":true}`},
		{"a client tool under default deny", `{"default":"deny"}`, nil, false, call("c", "connect", `{}`), policyDeniedText("connect")},
		{"a superseded call is denied, even when the policy allows it", `{"default":"allow"}`, nil, true, call("c", "change", `{}`),
			supersededText("change")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &gate{tools: gated, plan: permission.ParsePlan(json.RawMessage(tt.perms)), store: &permission.Store{}}
			if tt.history != nil {
				g.store = permission.Extract(tt.history, permission.ExtractOptions{
					IsClientTool: func(n string) bool { return n == "connect" },
					BoundPaths: func(n string) []string {
						if n == "bound" {
							return []string{"project"}
						}
						return nil
					},
				})
			}
			if tt.superseded {
				g.superseded = map[string]bool{tt.call.ID: true}
				tt.call.Resumed = true
			}
			if diff := cmp.Diff(tt.want, verdictOf(t, g, tt.call)); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGateSignsInteractions(t *testing.T) {
	secret := []byte("s3cret")
	issued := time.Unix(1767225600, 0)
	g := &gate{tools: map[string]*gatedTool{"connect": {executor: permission.ExecutorClient}}, plan: permission.ParsePlan(nil),
		store: &permission.Store{}, secret: secret, now: func() time.Time { return issued }}
	m := &oneStep{call: harness.Call{ID: "c1", Name: "connect", Input: json.RawMessage(`{ "b": 2, "a": 1 }`)}}
	out, err := native.Run(context.Background(), &native.Turn{
		Model: m, Messages: []runnel.Message{runnel.UserText("go")},
		Tools: []provider.Tool{{Name: "connect", Schema: runnel.PermissiveSchema()}}, Dispatcher: g,
	}, runnel.Discard{})
	if err != nil {
		t.Fatal(err)
	}
	it := out.Interactions[0]
	if it.ID != "int_c1" || permission.Verify(secret, it.Signature, "int_c1", "c1", "connect", json.RawMessage(`{"a":1,"b":2}`), issued, time.Hour) != nil {
		t.Errorf("interaction %+v is not signed over its id, call id, name and canonical input", it)
	}
}

// describeVerdict reads a verdict as text: "allow", "run", "pause", or the
// answer's text.
func describeVerdict(v harness.Verdict) string {
	switch {
	case v.Allowed():
		return "allow"
	case v.Run() != nil:
		return "run"
	case v.Interaction() != nil:
		return "pause"
	}
	return string(v.Result().Output)
}

// An ACP agent's permission requests are decided by the same plan and
// store as runnel's own calls: the agent's builtins by their rule names
// and the argument their rule reads, a tool of the run only looked at (the
// Dispatch that runs it takes the approval), a call whose arguments the
// agent did not show never put to a person.
func TestGatePermit(t *testing.T) {
	yes := true
	ran := func(context.Context, harness.Call) harness.ToolResult { return harness.TextResult("ran", false) }
	history := []runnel.Message{
		runnel.UserText("go"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{
			{Type: runnel.BlockToolCall, ToolCallID: "c1", ToolName: "Bash", Input: json.RawMessage(`{"command":"make clean"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "c2", ToolName: "change", Input: json.RawMessage(`{"item":"a"}`)},
		}},
		{Role: runnel.RoleTool, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "c1", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)},
			{Type: runnel.BlockToolResult, ToolCallID: "c2", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)},
		}},
	}
	g := &gate{
		tools: map[string]*gatedTool{
			"change":             {executor: permission.ExecutorRelay, run: ran},
			"connect":            {executor: permission.ExecutorClient},
			"mcp__files__delete": {executor: permission.ExecutorRelay, serverPermission: "deny", run: ran},
		},
		plan:  permission.ParsePlan(json.RawMessage(`{"default":"allow_reads","rules":[{"pattern":"Bash(npm run:*)","permission":"allow"},{"pattern":"Write","permission":"deny"}]}`)),
		store: permission.Extract(history, permission.ExtractOptions{}),
		now:   time.Now, ttl: time.Hour,
	}
	agent := func(name, input string) harness.AgentCall {
		c := harness.AgentCall{Call: harness.Call{ID: "agent_" + name, Name: name, Input: json.RawMessage(input), Reissued: true}, Owner: harness.OwnerAgent}
		if name == "Read" {
			c.ReadOnly = &yes
		}
		return c
	}
	runnelCall := func(name, input string) harness.AgentCall {
		return harness.AgentCall{Call: harness.Call{ID: "agent_" + name, Name: name, Input: json.RawMessage(input), Reissued: true}, Owner: harness.OwnerRunnel}
	}
	unknown := agent("Bash", `{}`)
	unknown.ArgsUnknown = true
	unknownRunnel := runnelCall("change", `{}`)
	unknownRunnel.ArgsUnknown = true
	steps := []struct {
		name string
		call harness.AgentCall
		want string
	}{
		{"a rule allows it", agent("Bash", `{"command":"npm run test"}`), "allow"},
		{"allow_reads asks about a write", agent("Bash", `{"command":"rm -rf build"}`), "pause"},
		{"a rule denies it", agent("Write", `{"path":"a","content":"x"}`), `"Tool call execution denied. The permission policy of this run does not allow the tool 'Write', whatever its arguments; this does not change while the conversation continues. Do not call it again; tell the user it is unavailable and ask what they would like to do instead."`},
		{"a read runs unasked", agent("Read", `{"path":"a"}`), "allow"},
		{"unseen arguments are never put to a person", unknown, `"Tool call execution denied. This 'Bash' call needs a person's approval, and the agent did not say what its arguments are, so no one can be asked to approve it. Make the call again with its arguments stated."`},
		{"the approved call, made again under a new id", agent("Bash", `{"command":"make clean"}`), "allow"},
		{"its approval was spent", agent("Bash", `{"command":"make clean"}`), "pause"},
		{"a tool of the run with an approval: looked at", runnelCall("change", `{"item":"a"}`), "allow"},
		{"looked at again: still there", runnelCall("change", `{"item":"a"}`), "allow"},
		{"a tool of the run, arguments unseen: runnel's server decides", unknownRunnel, "allow"},
		{"a client tool is the browser's at the call", runnelCall("connect", `{}`), "allow"},
		{"a server tool outside the run's", harness.AgentCall{Call: harness.Call{ID: "s1", Name: "mcp__files__list", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerServer, Server: "files"},
			`"Tool call execution denied. Tool 'mcp__files__list' is not among the tools this run allows from MCP server \"files\"."`},
		{"a server's policy", harness.AgentCall{Call: harness.Call{ID: "s2", Name: "mcp__files__delete", Input: json.RawMessage(`{}`)}, Owner: harness.OwnerServer, Server: "files"},
			`"Tool call execution denied. The permission policy of this run does not allow the tool 'mcp__files__delete', whatever its arguments; this does not change while the conversation continues. Do not call it again; tell the user it is unavailable and ask what they would like to do instead."`},
	}
	for _, s := range steps {
		if got := describeVerdict(g.Permit(context.Background(), s.call)); got != s.want {
			t.Errorf("%s: %s, want %s", s.name, got, s.want)
		}
	}
	// The run's tool: Dispatch takes the approval Permit only looked at.
	c := harness.Call{ID: "agent_change", Name: "change", Input: json.RawMessage(`{"item":"a"}`), Reissued: true}
	if got := describeVerdict(g.Dispatch(context.Background(), c)); got != "run" {
		t.Fatalf("Dispatch after Permit: %s, want run", got)
	}
	if got := describeVerdict(g.Permit(context.Background(), runnelCall("change", `{"item":"a"}`))); got != "pause" {
		t.Errorf("Permit after Dispatch took the approval: %s, want pause", got)
	}
}
