package uistream

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func decodeMessages(t *testing.T, body string) []UIMessage {
	t.Helper()
	c, err := Decode([]byte(`{"messages":` + body + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return c.Messages
}

// TestConvert checks what each tool state means to a resume.
func TestConvert(t *testing.T) {
	msgs := decodeMessages(t, `[
	 {"id":"u1","role":"user","parts":[{"type":"text","text":"go"},{"type":"file","mediaType":"image/png","url":"data:image/png;base64,iVBORw0K"}]},
	 {"id":"a1","role":"assistant","parts":[
	  {"type":"step-start"},{"type":"reasoning","text":"think"},{"type":"text","text":"calling"},
	  {"type":"dynamic-tool","toolName":"read","toolCallId":"c0","state":"output-available","input":{"p":1},"output":"ok"},
	  {"type":"step-start"},
	  {"type":"dynamic-tool","toolName":"rm","toolCallId":"c1","state":"approval-responded","input":{},"approval":{"id":"int_c1","approved":true}},
	  {"type":"data-runnel-interaction","id":"int_c1","data":{"interactionId":"int_c1","kind":"user_approval","toolCallId":"c1","toolName":"rm","input":{},"signature":"1.sig"}},
	  {"type":"dynamic-tool","toolName":"rm","toolCallId":"c2","state":"output-denied","input":{},"approval":{"id":"int_c2","approved":false,"reason":"no"}},
	  {"type":"tool-connect","toolCallId":"c3","state":"output-available","input":{},"output":{"connected":true}},
	  {"type":"tool-connect","toolCallId":"c4","state":"output-error","input":{},"errorText":"popup blocked"},
	  {"type":"dynamic-tool","toolName":"rm","toolCallId":"c5","state":"output-available","input":{},"output":{"approved":false,"reason":"ai5 says no"}},
	  {"type":"data-runnel-interaction","id":"int_c5","data":{"interactionId":"int_c5","kind":"user_approval","toolCallId":"c5","toolName":"rm","input":{}}},
	  {"type":"dynamic-tool","toolName":"rm","toolCallId":"c6","state":"input-streaming"}
	 ]}]`)
	conv, err := Convert(msgs, func(name string) bool { return name == "connect" })
	if err != nil {
		t.Fatal(err)
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	call := func(id, name string) runnel.Block {
		in := raw(`{}`)
		if id == "c0" {
			in = raw(`{"p":1}`)
		}
		return runnel.Block{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: name, Input: in}
	}
	result := func(id, name, out, kind string, isErr bool) runnel.Block {
		return runnel.Block{Type: runnel.BlockToolResult, ToolCallID: id, ToolName: name, Output: raw(out), Kind: kind, IsError: isErr}
	}
	want := []runnel.Message{
		{Role: runnel.RoleUser, Content: []runnel.Block{{Type: runnel.BlockText, Text: "go"},
			{Type: runnel.BlockImage, MimeType: "image/png", Data: "iVBORw0K"}}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "think"},
			{Type: runnel.BlockText, Text: "calling"}, call("c0", "read")}},
		{Role: runnel.RoleTool, Content: []runnel.Block{result("c0", "read", `"ok"`, "", false)}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{call("c1", "rm"), call("c2", "rm"), call("c3", "connect"), call("c4", "connect"), call("c5", "rm")}},
		{Role: runnel.RoleTool, Content: []runnel.Block{
			// The signature comes back from the interaction's data part.
			result("c1", "rm", `{"approved":true,"interactionId":"int_c1","signature":"1.sig"}`, runnel.ResultKindApproval, false),
			result("c2", "rm", `"Tool call execution denied. Reason: no"`, "", true),
			result("c3", "connect", `{"connected":true}`, runnel.ResultKindClientOutput, false),
			result("c4", "connect", `"popup blocked"`, runnel.ResultKindClientOutput, true),
			// ai@5: the approval came back as the output of a client tool.
			result("c5", "rm", `{"approved":false,"reason":"ai5 says no","interactionId":"int_c5"}`, runnel.ResultKindApproval, false),
		}},
	}
	if diff := cmp.Diff(want, conv.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if conv.Continued != "a1" {
		t.Errorf("continued %q", conv.Continued)
	}
	// c1 and c5 carry answers to approvals, whose outcome settles them.
	wantTools := map[string]ToolRef{
		"c0": {Name: "read", Dynamic: true, Input: raw(`{"p":1}`)},
		"c1": {Name: "rm", Dynamic: true, Input: raw(`{}`), Answered: true, Approved: true},
		"c2": {Name: "rm", Dynamic: true, Input: raw(`{}`)},
		"c3": {Name: "connect", Input: raw(`{}`)},
		"c4": {Name: "connect", Input: raw(`{}`)},
		"c5": {Name: "rm", Dynamic: true, Input: raw(`{}`), Answered: true},
	}
	if diff := cmp.Diff(wantTools, conv.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

// TestStreamOrder checks the order the AI SDK client needs on a resume:
// calls the client shows are settled before the first step, not shown
// again; calls of earlier messages are not sent at all.
func TestStreamOrder(t *testing.T) {
	conv := &Conversation{Continued: "a1", Tools: map[string]ToolRef{"c1": {Name: "rm", Dynamic: true}}, Earlier: map[string]bool{"c0": true}}
	for _, p := range []Profile{AI5, AI6, AI7} {
		s := NewStream(Options{Profile: p, MessageID: "a1", Conversation: conv, Static: func(n string) bool { return n == "connect" }})
		got := streamed(s, &runnel.Result{OK: true, Status: runnel.StatusPaused, StopReason: runnel.StopPaused}, []runnel.Event{
			{Type: runnel.EventToolCall, ID: "c0", Name: "rm"},
			{Type: runnel.EventToolResult, ID: "c0", Output: raw(`"x"`), Denied: true, IsError: true},
			{Type: runnel.EventToolCall, ID: "c1", Name: "rm", Input: raw(`{}`)},
			{Type: runnel.EventToolResult, ID: "c1", Output: raw(`"Tool call execution denied."`), Denied: true, IsError: true},
			{Type: runnel.EventMessageStart, ID: "m"},
			{Type: runnel.EventMessageDelta, ID: "m", Delta: "ok"},
			{Type: runnel.EventToolCall, ID: "c2", Name: "connect", Input: raw(`{"s":1}`)},
			{Type: runnel.EventInteractionRequest, Interaction: &runnel.Interaction{ID: "int_c2", Kind: runnel.InteractionClientTool,
				ToolCallID: "c2", ToolName: "connect", Render: raw(`{"kind":"connect"}`), Signature: "9.sig"}},
			{Type: runnel.EventToolCall, ID: "c3", Name: "rm"},
			{Type: runnel.EventInteractionRequest, Interaction: &runnel.Interaction{ID: "int_c3", Kind: runnel.InteractionApproval,
				ToolCallID: "c3", ToolName: "rm", Signature: "9.sig3"}},
		}...)
		denied := `{"type":"tool-output-denied","toolCallId":"c1"}`
		approval := `{"type":"tool-approval-request","toolCallId":"c3","approvalId":"int_c3"}`
		finish := `{"type":"finish","finishReason":"tool-calls"}`
		approvalData := `{"type":"data-runnel-interaction","id":"int_c3","data":{"interactionId":"int_c3","kind":"user_approval","toolCallId":"c3","toolName":"rm","input":{},"signature":"9.sig3"}}`
		switch p {
		case AI5:
			denied = `{"type":"tool-output-error","toolCallId":"c1","errorText":"Tool call execution denied.","dynamic":true}`
			approval, finish = "", `{"type":"finish"}`
			approvalData = `{"type":"data-runnel-interaction","id":"int_c3","data":{"interactionId":"int_c3","kind":"user_approval","toolCallId":"c3","toolName":"rm","input":{},"render":{"kind":"approval"},"signature":"9.sig3"}}`
		case AI7:
			approval = `{"type":"tool-approval-request","toolCallId":"c3","approvalId":"int_c3","signature":"9.sig3"}`
		}
		want := []string{
			`{"type":"start","messageId":"a1"}`,
			denied,
			`{"type":"start-step"}`,
			`{"type":"text-start","id":"m"}`,
			`{"type":"text-delta","id":"m","delta":"ok"}`,
			`{"type":"tool-input-start","toolCallId":"c2","toolName":"connect"}`,
			`{"type":"tool-input-available","toolCallId":"c2","toolName":"connect","input":{"s":1}}`,
			`{"type":"data-runnel-interaction","id":"int_c2","data":{"interactionId":"int_c2","kind":"client_tool","toolCallId":"c2","toolName":"connect","input":{},"render":{"kind":"connect"},"signature":"9.sig"}}`,
			`{"type":"tool-input-start","toolCallId":"c3","toolName":"rm","dynamic":true}`,
			`{"type":"tool-input-available","toolCallId":"c3","toolName":"rm","input":{},"dynamic":true}`,
			approval,
			approvalData,
			`{"type":"text-end","id":"m"}`,
			`{"type":"finish-step"}`,
			`{"type":"data-runnel-result","data":{"ok":true,"status":"paused","stopReason":"paused"},"transient":true}`,
			finish,
		}
		want = slices.DeleteFunc(want, func(c string) bool { return c == "" })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", p, diff)
		}
	}
}

// streamed is the chunks a stream writes for events and the result, as
// JSON.
func streamed(s *Stream, res *runnel.Result, events ...runnel.Event) []string {
	var got []string
	add := func(cs []Chunk) {
		for _, c := range cs {
			b, _ := json.Marshal(c)
			got = append(got, string(b))
		}
	}
	add(s.Start())
	for _, e := range events {
		add(s.Event(e))
	}
	add(s.Finish(res))
	return got
}

// TestStreamSettlesAnACPAgentsAnswers: an ACP agent told of an approval
// makes the call again under an id of its own (the event order below is
// what the fake agent's resume sends). The part the client shows stands
// for it and takes its result; a denial, which the agent does not act on,
// and an approval the agent never acted on settle their parts too, so the
// client does not send the answer again.
func TestStreamSettlesAnACPAgentsAnswers(t *testing.T) {
	conv := &Conversation{Continued: "a1", Tools: map[string]ToolRef{
		"toolu_A": {Name: "delete_file", Dynamic: true, Input: raw(`{"path":"q3.docx"}`), Answered: true, Approved: true},
		"toolu_C": {Name: "delete_file", Dynamic: true, Input: raw(`{"path":"q4.docx"}`), Answered: true},
		"toolu_D": {Name: "delete_file", Dynamic: true, Input: raw(`{"path":"q5.docx"}`), Answered: true, Approved: true},
	}}
	events := []runnel.Event{
		// The same input, written another way, under a new id.
		{Type: runnel.EventToolCall, ID: "toolu_B", Name: "delete_file", Input: raw(`{ "path": "q3.docx" }`)},
		{Type: runnel.EventInteractionResponse, Answer: &runnel.InteractionAnswer{ID: "int_toolu_A", Kind: runnel.InteractionApproval, ToolCallID: "toolu_A", Approved: true}},
		{Type: runnel.EventToolResult, ID: "toolu_B", Output: raw(`"ref__delete ok"`)},
		// Called again later, after the approved call ran: a call of its own.
		{Type: runnel.EventToolCall, ID: "toolu_E", Name: "delete_file", Input: raw(`{"path":"q3.docx"}`)},
		{Type: runnel.EventToolResult, ID: "toolu_E", Output: raw(`"gone already"`)},
		{Type: runnel.EventMessageStart, ID: "msg_1"},
		{Type: runnel.EventMessageDelta, ID: "msg_1", Delta: "Deleted"},
		{Type: runnel.EventMessageEnd, ID: "msg_1"},
	}
	for _, p := range []Profile{AI5, AI6, AI7} {
		got := streamed(NewStream(Options{Profile: p, MessageID: "a1", Conversation: conv}),
			&runnel.Result{OK: true, Status: runnel.StatusCompleted, StopReason: "end_turn"}, events...)
		want := []string{
			`{"type":"start","messageId":"a1"}`,
			`{"type":"tool-output-denied","toolCallId":"toolu_C"}`,
			`{"type":"tool-output-available","toolCallId":"toolu_A","output":"ref__delete ok","dynamic":true}`,
			`{"type":"start-step"}`,
			`{"type":"tool-input-start","toolCallId":"toolu_E","toolName":"delete_file","dynamic":true}`,
			`{"type":"tool-input-available","toolCallId":"toolu_E","toolName":"delete_file","input":{"path":"q3.docx"},"dynamic":true}`,
			`{"type":"tool-output-available","toolCallId":"toolu_E","output":"gone already","dynamic":true}`,
			`{"type":"finish-step"}`,
			`{"type":"start-step"}`,
			`{"type":"text-start","id":"msg_1"}`,
			`{"type":"text-delta","id":"msg_1","delta":"Deleted"}`,
			`{"type":"text-end","id":"msg_1"}`,
			`{"type":"finish-step"}`,
			`{"type":"tool-output-error","toolCallId":"toolu_D","errorText":"The call was approved but did not run: the turn ended first.","dynamic":true}`,
			`{"type":"data-runnel-result","data":{"ok":true,"status":"completed","stopReason":"end_turn"},"transient":true}`,
			`{"type":"finish","finishReason":"stop"}`,
		}
		if p == AI5 {
			// ai@5 answered with the parts' outputs: only the result of
			// the approved call replaces its answer.
			want = slices.DeleteFunc(want, func(c string) bool {
				return strings.Contains(c, "toolu_C") || strings.Contains(c, "toolu_D")
			})
			want[len(want)-1] = `{"type":"finish"}`
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", p, diff)
		}
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestDecodeIsStrict(t *testing.T) {
	for _, body := range []string{
		`{"messages":[],"Messages":[]}`,
		`{"messages":[{"id":"a","role":"user","parts":[{"type":"text","text":"a","Text":"b"}]}]}`,
		`{"id":"x","id":"y"}`,
	} {
		if _, err := Decode([]byte(body)); err == nil || !strings.Contains(err.Error(), "twice") && !strings.Contains(err.Error(), "case") {
			t.Errorf("%s: %v", body, err)
		}
	}
}
