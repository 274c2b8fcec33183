package native

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/provider"
)

// answering settles c1 by running it, c2 with a stored answer, and
// pauses anything else; the loop must not care which is which.
func answering() harness.Dispatcher { return harness.DispatcherFunc(answer) }

func answer(_ context.Context, c harness.Call) harness.Verdict {
	switch c.ID {
	case "c1":
		return harness.Execute(func(context.Context) harness.ToolResult { return harness.TextResult("ran "+string(c.Input), false) })
	case "c2":
		return harness.Answer(harness.TextResult("denied", true))
	}
	return harness.Pause(runnel.Interaction{ID: "int_" + c.ID, Kind: runnel.InteractionApproval, ToolCallID: c.ID, ToolName: c.Name, Input: c.Input})
}

func TestResumeSettlesParkedCallsFirst(t *testing.T) {
	c1, c2 := call("c1", "echo", `{"text":"a"}`), call("c2", "echo", `{"text":"b"}`)
	history := []runnel.Message{runnel.UserText("go"), assistantCalls(c1, c2)}
	m := &scriptedModel{steps: []step{textStep("done", runnel.Usage{})}}
	rec := &recorder{}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: history, Tools: []provider.Tool{echoTool},
		Dispatcher: answering(), Parked: []runnel.Block{c1, c2}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	results := toolMsg(result("c1", "echo", `ran {"text":"a"}`, false), result("c2", "echo", "denied", true))
	if diff := cmp.Diff([]runnel.Message{runnel.UserText("go"), assistantCalls(c1, c2), results}, m.reqs[0].Messages); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(results, out.Messages[0]); diff != "" {
		t.Errorf("the turn's first message (-want +got):\n%s", diff)
	}
	wantHead := []runnel.Event{
		{Type: runnel.EventToolCall, ID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"a"}`)},
		{Type: runnel.EventToolCall, ID: "c2", Name: "echo", Input: json.RawMessage(`{"text":"b"}`)},
		{Type: runnel.EventToolResult, ID: "c1", Output: runnel.TextOutput(`ran {"text":"a"}`)},
		{Type: runnel.EventToolResult, ID: "c2", Output: runnel.TextOutput("denied"), IsError: true},
	}
	if diff := cmp.Diff(wantHead, rec.events[:4]); diff != "" {
		t.Errorf("first events (-want +got):\n%s", diff)
	}
	if out.StopReason != runnel.StopEndTurn || out.Steps != 1 {
		t.Errorf("stop %q after %d steps, want end_turn after 1", out.StopReason, out.Steps)
	}
}

// TestResumePausesAgain: a parked call nobody answered pauses the turn
// again without a model call, while the answered ones are settled (not
// deferred: a person answered them).
func TestResumePausesAgain(t *testing.T) {
	c1, c3 := call("c1", "echo", `{"text":"a"}`), call("c3", "echo", `{"text":"c"}`)
	m := &scriptedModel{}
	rec := &recorder{}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go"), assistantCalls(c1, c3)},
		Tools: []provider.Tool{echoTool}, Dispatcher: answering(), Parked: []runnel.Block{c1, c3}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	it := runnel.Interaction{ID: "int_c3", Kind: runnel.InteractionApproval, ToolCallID: "c3", ToolName: "echo", Input: json.RawMessage(`{"text":"c"}`)}
	want := &Outcome{
		Messages:     []runnel.Message{toolMsg(result("c1", "echo", `ran {"text":"a"}`, false))},
		StopReason:   runnel.StopPaused,
		Interactions: []runnel.Interaction{it},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	if len(m.reqs) != 0 {
		t.Errorf("the model was called %d times by a turn that paused again", len(m.reqs))
	}
	wantTail := []runnel.Event{
		{Type: runnel.EventToolResult, ID: "c1", Output: runnel.TextOutput(`ran {"text":"a"}`)},
		{Type: runnel.EventInteractionRequest, Interaction: &it},
		{Type: runnel.EventDone, StopReason: runnel.StopPaused},
	}
	if diff := cmp.Diff(wantTail, rec.events[2:]); diff != "" {
		t.Errorf("events after the tool calls (-want +got):\n%s", diff)
	}
}

// TestResumeChecksArguments: a parked call is checked like a fresh one;
// one that no longer fits its tool is answered, not run or paused.
func TestResumeChecksArguments(t *testing.T) {
	bad := call("c3", "echo", `{}`)
	m := &scriptedModel{steps: []step{textStep("ok", runnel.Usage{})}}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go"), assistantCalls(bad)},
		Tools: []provider.Tool{echoTool}, Dispatcher: answering(), Parked: []runnel.Block{bad}}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	want := toolMsg(result("c3", "echo", "Tool 'echo' missing required argument(s): text. Retry the tool call with those argument fields populated.", true))
	if diff := cmp.Diff(want, out.Messages[0]); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}
