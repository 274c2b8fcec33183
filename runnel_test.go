package runnel_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func TestMessageContentShapes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want runnel.Message
	}{
		{"string", `{"role":"user","content":"hi"}`, runnel.UserText("hi")},
		{"null", `{"role":"assistant","content":null}`, runnel.Message{Role: runnel.RoleAssistant}},
		{"bare strings", `{"role":"user","content":["a",{"type":"text","text":"b"}]}`,
			runnel.Message{Role: runnel.RoleUser, Content: []runnel.Block{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}}},
		{"tool result", `{"role":"tool","content":[{"type":"tool_result","toolCallId":"c1","output":{"approved":true},"kind":"approval"}]}`,
			runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{{Type: "tool_result", ToolCallID: "c1", Output: json.RawMessage(`{"approved":true}`), Kind: "approval"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got runnel.Message
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var m runnel.Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":42}`), &m); err == nil {
		t.Error("numeric content decoded without error")
	}
}

func TestToolSpecSchema(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"name":"a","inputSchema":{"type":"object","properties":{"x":{}}}}`, `{"type":"object","properties":{"x":{}}}`},
		{`{"name":"a","input_schema":{"type":"object"}}`, `{"type":"object"}`},
		{`{"name":"a"}`, `{"type":"object","properties":{},"additionalProperties":true}`},
		{`{"name":"a","inputSchema":null}`, `{"type":"object","properties":{},"additionalProperties":true}`},
	}
	for _, tt := range tests {
		var s runnel.ToolSpec
		if err := json.Unmarshal([]byte(tt.in), &s); err != nil {
			t.Fatal(err)
		}
		if string(s.InputSchema) != tt.want {
			t.Errorf("%s: schema = %s, want %s", tt.in, s.InputSchema, tt.want)
		}
	}
	var d runnel.ToolSpec
	if err := json.Unmarshal([]byte(`{"name":"w","call":{"method":"POST","path":"/x","args_into":"data.inputs"}}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Call == nil || d.Call.ArgsInto != "data.inputs" || d.EffectiveKind() != runnel.ToolKindCallback {
		t.Errorf("direct call decoded as %+v", d.Call)
	}
}

func TestEventWireShapes(t *testing.T) {
	tests := []struct {
		e    runnel.Event
		want string
	}{
		{runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: "he"}, `{"type":"message_delta","id":"m1","delta":"he"}`},
		{runnel.Event{Type: runnel.EventToolCall, ID: "c1", Name: "get"}, `{"type":"tool_call","id":"c1","name":"get","input":{}}`},
		{runnel.Event{Type: runnel.EventToolResult, ID: "c1", Output: runnel.TextOutput("ok"), IsError: true}, `{"type":"tool_result","id":"c1","output":"ok","isError":true}`},
		{runnel.Event{Type: runnel.EventUsage, Usage: &runnel.Usage{Input: 1, Output: 2, Total: 3}}, `{"type":"usage","input":1,"output":2,"total":3,"cost":0}`},
		{runnel.Event{Type: runnel.EventDone, StopReason: "end_turn"}, `{"type":"done","stopReason":"end_turn"}`},
		{runnel.Event{Type: runnel.EventError, Message: "boom", Code: runnel.CodeProviderError}, `{"type":"error","message":"boom","code":"provider_error"}`},
		{runnel.Event{Type: runnel.EventInteractionRequest, Interaction: &runnel.Interaction{ID: "i1", Kind: runnel.InteractionClientTool, ToolCallID: "c1", ToolName: "connect", Input: json.RawMessage(`{"a":1}`), Render: json.RawMessage(`{"kind":"connect"}`)}},
			`{"type":"interaction_request","id":"i1","kind":"client_tool","payload":{"toolCallId":"c1","toolName":"connect","input":{"a":1},"render":{"kind":"connect"}}}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.e)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("Marshal(%s) = %s\nwant %s", tt.e.Type, got, tt.want)
		}
		var back runnel.Event
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if string(again) != tt.want {
			t.Errorf("round trip of %s = %s", tt.e.Type, again)
		}
	}
	if _, err := json.Marshal(runnel.Event{Type: "bogus"}); err == nil {
		t.Error("an unknown event type marshalled")
	}
}

func TestErrorHelpers(t *testing.T) {
	cause := json.Unmarshal([]byte("{"), new(any))
	err := runnel.Errorf(runnel.CodeInvalidRequest, "bad body: %w", cause)
	if runnel.ErrorCodeOf(err) != runnel.CodeInvalidRequest || runnel.ErrorMessage(err) != err.Message {
		t.Errorf("code %q message %q", runnel.ErrorCodeOf(err), runnel.ErrorMessage(err))
	}
	if err.Unwrap() != cause {
		t.Error("Errorf lost the %w cause")
	}
	if runnel.ErrorMessage(cause) != "internal error" || runnel.ErrorCodeOf(cause) != runnel.CodeInternal {
		t.Error("a plain error must read as internal")
	}
}

func TestOutputTextUnquotes(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{`"a\"b\n\u00e9"`, "a\"b\né"},
		{` "x" `, "x"},
		{"\"bad \xff utf8\"", "bad \ufffd utf8"},
		{`{"a":1}`, `{"a":1}`},
		{`"unterminated`, `"unterminated`},
		{``, ``},
	} {
		if got := (runnel.Block{Output: json.RawMessage(c.out)}).OutputText(); got != c.want {
			t.Errorf("OutputText(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}
