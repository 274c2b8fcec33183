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
