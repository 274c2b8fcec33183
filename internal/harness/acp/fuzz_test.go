package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// FuzzAgentFrames fuzzes runnel's reading of what an agent writes on
// stdout, one JSON-RPC message a line (the ACP SDK frames the lines and
// hands runnel the method and params): session/update notifications and
// session/request_permission requests, answered by a gate that allows
// every call but those named "deny_me". Whatever the agent sends, the
// turn's events are well formed (a part's deltas inside its start and
// end; every call reported once, before its one result; arguments a JSON
// object, or a string when they are not strict JSON) and the messages it adds are a conversation a resume can replay:
// every result answers an earlier call once, and a /run request carries
// them (internal/strictjson reads them back the same).
func FuzzAgentFrames(f *testing.F) {
	for _, frames := range [][]string{
		{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"thinking"}}}}`,
			`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}}}`},
		{`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call","toolCallId":"b1","title":"Bash","name":"Bash","kind":"execute","status":"pending","rawInput":{}}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"toolCall":{"toolCallId":"b1","name":"Bash","title":"Bash","rawInput":{"command":"ls -la"}},"options":[{"optionId":"a","kind":"allow_once"},{"optionId":"r","kind":"reject_once"}]}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"in_progress"}}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a b c"}}]}}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"ghost","status":"completed"}}}`,
			`{this is not json`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}`},
		{`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call","toolCallId":"toolu_01","title":"mcp__runnel__get_weather","kind":"other","status":"pending","rawInput":{"city":"Paris"},"_meta":{"claudeCode":{"toolName":"mcp__runnel__get_weather"}}}}}`,
			`{"id":2,"method":"session/request_permission","params":{"toolCall":{"toolCallId":"toolu_01"},"options":[{"optionId":"allow","kind":"allow_once"}]}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"toolu_01","status":"failed","rawOutput":"boom"}}}`},
		{`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call","toolCallId":"call_c1","kind":"execute","title":"mcp.runnel.get_weather","status":"in_progress","rawInput":{"server":"runnel","tool":"get_weather","arguments":{"city":"Paris"}}}}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call","toolCallId":"g1","title":"deny_me","status":"pending","content":[{"type":"content","content":{"type":"text","text":"{\"path\":\"/ws/a.txt\"}"}}]}}}`,
			`{"id":"p","method":"session/request_permission","params":{"toolCall":{"toolCallId":"g1"},"options":[{"optionId":"no","kind":"reject_once"}]}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"w1","title":"Write","kind":"edit","status":"completed","rawInput":{"file_path":"/ws/b.txt","content":"x"},"content":[{"type":"diff","path":"/ws/b.txt","newText":"x"}]}}}`},
		{`{"id":3,"method":"session/request_permission","params":{"toolCall":{"toolCallId":"pi-dialog","kind":"other","rawInput":{"method":"confirm","message":"{\"runnel\":\"runnel.pi.permission/v1\",\"toolCallId\":\"pi1\",\"toolName\":\"bash\",\"input\":{\"command\":\"rm -rf x\"}}"}},"options":[{"optionId":"y","kind":"allow_once"}]}}`,
			`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"pi1","status":"completed","rawOutput":{"ok":true}}}}`},
	} {
		f.Add([]byte(strings.Join(frames, "\n")))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		sink := &events{}
		s := &session{
			t:      &Turn{Tools: []Tool{weatherTool}, Servers: []Server{{Name: "github"}}, Gate: &testGate{policy: map[string]string{"deny_me": "deny"}}},
			log:    slog.New(slog.DiscardHandler),
			agent:  "fuzzed",
			sink:   sink,
			calls:  newTracker(newNamer([]Tool{weatherTool}, []Server{{Name: "github"}}, "/ws")),
			failCh: make(chan struct{}), pausedCh: make(chan struct{}),
		}
		s.execCtx, s.execCancel = context.WithCancel(t.Context())
		// A permission request waits for frames only until its context
		// ends: here at once.
		asked, cancel := context.WithCancel(t.Context())
		cancel()
		lines := 0
		for line := range bytes.Lines(stdout) {
			lines++
			var msg struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(line, &msg) != nil {
				continue // the SDK skips a line that is not a message
			}
			_, _ = s.handle(asked, msg.Method, msg.Params)
		}
		out := &Outcome{}
		s.finish(out, nil)
		if len(sink.all) > 4*lines+4*len(s.calls.all) {
			t.Fatalf("%d events from %d lines", len(sink.all), lines)
		}
		checkEvents(t, sink.all)
		checkReplayable(t, out.Messages)
	})
}

// checkEvents checks a turn's events: text and thought parts open, take
// deltas and close in order; every call is reported once with an object
// for its arguments (or the text of arguments that are not strict JSON),
// and answered at most once, after it was reported.
func checkEvents(t *testing.T, evs []runnel.Event) {
	t.Helper()
	open := ""
	called, answered := map[string]bool{}, map[string]bool{}
	for i, e := range evs {
		switch e.Type {
		case runnel.EventMessageStart, runnel.EventThoughtStart:
			if open != "" {
				t.Fatalf("event %d: part %s starts inside part %s", i, e.ID, open)
			}
			open = e.ID
		case runnel.EventMessageDelta, runnel.EventThoughtDelta, runnel.EventMessageEnd, runnel.EventThoughtEnd:
			if e.ID != open {
				t.Fatalf("event %d: %s of part %q while part %q is open", i, e.Type, e.ID, open)
			}
			if e.Type == runnel.EventMessageEnd || e.Type == runnel.EventThoughtEnd {
				open = ""
			}
		case runnel.EventToolCall:
			if open != "" || called[e.ID] || e.ID == "" {
				t.Fatalf("event %d: call %q reported twice, without an id, or inside part %q", i, e.ID, open)
			}
			called[e.ID] = true
			var obj map[string]json.RawMessage
			var text string
			if (json.Unmarshal(e.Input, &obj) != nil || obj == nil) && json.Unmarshal(e.Input, &text) != nil {
				t.Fatalf("event %d: call %q has arguments %s, neither an object nor the text of one", i, e.ID, e.Input)
			}
		case runnel.EventToolResult:
			if !called[e.ID] || answered[e.ID] {
				t.Fatalf("event %d: a result for call %q, which was not reported, or was answered before", i, e.ID)
			}
			answered[e.ID] = true
		}
	}
	if open != "" {
		t.Fatalf("part %q is still open at the end of the turn", open)
	}
}

// checkReplayable checks that msgs are a conversation the next request
// can replay: every result answers, once, a call of an earlier assistant
// message (a result may come after later text: the native loop moves it
// next to its call, harness/native answerInPlace), and a /run request
// carries the messages unchanged.
func checkReplayable(t *testing.T, msgs []runnel.Message) {
	t.Helper()
	calls, answered := map[string]bool{}, map[string]bool{}
	for i, m := range msgs {
		for _, b := range m.Content {
			switch {
			case b.Type == runnel.BlockToolCall && m.Role == runnel.RoleAssistant:
				calls[b.ToolCallID] = true
			case b.Type == runnel.BlockToolResult:
				if m.Role != runnel.RoleTool || !calls[b.ToolCallID] || answered[b.ToolCallID] {
					t.Fatalf("message %d: result %q answers no earlier call, or one answered before", i, b.ToolCallID)
				}
				answered[b.ToolCallID] = true
			}
		}
	}
	wire, err := json.Marshal(msgs)
	if err != nil {
		t.Fatalf("the messages do not encode: %v", err)
	}
	var back []runnel.Message
	if err := strictjson.Unmarshal(wire, &back); err != nil {
		t.Fatalf("a /run request could not carry the turn's messages: %v\n%s", err, wire)
	}
	if diff := cmp.Diff(msgs, back, cmp.Comparer(sameJSONValue)); diff != "" {
		t.Fatalf("the messages read back otherwise (-turn +read):\n%s", diff)
	}
}

// sameJSONValue reports whether two JSON texts hold the same value
// (encoding compacts a json.RawMessage and escapes <, > and & in it).
func sameJSONValue(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&va) == nil && db.Decode(&vb) == nil && cmp.Equal(va, vb)
}
