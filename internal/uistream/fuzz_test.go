package uistream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// FuzzChatBody fuzzes what POST /v1/chat reads from a browser: Decode,
// then Convert. A body Decode takes encodes and decodes to the same
// request; a conversation Convert makes is one a /run request could carry
// (it reads back strictly as the same messages), its calls have an id, a
// name and JSON arguments, every result answers a call of the assistant
// message right before it, the continued message's calls are the ones in
// Tools, and no part becomes more than two blocks.
func FuzzChatBody(f *testing.F) {
	for _, s := range []string{
		`{"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}],"trigger":"submit-message"}`,
		`{"messages":[{"id":"u","role":"user","parts":[{"type":"file","mediaType":"text/plain","url":"data:,a%20b"},{"type":"file","url":"data:image/png;base64,iVBORw0K"},{"type":"file","url":"https://x.test/a.pdf"}]}]}`,
		`{"messages":[{"id":"s","role":"system","parts":[{"type":"text","text":"be brief"}]},{"id":"a","role":"assistant","parts":[{"type":"step-start"},{"type":"tool-connect","toolCallId":"c1","state":"output-available","input":{"a":1},"output":{"ok":true}},{"type":"step-start"},{"type":"dynamic-tool","toolName":"rm","toolCallId":"c2","state":"approval-responded","input":{},"approval":{"id":"int_c2","approved":true}},{"type":"data-runnel-interaction","id":"int_c2","data":{"interactionId":"int_c2","kind":"user_approval","toolCallId":"c2","toolName":"rm","input":{},"signature":"1.sig"}}]}],"compat":"ai6","profile":"gpt"}`,
		`{"messages":[{"id":"a","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"rm","toolCallId":"c5","state":"output-available","input":null,"output":{"approved":false,"reason":"no"}},{"type":"data-runnel-interaction","data":{"kind":"user_approval","toolCallId":"c5","toolName":"rm","input":{}}},{"type":"tool-x","toolCallId":"c6","state":"output-denied","approval":{"id":"i","approved":false,"reason":"r"}},{"type":"tool-y","toolCallId":"c7","state":"output-error","errorText":"e"}]}]}`,
		`{"messages":[{"id":"a","role":"assistant","parts":[{"type":"tool-x","toolCallId":"c","state":"nonsense"}]}]}`,
		`{"messages":[{"role":"robot","parts":[]}],"model":"openai/gpt-5","customTools":[{"name":"connect","kind":"client"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, err := Decode(body)
		if err != nil {
			if chat != nil || err.Error() == "" {
				t.Fatalf("Decode = %v, %v; want no request and a sentence", chat, err)
			}
			return
		}
		again, err := json.Marshal(chat)
		if err != nil {
			t.Fatalf("a decoded body does not encode: %v", err)
		}
		chat2, err := Decode(again)
		if err != nil {
			t.Fatalf("a decoded body, encoded again, does not decode: %v\n%s", err, again)
		}
		if diff := cmp.Diff(chat.Messages, chat2.Messages, equalJSON); diff != "" {
			t.Fatalf("messages changed on a round trip (-first +second):\n%s", diff)
		}
		client := func(name string) bool { return name == "connect" }
		conv, err := Convert(chat.Messages, client)
		if err != nil {
			if conv != nil || err.Error() == "" {
				t.Fatalf("Convert = %v, %v; want no conversation and a sentence", conv, err)
			}
			return
		}
		checkConversation(t, chat.Messages, conv)
	})
}

// equalJSON compares JSON texts by the values they hold: encoding compacts
// a json.RawMessage and escapes <, > and & in it.
var equalJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	va, ea := jsonValue(a)
	vb, eb := jsonValue(b)
	if ea != nil || eb != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(va, vb)
})

func jsonValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkConversation checks what Convert made of msgs.
func checkConversation(t *testing.T, msgs []UIMessage, conv *Conversation) {
	t.Helper()
	parts := 0
	for _, m := range msgs {
		parts += len(m.Parts)
	}
	blocks := 0
	for i, m := range conv.Messages {
		blocks += len(m.Content)
		var calls map[string]bool
		if i > 0 && conv.Messages[i-1].Role == runnel.RoleAssistant {
			calls = map[string]bool{}
			for _, b := range conv.Messages[i-1].Content {
				calls[b.ToolCallID] = b.Type == runnel.BlockToolCall
			}
		}
		for _, b := range m.Content {
			checkBlock(t, m.Role, b, calls)
		}
	}
	if blocks > 2*parts {
		t.Fatalf("%d blocks from %d parts", blocks, parts)
	}
	// The conversation as a /run request carries it, read back strictly.
	wire, err := json.Marshal(conv.Messages)
	if err != nil {
		t.Fatalf("the conversation does not encode: %v", err)
	}
	var back []runnel.Message
	if err := strictjson.Unmarshal(wire, &back); err != nil {
		t.Fatalf("a /run request could not carry the conversation: %v\n%s", err, wire)
	}
	if diff := cmp.Diff(conv.Messages, back, equalJSON); diff != "" {
		t.Fatalf("the conversation reads back otherwise (-converted +read):\n%s", diff)
	}
	if conv.Continued == "" && len(conv.Tools) > 0 {
		t.Fatalf("tools %v without a continued message", conv.Tools)
	}
	last := map[string]bool{}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		for _, p := range msgs[n-1].Parts {
			last[p.ToolCallID] = true
		}
	}
	for id := range conv.Tools {
		if !last[id] {
			t.Fatalf("tool %q is not a part of the continued message", id)
		}
	}
}

// checkBlock checks one block of a message of role; calls are the tool
// call ids of the assistant message before it (nil when there is none).
func checkBlock(t *testing.T, role runnel.Role, b runnel.Block, calls map[string]bool) {
	t.Helper()
	switch b.Type {
	case runnel.BlockToolCall:
		if role != runnel.RoleAssistant || b.ToolCallID == "" || b.ToolName == "" || strictjson.Check(b.Input) != nil {
			t.Fatalf("a %s message's call %+v: want an assistant's call with an id, a name and JSON arguments", role, b)
		}
	case runnel.BlockToolResult:
		if role != runnel.RoleTool || !calls[b.ToolCallID] || strictjson.Check(b.Output) != nil {
			t.Fatalf("a %s message's result %+v answers no call of the assistant message before it, or its output is not JSON", role, b)
		}
	case runnel.BlockImage, runnel.BlockResource:
		if role != runnel.RoleUser {
			t.Fatalf("a file in a %s message", role)
		}
		if _, err := base64.StdEncoding.DecodeString(b.Data); err != nil {
			t.Fatalf("a file's data is not base64: %v", err)
		}
		if b.URI != "" && !strings.HasPrefix(b.URI, "http://") && !strings.HasPrefix(b.URI, "https://") {
			t.Fatalf("a file's URI %q is not http(s)", b.URI)
		}
	case runnel.BlockText, runnel.BlockReasoning:
	default:
		t.Fatalf("a block of type %q", b.Type)
	}
}
