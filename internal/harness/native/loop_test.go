package native

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/strictjson"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// step is one scripted model answer: the chunks it streams and the
// response it ends with (or the error it fails with).
type step struct {
	chunks []provider.Chunk
	resp   *provider.Response
	err    error
}

// scriptedModel is the fake edge of these tests: it answers each call with
// the next scripted step and records the requests it got.
type scriptedModel struct {
	mu    sync.Mutex
	steps []step
	reqs  []provider.Request
}

func (m *scriptedModel) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	m.mu.Lock()
	r := *req
	r.Messages = append([]runnel.Message(nil), req.Messages...)
	m.reqs = append(m.reqs, r)
	i := len(m.reqs) - 1
	m.mu.Unlock()
	if i >= len(m.steps) {
		return nil, errors.New("script exhausted")
	}
	st := m.steps[i]
	for _, c := range st.chunks {
		emit(c)
	}
	if st.err != nil {
		return nil, st.err
	}
	return st.resp, nil
}

func textStep(text string, u runnel.Usage) step {
	return step{
		chunks: []provider.Chunk{{Kind: provider.ChunkText, Text: text}},
		resp:   &provider.Response{Content: []runnel.Block{{Type: runnel.BlockText, Text: text}}, Usage: u},
	}
}

func toolStep(calls ...runnel.Block) step {
	var chunks []provider.Chunk
	for i, c := range calls {
		chunks = append(chunks,
			provider.Chunk{Kind: provider.ChunkToolCall, Index: i, ToolCallID: c.ToolCallID, ToolName: c.ToolName},
			provider.Chunk{Kind: provider.ChunkToolArgs, Index: i, Text: string(c.Input)})
	}
	return step{chunks: chunks, resp: &provider.Response{Content: calls, Usage: runnel.Usage{Input: 1, Output: 1}}}
}

func call(id, name, input string) runnel.Block {
	return runnel.Block{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)}
}

func result(id, name, output string, isError bool) runnel.Block {
	return runnel.Block{Type: runnel.BlockToolResult, ToolCallID: id, ToolName: name, Output: runnel.TextOutput(output), IsError: isError}
}

// recorder is a sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []runnel.Event
}

func (r *recorder) Emit(e runnel.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

var echoTool = provider.Tool{Name: "echo", Description: "echo", Schema: json.RawMessage(`{"type":"object","required":["text"],"properties":{"text":{"type":"string"}}}`)}

// echoDispatcher executes every call by echoing its input.
var echoDispatcher = harness.DispatcherFunc(func(_ context.Context, c harness.Call) harness.Verdict {
	return harness.Execute(func(context.Context) harness.ToolResult { return harness.TextResult("echo:"+string(c.Input), false) })
})

func usageEvent(in, out int64) runnel.Event {
	return runnel.Event{Type: runnel.EventUsage, Usage: &runnel.Usage{Input: in, Output: out, Total: in + out}}
}

func TestRunTextOnly(t *testing.T) {
	m := &scriptedModel{steps: []step{{
		chunks: []provider.Chunk{
			{Kind: provider.ChunkReasoning, Text: "think"},
			{Kind: provider.ChunkText, Text: "Hel"},
			{Kind: provider.ChunkText, Text: "lo"},
		},
		resp: &provider.Response{
			Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "think"}, {Type: runnel.BlockText, Text: "Hello"}},
			Usage:   runnel.Usage{Input: 3, Output: 2},
		},
	}}}
	rec := &recorder{}
	out, err := Run(context.Background(), &Turn{Model: m, ModelID: "m", System: "sys", Messages: []runnel.Message{runnel.UserText("hi")}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	wantEvents := []runnel.Event{
		{Type: runnel.EventThoughtStart, ID: "thought_1"},
		{Type: runnel.EventThoughtDelta, ID: "thought_1", Delta: "think"},
		{Type: runnel.EventThoughtEnd, ID: "thought_1"},
		{Type: runnel.EventMessageStart, ID: "msg_1"},
		{Type: runnel.EventMessageDelta, ID: "msg_1", Delta: "Hel"},
		{Type: runnel.EventMessageDelta, ID: "msg_1", Delta: "lo"},
		{Type: runnel.EventMessageEnd, ID: "msg_1"},
		usageEvent(3, 2),
		{Type: runnel.EventDone, StopReason: runnel.StopEndTurn},
	}
	if diff := cmp.Diff(wantEvents, rec.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	want := &Outcome{
		Messages: []runnel.Message{{Role: runnel.RoleAssistant, Content: m.steps[0].resp.Content}},
		Output:   "Hello", Usage: runnel.Usage{Input: 3, Output: 2, Total: 5}, StopReason: runnel.StopEndTurn, Steps: 1,
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	if m.reqs[0].System != "sys" || m.reqs[0].Model != "m" {
		t.Errorf("request system/model = %q/%q", m.reqs[0].System, m.reqs[0].Model)
	}
}

func TestRunToolConversation(t *testing.T) {
	m := &scriptedModel{steps: []step{
		toolStep(call("c1", "echo", `{"text":"a"}`), call("c2", "echo", `{"text":"b"}`)),
		textStep("done", runnel.Usage{Input: 5, Output: 1}),
	}}
	rec := &recorder{}
	user := runnel.UserText("go")
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{user}, Tools: []provider.Tool{echoTool}, Dispatcher: echoDispatcher}, rec)
	if err != nil {
		t.Fatal(err)
	}
	assistant := runnel.Message{Role: runnel.RoleAssistant, Content: m.steps[0].resp.Content}
	tool := runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{
		result("c1", "echo", `echo:{"text":"a"}`, false),
		result("c2", "echo", `echo:{"text":"b"}`, false),
	}}
	final := runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: "done"}}}
	want := &Outcome{
		Messages: []runnel.Message{assistant, tool, final}, Output: "done",
		Usage: runnel.Usage{Input: 6, Output: 2, Total: 8}, StopReason: runnel.StopEndTurn, Steps: 2,
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]runnel.Message{user, assistant, tool}, m.reqs[1].Messages); diff != "" {
		t.Errorf("second request history (-want +got):\n%s", diff)
	}
	wantEvents := []runnel.Event{
		{Type: runnel.EventToolCall, ID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"a"}`)},
		{Type: runnel.EventToolCall, ID: "c2", Name: "echo", Input: json.RawMessage(`{"text":"b"}`)},
		usageEvent(1, 1),
		{Type: runnel.EventToolResult, ID: "c1", Output: runnel.TextOutput(`echo:{"text":"a"}`)},
		{Type: runnel.EventToolResult, ID: "c2", Output: runnel.TextOutput(`echo:{"text":"b"}`)},
		{Type: runnel.EventMessageStart, ID: "msg_2"},
		{Type: runnel.EventMessageDelta, ID: "msg_2", Delta: "done"},
		{Type: runnel.EventMessageEnd, ID: "msg_2"},
		usageEvent(6, 2), // cumulative: the run's totals so far
		{Type: runnel.EventDone, StopReason: runnel.StopEndTurn},
	}
	if diff := cmp.Diff(wantEvents, rec.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestToolsRunConcurrentlyResultsInOrder proves both halves: the first
// call cannot finish until the second has started (so they overlap), and
// its result still comes first.
func TestToolsRunConcurrentlyResultsInOrder(t *testing.T) {
	secondStarted := make(chan struct{})
	d := harness.DispatcherFunc(func(_ context.Context, c harness.Call) harness.Verdict {
		return harness.Execute(func(ctx context.Context) harness.ToolResult {
			if c.ID == "c1" {
				select {
				case <-secondStarted:
				case <-ctx.Done():
					return harness.TextResult("cancelled", true)
				}
				return harness.TextResult("first", false)
			}
			close(secondStarted)
			return harness.TextResult("second", false)
		})
	})
	m := &scriptedModel{steps: []step{
		toolStep(call("c1", "echo", `{"text":"a"}`), call("c2", "echo", `{"text":"b"}`)),
		textStep("ok", runnel.Usage{}),
	}}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")}, Tools: []provider.Tool{echoTool}, Dispatcher: d, Parallel: 2}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	want := []runnel.Block{result("c1", "echo", "first", false), result("c2", "echo", "second", false)}
	if diff := cmp.Diff(want, out.Messages[1].Content); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
}

func TestCallsAnsweredToTheModel(t *testing.T) {
	nested := provider.Tool{Name: "nested", Schema: json.RawMessage(`{"type":"object","required":["a","b"],
		"properties":{"a":{"type":"string"},"b":{"type":"object","required":["c"],"properties":{"c":{"type":"string"}}}}}`)}
	tests := []struct {
		name string
		call runnel.Block
		want runnel.Block
	}{
		{"unknown tool", call("c", "nope", `{}`),
			result("c", "nope", "Tool 'nope' is not available. Available tools: echo, nested.", true)},
		{"missing top-level and nested", call("c", "nested", `{"b":{}}`),
			result("c", "nested", "Tool 'nested' missing required argument(s): a, b.c. Retry the tool call with those argument fields populated.", true)},
		{"null counts as missing", call("c", "nested", `{"a":null,"b":{"c":"x"}}`),
			result("c", "nested", "Tool 'nested' missing required argument(s): a. Retry the tool call with those argument fields populated.", true)},
		{"nested only", call("c", "nested", `{"a":"x","b":{"d":1}}`),
			result("c", "nested", "Tool 'nested' missing required argument(s): b.c. Retry the tool call with those argument fields populated.", true)},
		{"array arguments", call("c", "echo", `[1]`),
			result("c", "echo", "Tool 'echo' arguments must be a JSON object, not an array. Retry the tool call with the arguments as one JSON object.", true)},
		{"invalid JSON arguments", call("c", "echo", `{"text":`),
			result("c", "echo", "Tool 'echo' arguments are not valid JSON. Retry the tool call with the arguments as one JSON object.", true)},
		{"complete arguments run", call("c", "nested", `{"a":"x","b":{"c":"y"}}`),
			result("c", "nested", `echo:{"a":"x","b":{"c":"y"}}`, false)},
		{"empty arguments are an empty object", call("c", "echo", ``),
			result("c", "echo", "Tool 'echo' missing required argument(s): text. Retry the tool call with those argument fields populated.", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scriptedModel{steps: []step{toolStep(tt.call), textStep("ok", runnel.Usage{})}}
			out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")},
				Tools: []provider.Tool{echoTool, nested}, Dispatcher: echoDispatcher}, &recorder{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]runnel.Block{tt.want}, out.Messages[1].Content); diff != "" {
				t.Errorf("tool result (-want +got):\n%s", diff)
			}
			if out.StopReason != runnel.StopEndTurn {
				t.Errorf("stop reason = %q, want end_turn", out.StopReason)
			}
		})
	}
}

func TestMaxSteps(t *testing.T) {
	m := &scriptedModel{steps: []step{
		toolStep(call("c1", "echo", `{"text":"a"}`)),
		toolStep(call("c2", "echo", `{"text":"b"}`)),
		textStep("never", runnel.Usage{}),
	}}
	rec := &recorder{}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")},
		Tools: []provider.Tool{echoTool}, Dispatcher: echoDispatcher, MaxSteps: 2}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.StopReason != runnel.StopMaxSteps || out.Steps != 2 || len(m.reqs) != 2 {
		t.Errorf("stop=%q steps=%d model calls=%d, want max_steps after 2", out.StopReason, out.Steps, len(m.reqs))
	}
	// The last step's calls are still answered, so the history can be replayed.
	if got := out.Messages[len(out.Messages)-1]; got.Role != runnel.RoleTool {
		t.Errorf("last message role = %q, want tool", got.Role)
	}
	if last := rec.events[len(rec.events)-1]; last.StopReason != runnel.StopMaxSteps {
		t.Errorf("last event = %+v, want done max_steps", last)
	}
}

func TestPauseDefersTheOtherCalls(t *testing.T) {
	ran := false
	d := harness.DispatcherFunc(func(_ context.Context, c harness.Call) harness.Verdict {
		if c.Name == "approve_me" {
			return harness.Pause(runnel.Interaction{ID: "int_" + c.ID, Kind: runnel.InteractionApproval, ToolCallID: c.ID, ToolName: c.Name, Input: c.Input})
		}
		return harness.Execute(func(context.Context) harness.ToolResult { ran = true; return harness.TextResult("ran", false) })
	})
	approve := provider.Tool{Name: "approve_me", Schema: runnel.PermissiveSchema()}
	m := &scriptedModel{steps: []step{toolStep(call("c1", "echo", `{"text":"a"}`), call("c2", "approve_me", `{}`), call("c3", "nope", `{}`))}}
	rec := &recorder{}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")},
		Tools: []provider.Tool{echoTool, approve}, Dispatcher: d}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Error("a call of a paused step was executed")
	}
	it := runnel.Interaction{ID: "int_c2", Kind: runnel.InteractionApproval, ToolCallID: "c2", ToolName: "approve_me", Input: json.RawMessage(`{}`)}
	want := &Outcome{
		Messages: []runnel.Message{
			{Role: runnel.RoleAssistant, Content: m.steps[0].resp.Content},
			{Role: runnel.RoleTool, Content: []runnel.Block{
				result("c1", "echo", harness.Deferred, true),
				result("c3", "nope", "Tool 'nope' is not available. Available tools: approve_me, echo.", true),
			}},
		},
		Usage: runnel.Usage{Input: 1, Output: 1, Total: 2}, StopReason: runnel.StopPaused, Steps: 1,
		Interactions: []runnel.Interaction{it},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	wantTail := []runnel.Event{
		{Type: runnel.EventToolResult, ID: "c1", Output: runnel.TextOutput(harness.Deferred), IsError: true},
		{Type: runnel.EventInteractionRequest, Interaction: &it},
		{Type: runnel.EventToolResult, ID: "c3", Output: want.Messages[1].Content[1].Output, IsError: true},
		{Type: runnel.EventDone, StopReason: runnel.StopPaused},
	}
	if diff := cmp.Diff(wantTail, rec.events[len(rec.events)-4:]); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestModelErrorKeepsWhatTheTurnAdded(t *testing.T) {
	boom := errors.New("model exploded")
	m := &scriptedModel{steps: []step{
		toolStep(call("c1", "echo", `{"text":"a"}`)),
		{chunks: []provider.Chunk{{Kind: provider.ChunkText, Text: "par"}}, err: boom},
	}}
	rec := &recorder{}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")},
		Tools: []provider.Tool{echoTool}, Dispatcher: echoDispatcher}, rec)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the model's error", err)
	}
	if len(out.Messages) != 2 || out.StopReason != "" {
		t.Errorf("outcome = %d messages, stop %q; want the 2 messages of step 1 and no stop reason", len(out.Messages), out.StopReason)
	}
	// The open text part is closed, and no done is emitted: the caller ends the stream.
	if last := rec.events[len(rec.events)-1]; last.Type != runnel.EventMessageEnd {
		t.Errorf("last event = %+v, want message_end", last)
	}
}

func TestToolPanicIsAToolError(t *testing.T) {
	d := harness.DispatcherFunc(func(context.Context, harness.Call) harness.Verdict {
		return harness.Execute(func(context.Context) harness.ToolResult { panic("kaboom") })
	})
	m := &scriptedModel{steps: []step{toolStep(call("c1", "echo", `{"text":"a"}`)), textStep("ok", runnel.Usage{})}}
	out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")}, Tools: []provider.Tool{echoTool}, Dispatcher: d}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	want := []runnel.Block{result("c1", "echo", "Tool failed with an internal error: kaboom", true)}
	if diff := cmp.Diff(want, out.Messages[1].Content); diff != "" {
		t.Errorf("tool result (-want +got):\n%s", diff)
	}
}

func TestCancelStopsToolsAndTheLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	d := harness.DispatcherFunc(func(context.Context, harness.Call) harness.Verdict {
		return harness.Execute(func(ctx context.Context) harness.ToolResult {
			close(started)
			<-ctx.Done()
			return harness.TextResult("cancelled", true)
		})
	})
	go func() { <-started; cancel() }()
	m := &scriptedModel{steps: []step{toolStep(call("c1", "echo", `{"text":"a"}`)), textStep("never", runnel.Usage{})}}
	_, err := Run(ctx, &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")}, Tools: []provider.Tool{echoTool}, Dispatcher: d}, &recorder{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(m.reqs) != 1 {
		t.Errorf("model called %d times after cancel, want 1", len(m.reqs))
	}
}

func TestMissingToolCallIDAndInvalidInputAreRepaired(t *testing.T) {
	run := func() *Outcome {
		m := &scriptedModel{steps: []step{
			{resp: &provider.Response{Content: []runnel.Block{{Type: runnel.BlockToolCall, ToolName: "echo", Input: json.RawMessage(`{bad`)}}}},
			textStep("ok", runnel.Usage{}),
		}}
		out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")}, Tools: []provider.Tool{echoTool}, Dispatcher: echoDispatcher}, &recorder{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := run()
	call := out.Messages[0].Content[0]
	if !regexp.MustCompile(`^call_[0-9a-f]{24}$`).MatchString(call.ToolCallID) {
		t.Errorf("generated id %q, want call_ and 24 hex digits", call.ToolCallID)
	}
	wantCall := runnel.Block{Type: runnel.BlockToolCall, ToolCallID: call.ToolCallID, ToolName: "echo", Input: runnel.TextOutput("{bad")}
	if diff := cmp.Diff(wantCall, call); diff != "" {
		t.Errorf("tool call (-want +got):\n%s", diff)
	}
	if r := out.Messages[1].Content[0]; !r.IsError || r.ToolCallID != call.ToolCallID {
		t.Errorf("result = %+v, want an error answering %s", r, call.ToolCallID)
	}
	if _, err := json.Marshal(out.Messages); err != nil {
		t.Errorf("messages do not encode: %v", err)
	}
	// A counter would give the next run's call the same id, and a
	// platform deduplicating by it would refuse a new call.
	if again := run().Messages[0].Content[0].ToolCallID; again == call.ToolCallID {
		t.Errorf("two runs generated the same id %q", again)
	}
}

// TestArgumentsReadOneWayOnly: arguments that a case-insensitive or
// last-wins decoder reads differently from an exact one never reach the
// dispatcher; the model is told, and the history keeps them as text, so a
// replay of it is not refused.
func TestArgumentsReadOneWayOnly(t *testing.T) {
	for _, args := range []string{
		`{"command":"echo hello","COMMAND":"rm -rf ~"}`,
		`{"command":"echo hello","command":"rm -rf ~"}`,
		`{"opts":{"path":"a","Path":"b"}}`,
		`{"TEXT":"rm -rf ~"}`, // the schema names text: a case-insensitive decoder reads this one
	} {
		m := &scriptedModel{steps: []step{
			{resp: &provider.Response{Content: []runnel.Block{{Type: runnel.BlockToolCall, ToolCallID: "c1", ToolName: "echo", Input: json.RawMessage(args)}}}},
			textStep("ok", runnel.Usage{}),
		}}
		dispatched := false
		d := harness.DispatcherFunc(func(context.Context, harness.Call) harness.Verdict {
			dispatched = true
			return harness.Answer(harness.TextResult("ran", false))
		})
		out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")}, Tools: []provider.Tool{echoTool}, Dispatcher: d}, &recorder{})
		if err != nil {
			t.Fatal(err)
		}
		if dispatched {
			t.Errorf("%s reached the dispatcher", args)
		}
		// What a strict reader refuses is kept as text, so a replay of the
		// history is not refused; a name in the wrong case is read one way
		// by every strict reader and stays as it was.
		want := runnel.TextOutput(args)
		if strictjson.Check([]byte(args)) == nil {
			want = json.RawMessage(args)
		}
		if got := out.Messages[0].Content[0].Input; !cmp.Equal(got, want) {
			t.Errorf("recorded input %s, want %s", got, want)
		}
		r := out.Messages[1].Content[0]
		if !r.IsError || !strings.Contains(r.OutputText(), "cannot be read one way only") {
			t.Errorf("%s: result %s, want the model told why", args, r.Output)
		}
	}
}

func TestEndReason(t *testing.T) {
	tests := []struct{ api, want string }{
		{"", "end_turn"}, {"end_turn", "end_turn"}, {"stop_sequence", "end_turn"}, {"tool_use", "end_turn"},
		{"max_tokens", "max_tokens"}, {"refusal", "refusal"},
	}
	for _, tt := range tests {
		m := &scriptedModel{steps: []step{textStep("cut", runnel.Usage{})}}
		m.steps[0].resp.StopReason = tt.api
		out, err := Run(context.Background(), &Turn{Model: m, Messages: []runnel.Message{runnel.UserText("go")}}, &recorder{})
		if err != nil {
			t.Fatal(err)
		}
		if out.StopReason != tt.want {
			t.Errorf("API stop %q: turn stop = %q, want %q", tt.api, out.StopReason, tt.want)
		}
	}
}
