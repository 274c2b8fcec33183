package run

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// The end-to-end pause and resume tests (DESIGN §5.3, §5.4): a real run
// manager behind runnel's HTTP front door (overHTTP), against the fake
// model server and a real callback endpoint,
// with every second request built the way a platform builds it: the
// history it sent, the paused result's messages, and the answers.

const deleteArgs = `{"item":"report.pdf"}`

func approvalInteraction(id, name, input string) runnel.Interaction {
	return runnel.Interaction{ID: "int_" + id, Kind: runnel.InteractionApproval, ToolCallID: id, ToolName: name,
		Input: json.RawMessage(input), Options: []string{"approve", "deny"}, ToolCall: toolCallOf(id, name, input)}
}

// toolCallOf is the toolCall an interaction carries for Agenta's frontend.
func toolCallOf(id, name, input string) *runnel.InteractionToolCall {
	return &runnel.InteractionToolCall{ToolCallID: id, Title: name, RawInput: json.RawMessage(input), ResolvedName: name}
}

// pausedRun runs a request whose model calls delete_item, and checks it
// paused for the approval without running anything.
func pausedRun(t *testing.T, m runner, llm *llmtest.Server, p *platform, api string) (*runnel.RunRequest, *runnel.Result) {
	t.Helper()
	req := baseRequest(llm, api, "Delete report.pdf")
	req.CustomTools = []runnel.ToolSpec{writeTool("delete_item")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL + "/tools/call", Authorization: callbackAuth}
	rec := &recorder{}
	res, err := m.Run(context.Background(), req, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Status != runnel.StatusPaused || res.StopReason != runnel.StopPaused {
		t.Fatalf("first turn = ok %v status %q stop %q error %q, want a paused turn", res.OK, res.Status, res.StopReason, res.Error)
	}
	if diff := cmp.Diff([]string{"assistant:tool_call:call_d"}, shape(res.Messages)); diff != "" {
		t.Errorf("paused turn's messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(res.Interactions, rec.interactions()); diff != "" {
		t.Errorf("interaction_request events differ from the result's interactions (-result +events):\n%s", diff)
	}
	wantTail := []string{`tool_call call_d delete_item ` + deleteArgs, "usage 10/5/15", "interaction_request", "done paused"}
	if s := rec.summary(); !cmp.Equal(wantTail, s[len(s)-4:]) {
		t.Errorf("paused stream ends %q, want %q", s[len(s)-4:], wantTail)
	}
	if n := len(p.received()); n != 0 {
		t.Errorf("the callback was called %d times before anyone approved", n)
	}
	return req, res
}

func TestApprovalRoundTrip(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(pauseScript(toolCall("call_d", "delete_item", deleteArgs)))
			defer llm.Close()
			p := newPlatform(t, nil)
			m := overHTTP(t, NewManager(nil))
			req, first := pausedRun(t, m, llm, p, api)
			if diff := cmp.Diff([]runnel.Interaction{approvalInteraction("call_d", "delete_item", deleteArgs)}, first.Interactions); diff != "" {
				t.Errorf("interactions (-want +got):\n%s", diff)
			}

			rec := &recorder{}
			second, err := m.Run(context.Background(), resumeRequest(t, req, first, approval("call_d", "delete_item", `{"approved":true}`)), rec)
			if err != nil {
				t.Fatal(err)
			}
			if !second.OK || second.Status != runnel.StatusCompleted || second.Output != "Last result: ref__delete_item ok" {
				t.Errorf("resumed turn = ok %v status %q output %q error %q", second.OK, second.Status, second.Output, second.Error)
			}
			wantEvents := []string{
				`tool_call call_d delete_item ` + deleteArgs,
				"interaction_response int_call_d call_d approved=true", // the resume consumed the approval
				`tool_result call_d error=false "ref__delete_item ok"`,
				"message msg_1: Last result: ref__delete_item ok",
				"usage 10/5/15",
				"done end_turn",
			}
			if diff := cmp.Diff(wantEvents, rec.summary()); diff != "" {
				t.Errorf("resumed events (-want +got):\n%s", diff)
			}
			wantShape := []string{"tool:tool_result:call_d:ref__delete_item ok", "assistant:text::Last result: ref__delete_item ok"}
			if diff := cmp.Diff(wantShape, shape(second.Messages)); diff != "" {
				t.Errorf("resumed turn's messages (-want +got):\n%s", diff)
			}
			// The model reads what the call did, never {"approved":true}.
			wantSeen := []string{
				"user: Delete report.pdf",
				`assistant: [call call_d delete_item ` + deleteArgs + `]`,
				"tool: [call_d=ref__delete_item ok]",
			}
			if diff := cmp.Diff(wantSeen, lastSeen(t, llm)); diff != "" {
				t.Errorf("what the model saw (-want +got):\n%s", diff)
			}
			calls := p.received()
			if len(calls) != 1 || !strings.Contains(calls[0].Body, `"id":"call_d"`) || calls[0].Authorization != callbackAuth {
				t.Errorf("callback requests = %+v, want one for call_d with the authorization", calls)
			}
			checkWellFormed(t, llm)
		})
	}
}

func TestDenialRoundTrip(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_d", "delete_item", deleteArgs)))
	defer llm.Close()
	p := newPlatform(t, nil)
	m := overHTTP(t, NewManager(nil))
	// Anthropic carries is_error to the model, so the flag is checked too.
	req, first := pausedRun(t, m, llm, p, APIAnthropic)
	rec := &recorder{}
	second, err := m.Run(context.Background(), resumeRequest(t, req, first,
		approval("call_d", "delete_item", `{"approved":false,"reason":"keep it for the audit"}`)), rec)
	if err != nil {
		t.Fatal(err)
	}
	denial := `Tool call execution denied. The user declined this 'delete_item' call, saying: "keep it for the audit". ` +
		`This is their decision about this call, not a temporary block: do not send it again or a reshaped version of it; ask the user what they would like to do instead.`
	wantSeen := []string{
		"user: Delete report.pdf",
		`assistant: [call call_d delete_item ` + deleteArgs + `]`,
		"tool: [call_d=" + denial + " (error)]",
	}
	if diff := cmp.Diff(wantSeen, lastSeen(t, llm)); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool:tool_result:call_d:" + denial + " (error)", "assistant:text::Last result: " + denial}, shape(second.Messages)); diff != "" {
		t.Errorf("resumed turn's messages (-want +got):\n%s", diff)
	}
	// A declined call is a denial, not a failure, for a frontend to draw.
	if s := rec.summary(); len(s) < 3 || s[1] != "interaction_response int_call_d call_d approved=false" || !strings.HasPrefix(s[2], "tool_result call_d denied") {
		t.Errorf("resumed events = %q, want the answer consumed, then the denial as a denied tool_result", s)
	}
	if n := len(p.received()); n != 0 {
		t.Errorf("a denied call reached the callback %d times", n)
	}
	if !second.OK || second.Status != runnel.StatusCompleted {
		t.Errorf("resumed turn = ok %v status %q", second.OK, second.Status)
	}
}

func TestClientToolRoundTrip(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(pauseScript(toolCall("call_c", "connect_account", `{"provider":"github"}`)))
			defer llm.Close()
			req := baseRequest(llm, api, "Connect my GitHub")
			req.CustomTools = []runnel.ToolSpec{clientTool("connect_account", `{"kind":"connect","provider":"github"}`)}
			m := overHTTP(t, NewManager(nil))
			rec := &recorder{}
			first, err := m.Run(context.Background(), req, rec)
			if err != nil {
				t.Fatal(err)
			}
			want := []runnel.Interaction{{ID: "int_call_c", Kind: runnel.InteractionClientTool, ToolCallID: "call_c", ToolName: "connect_account",
				Input: json.RawMessage(`{"provider":"github"}`), Render: json.RawMessage(`{"kind":"connect","provider":"github"}`),
				ToolCall: toolCallOf("call_c", "connect_account", `{"provider":"github"}`)}}
			if diff := cmp.Diff(want, first.Interactions); diff != "" {
				t.Errorf("interactions (-want +got):\n%s", diff)
			}
			if first.Status != runnel.StatusPaused || !first.OK {
				t.Errorf("first turn = ok %v status %q, want paused", first.OK, first.Status)
			}
			// render reaches the stream untouched, inside the payload.
			if !strings.Contains(string(rec.json(t)), `"kind":"client_tool","payload":{"toolCallId":"call_c","toolName":"connect_account","input":{"provider":"github"},"render":{"kind":"connect","provider":"github"},`) {
				t.Errorf("the interaction_request event does not carry render: %s", rec.json(t))
			}

			output := `{"connected":true,"account":"octocat"}`
			rec = &recorder{}
			second, err := m.Run(context.Background(), resumeRequest(t, req, first, clientOutput("call_c", "connect_account", output)), rec)
			if err != nil {
				t.Fatal(err)
			}
			if second.Output != "Last result: "+output || second.Status != runnel.StatusCompleted {
				t.Errorf("resumed turn = status %q output %q error %q", second.Status, second.Output, second.Error)
			}
			if diff := cmp.Diff("tool: [call_c="+output+"]", lastSeen(t, llm)[2]); diff != "" {
				t.Errorf("the tool result the model saw (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{`tool_call call_c connect_account {"provider":"github"}`, "tool_result call_c error=false " + output}, rec.summary()[:2]); diff != "" {
				t.Errorf("resumed events (-want +got):\n%s", diff)
			}
			checkWellFormed(t, llm)
		})
	}
}

func TestTwoClientToolsInOneTurn(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(
		toolCall("call_a", "connect_account", `{"provider":"github"}`),
		toolCall("call_b", "pick_file", `{"provider":"drive"}`)))
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIResponses, "Connect GitHub and pick a file")
	req.CustomTools = []runnel.ToolSpec{
		clientTool("connect_account", `{"kind":"connect"}`),
		clientTool("pick_file", `{"kind":"component","component":"FilePicker"}`),
	}
	m := overHTTP(t, NewManager(nil))
	first, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range first.Interactions {
		ids = append(ids, it.ID+"/"+string(it.Kind)+"/"+string(it.Render))
	}
	wantIDs := []string{`int_call_a/client_tool/{"kind":"connect"}`, `int_call_b/client_tool/{"kind":"component","component":"FilePicker"}`}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("interactions (-want +got):\n%s", diff)
	}
	// The browser answers in its own order; ids match them up.
	second, err := m.Run(context.Background(), resumeRequest(t, req, first,
		clientOutput("call_b", "pick_file", `{"file":"q3.xlsx"}`),
		clientOutput("call_a", "connect_account", `{"connected":true}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantSeen := []string{
		"user: Connect GitHub and pick a file",
		`assistant: [call call_a connect_account {"provider":"github"}] [call call_b pick_file {"provider":"drive"}]`,
		`tool: [call_a={"connected":true}] [call_b={"file":"q3.xlsx"}]`,
	}
	if diff := cmp.Diff(wantSeen, lastSeen(t, llm)); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
	if second.Status != runnel.StatusCompleted {
		t.Errorf("resumed turn status %q, error %q", second.Status, second.Error)
	}
	checkWellFormed(t, llm)
}

// TestApprovalAndClientToolInOneTurn: one step calls a tool that may run,
// one that needs approval and a client tool. The turn pauses for both
// interactions at once; the runnable call is deferred, not run.
func TestApprovalAndClientToolInOneTurn(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(pauseScript(
				toolCall("call_w", "get_weather", `{"city":"Paris"}`),
				toolCall("call_d", "delete_item", deleteArgs),
				toolCall("call_c", "connect_account", `{"provider":"github"}`)))
			defer llm.Close()
			p := newPlatform(t, nil)
			req := baseRequest(llm, api, "Weather, delete and connect")
			req.CustomTools = []runnel.ToolSpec{callbackTool("get_weather"), writeTool("delete_item"), clientTool("connect_account", `{"kind":"connect"}`)}
			req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL, Authorization: callbackAuth}
			m := overHTTP(t, NewManager(nil))
			first, err := m.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, it := range first.Interactions {
				kinds = append(kinds, it.ToolCallID+":"+string(it.Kind))
			}
			if diff := cmp.Diff([]string{"call_d:user_approval", "call_c:client_tool"}, kinds); diff != "" {
				t.Errorf("interactions (-want +got):\n%s", diff)
			}
			wantShape := []string{
				"assistant:tool_call:call_w", "assistant:tool_call:call_d", "assistant:tool_call:call_c",
				"tool:tool_result:call_w:DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required. (error)",
			}
			if diff := cmp.Diff(wantShape, shape(first.Messages)); diff != "" {
				t.Errorf("paused turn's messages (-want +got):\n%s", diff)
			}
			if n := len(p.received()); n != 0 {
				t.Errorf("the callback was called %d times by a paused step", n)
			}

			second, err := m.Run(context.Background(), resumeRequest(t, req, first,
				approval("call_d", "delete_item", `{"approved":true}`),
				clientOutput("call_c", "connect_account", `{"connected":true}`)), nil)
			if err != nil {
				t.Fatal(err)
			}
			wantSeen := []string{
				"user: Weather, delete and connect",
				`assistant: [call call_w get_weather {"city":"Paris"}] [call call_d delete_item ` + deleteArgs + `] [call call_c connect_account {"provider":"github"}]`,
				`tool: [call_w=DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required.` + errMark(api) + `] [call_d=ref__delete_item ok] [call_c={"connected":true}]`,
			}
			if diff := cmp.Diff(wantSeen, lastSeen(t, llm)); diff != "" {
				t.Errorf("what the model saw (-want +got):\n%s", diff)
			}
			if calls := p.received(); len(calls) != 1 || !strings.Contains(calls[0].Body, "ref__delete_item") {
				t.Errorf("callback requests = %+v, want only the approved delete_item", calls)
			}
			if second.Status != runnel.StatusCompleted {
				t.Errorf("resumed status %q, error %q", second.Status, second.Error)
			}
			checkWellFormed(t, llm)
		})
	}
}

// errMark is how an error result shows in seen: only Anthropic carries
// the flag to the model.
func errMark(api string) string {
	if api == APIAnthropic {
		return " (error)"
	}
	return ""
}

// TestNewMessageSupersedesParkedCall: the person types instead of
// answering. The parked call is denied as superseded, before the new
// message, and the conversation goes on; nothing wedges, now or later.
func TestNewMessageSupersedesParkedCall(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(pauseScript(toolCall("call_d", "delete_item", deleteArgs)))
			defer llm.Close()
			p := newPlatform(t, nil)
			m := overHTTP(t, NewManager(nil))
			req, first := pausedRun(t, m, llm, p, api)

			history := append(append(append([]runnel.Message(nil), req.Messages...), first.Messages...), runnel.UserText("Never mind. What is 2+2?"))
			req2 := withHistory(t, req, history)
			rec := &recorder{}
			second, err := m.Run(context.Background(), req2, rec)
			if err != nil {
				t.Fatal(err)
			}
			superseded := "Tool call execution denied. The user sent a new message instead of answering the request to run this 'delete_item' call, so it did not run. Answer their new message; call the tool again only if it still fits what they ask."
			if second.Output != "4." || second.Status != runnel.StatusCompleted {
				t.Errorf("second turn = status %q output %q error %q", second.Status, second.Output, second.Error)
			}
			wantSeen := []string{
				"user: Delete report.pdf",
				`assistant: [call call_d delete_item ` + deleteArgs + `]`,
				"tool: [call_d=" + superseded + errMark(api) + "]",
				"user: Never mind. What is 2+2?",
			}
			if diff := cmp.Diff(wantSeen, lastSeen(t, llm)); diff != "" {
				t.Errorf("what the model saw (-want +got):\n%s", diff)
			}
			wantShape := []string{"tool:tool_result:call_d:" + superseded + " (error)", "assistant:text::4."}
			if diff := cmp.Diff(wantShape, shape(second.Messages)); diff != "" {
				t.Errorf("second turn's messages (-want +got):\n%s", diff)
			}
			if s := rec.summary(); !strings.HasPrefix(s[1], "tool_result call_d denied") {
				t.Errorf("events = %q, want the superseded denial streamed, marked denied", s)
			}

			// The platform appends what the turn added after its own new
			// message; the next turn still gives the model a valid history.
			history = append(append(req2.Messages, second.Messages...), runnel.UserText("Thanks. And 2+2 again?"))
			third, err := m.Run(context.Background(), withHistory(t, req, history), nil)
			if err != nil {
				t.Fatal(err)
			}
			if third.Output != "4." || len(third.Interactions) != 0 {
				t.Errorf("third turn = output %q interactions %d error %q", third.Output, len(third.Interactions), third.Error)
			}
			if n := len(p.received()); n != 0 {
				t.Errorf("a superseded call reached the callback %d times", n)
			}
			checkWellFormed(t, llm)
		})
	}
}

// TestStaleApprovalLosesToDenyConfig: the policy is read again on resume,
// so a config changed to deny beats an approval given before the change.
func TestStaleApprovalLosesToDenyConfig(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_d", "delete_item", deleteArgs)))
	defer llm.Close()
	p := newPlatform(t, nil)
	m := overHTTP(t, NewManager(nil))
	req, first := pausedRun(t, m, llm, p, APIOpenAIChat)
	req2 := resumeRequest(t, req, first, approval("call_d", "delete_item", `{"approved":true}`))
	req2.Permissions = json.RawMessage(`{"default":"ask","rules":[{"pattern":"delete_item","permission":"deny"}]}`)
	second, err := m.Run(context.Background(), req2, nil)
	if err != nil {
		t.Fatal(err)
	}
	denied := "Tool call execution denied. The permission policy of this run does not allow the tool 'delete_item', whatever its arguments; this does not change while the conversation continues. Do not call it again; tell the user it is unavailable and ask what they would like to do instead."
	if diff := cmp.Diff("tool: [call_d="+denied+"]", lastSeen(t, llm)[2]); diff != "" {
		t.Errorf("the result the model saw (-want +got):\n%s", diff)
	}
	if n := len(p.received()); n != 0 {
		t.Errorf("a call the policy denies ran %d times on a stale approval", n)
	}
	if second.Status != runnel.StatusCompleted {
		t.Errorf("resumed status %q, error %q", second.Status, second.Error)
	}
}

// TestUnansweredResumePausesAgain: a paused turn sent back without
// answers asks the same questions again, under the same ids.
func TestUnansweredResumePausesAgain(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(
		toolCall("call_d", "delete_item", deleteArgs),
		toolCall("call_c", "connect_account", `{"provider":"github"}`)))
	defer llm.Close()
	p := newPlatform(t, nil)
	req := baseRequest(llm, APIOpenAIChat, "Delete and connect")
	req.CustomTools = []runnel.ToolSpec{writeTool("delete_item"), clientTool("connect_account", `{"kind":"connect"}`)}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
	m := overHTTP(t, NewManager(nil))
	first, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Only the approval is answered: it runs, and the client tool asks again.
	second, err := m.Run(context.Background(), resumeRequest(t, req, first, approval("call_d", "delete_item", `{"approved":true}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first.Interactions[1:], second.Interactions); diff != "" {
		t.Errorf("second pause's interactions (-want the first's client tool +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool:tool_result:call_d:ref__delete_item ok"}, shape(second.Messages)); diff != "" {
		t.Errorf("second turn's messages (-want +got):\n%s", diff)
	}
	if n := len(llm.Requests()); n != 1 {
		t.Errorf("the model was called %d times, want only by the first turn", n)
	}
	// Then the browser answers, on top of everything sent so far.
	history := append(append(append(req.Messages, first.Messages...), runnel.Message{Role: runnel.RoleTool,
		Content: []runnel.Block{approval("call_d", "delete_item", `{"approved":true}`)}}), second.Messages...)
	history = append(history, runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{clientOutput("call_c", "connect_account", `{"ok":1}`)}})
	third, err := m.Run(context.Background(), withHistory(t, req, history), nil)
	if err != nil {
		t.Fatal(err)
	}
	if third.Status != runnel.StatusCompleted || len(p.received()) != 1 {
		t.Errorf("third turn = status %q error %q, callback calls %d (want 1: the approval is spent)", third.Status, third.Error, len(p.received()))
	}
	wantSeen := []string{
		"user: Delete and connect",
		`assistant: [call call_d delete_item ` + deleteArgs + `] [call call_c connect_account {"provider":"github"}]`,
		`tool: [call_d=ref__delete_item ok] [call_c={"ok":1}]`,
	}
	if diff := cmp.Diff(wantSeen, lastSeen(t, llm)); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
	checkWellFormed(t, llm)
}

// TestMissingArgumentsNeverPause: a client tool or a call needing
// approval whose required arguments are missing is answered to the model,
// which can fix it; nobody is asked about a call that cannot run.
func TestMissingArgumentsNeverPause(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(
		toolCall("call_d", "delete_item", `{}`),
		toolCall("call_c", "connect_account", `{"provider":null}`)))
	defer llm.Close()
	p := newPlatform(t, nil)
	req := baseRequest(llm, APIOpenAIChat, "Delete and connect")
	req.CustomTools = []runnel.ToolSpec{writeTool("delete_item"), clientTool("connect_account", `{"kind":"connect"}`)}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
	res, err := overHTTP(t, NewManager(nil)).Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted || len(res.Interactions) != 0 {
		t.Errorf("run = status %q interactions %v, want completed without a pause", res.Status, res.Interactions)
	}
	want := `tool: [call_d=Tool 'delete_item' missing required argument(s): item. Retry the tool call with those argument fields populated.]` +
		` [call_c=Tool 'connect_account' missing required argument(s): provider. Retry the tool call with those argument fields populated.]`
	if diff := cmp.Diff(want, lastSeen(t, llm)[2]); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
}

// TestAnswersNextToANewMessage: answers sent together with a new user
// message still settle their calls, and nothing pauses again: the turn
// they belonged to is over.
func TestAnswersNextToANewMessage(t *testing.T) {
	superseded := "Tool call execution denied. The user sent a new message instead of answering the request to run this 'connect_account' call, so it did not run. Answer their new message; call the tool again only if it still fits what they ask."
	tests := []struct {
		name    string
		answers []runnel.Block
		want    string
		runs    int
	}{
		{"an approval runs; the unanswered client tool is superseded",
			[]runnel.Block{approval("call_d", "delete_item", `{"approved":true}`)},
			"tool: [call_d=ref__delete_item ok] [call_c=" + superseded + "]", 1},
		{"a browser output from before the new message does not pause again",
			[]runnel.Block{approval("call_d", "delete_item", `{"approved":false}`), clientOutput("call_c", "connect_account", `{"ok":1}`)},
			"tool: [call_d=" + declinedText("delete_item", "") + "] [call_c=" + superseded + "]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := llmtest.NewServer(pauseScript(
				toolCall("call_d", "delete_item", deleteArgs),
				toolCall("call_c", "connect_account", `{"provider":"github"}`)))
			defer llm.Close()
			p := newPlatform(t, nil)
			req := baseRequest(llm, APIOpenAIChat, "Delete and connect")
			req.CustomTools = []runnel.ToolSpec{writeTool("delete_item"), clientTool("connect_account", `{"kind":"connect"}`)}
			req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
			m := overHTTP(t, NewManager(nil))
			first, err := m.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			history := append(append(append([]runnel.Message(nil), req.Messages...), first.Messages...),
				runnel.Message{Role: runnel.RoleTool, Content: tt.answers}, runnel.UserText("Forget it. What is 2+2?"))
			second, err := m.Run(context.Background(), withHistory(t, req, history), nil)
			if err != nil {
				t.Fatal(err)
			}
			if second.Status != runnel.StatusCompleted || second.Output != "4." {
				t.Errorf("second turn = status %q output %q interactions %v", second.Status, second.Output, second.Interactions)
			}
			if diff := cmp.Diff(tt.want, lastSeen(t, llm)[2]); diff != "" {
				t.Errorf("the results the model saw (-want +got):\n%s", diff)
			}
			if n := len(p.received()); n != tt.runs {
				t.Errorf("the callback ran %d times, want %d", n, tt.runs)
			}
			checkWellFormed(t, llm)
		})
	}
}

// TestKindWinsOverShape: a client tool's real output may look like an
// approval; with kind "client_output" it is the output, and the model
// reads it as such.
func TestKindWinsOverShape(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_c", "connect_account", `{"provider":"github"}`)))
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "Connect")
	req.CustomTools = []runnel.ToolSpec{clientTool("connect_account", `{"kind":"connect"}`)}
	m := overHTTP(t, NewManager(nil))
	first, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	output := `{"approved":false,"scopes":["repo"]}`
	second, err := m.Run(context.Background(), resumeRequest(t, req, first, clientOutput("call_c", "connect_account", output)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("tool: [call_c="+output+"]", lastSeen(t, llm)[2]); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
	if second.Status != runnel.StatusCompleted {
		t.Errorf("status %q, error %q", second.Status, second.Error)
	}
}

// TestClientToolAnsweredInAnEarlierTurn: a client tool the browser
// answered in an earlier turn, whose output the model read, is done. The
// same call in a later turn must get its own output; taken by the earlier
// call (by its key), it would leave the later one asking the browser again.
func TestClientToolAnsweredInAnEarlierTurn(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_x", "connect_account", `{"provider":"github"}`)))
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "Connect github")
	req.CustomTools = []runnel.ToolSpec{clientTool("connect_account", `{"kind":"connect"}`)}
	call := func(id string) runnel.Message {
		return runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockToolCall,
			ToolCallID: id, ToolName: "connect_account", Input: json.RawMessage(`{"provider":"github"}`)}}}
	}
	history := []runnel.Message{
		runnel.UserText("Connect github"),
		call("call_a"),
		{Role: runnel.RoleTool, Content: []runnel.Block{clientOutput("call_a", "connect_account", `{"ok":1}`)}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: `Last result: {"ok":1}`}}},
		runnel.UserText("Connect github again"),
		call("call_b"),
		{Role: runnel.RoleTool, Content: []runnel.Block{clientOutput("call_b", "connect_account", `{"ok":2}`)}},
	}
	res, err := overHTTP(t, NewManager(nil)).Run(context.Background(), withHistory(t, req, history), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted || res.Output != `Last result: {"ok":2}` {
		t.Errorf("status %q output %q interactions %v; want the later call settled by its own output", res.Status, res.Output, res.Interactions)
	}
	checkWellFormed(t, llm)
}
