package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

// encodeWhole is the body as encoding/json writes the whole request struct:
// what the cached encoding must equal byte for byte.
func encodeWhole(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func joined(parts [][]byte, err error) ([]byte, error) { return bytes.Join(parts, nil), err }

// conversation is a history with every kind of block, grown step by step
// as the loop grows it: appended to, never changed.
func conversation() []runnel.Message {
	return []runnel.Message{
		{Role: runnel.RoleSystem, Content: []runnel.Block{{Type: runnel.BlockText, Text: "Be <brief> & exact."}}},
		{Role: runnel.RoleUser, Content: []runnel.Block{{Type: runnel.BlockText, Text: "Look at this"},
			{Type: runnel.BlockImage, MimeType: "image/png", Data: "iVBORw0K"},
			{Type: runnel.BlockResource, MimeType: "application/pdf", Data: "JVBERi0", Filename: "q3.pdf"}}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "hmm"},
			{Type: runnel.BlockText, Text: "calling"},
			{Type: runnel.BlockToolCall, ToolCallID: "c1", ToolName: "echo", Input: json.RawMessage(`{"n":1,"s":"<x>"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "c2", ToolName: "echo", Input: json.RawMessage(`{}`)}}},
		{Role: runnel.RoleTool, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "c1", Output: runnel.TextOutput("ok")},
			{Type: runnel.BlockToolResult, ToolCallID: "c2", Output: json.RawMessage(`{"a":[1,2]}`), IsError: true}}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "only thinking"}}},
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "c3", Output: runnel.TextOutput("late result")},
			{Type: runnel.BlockText, Text: "and now?"}}},
		{Role: runnel.RoleUser},
	}
}

// TestCachedEncodingIsTheWholeEncoding: at every step of a growing
// conversation, and after a history is rebuilt (new messages at the same
// positions), the cached body equals encoding/json's encoding of the whole
// request, for both APIs.
func TestCachedEncodingIsTheWholeEncoding(t *testing.T) {
	tools := []provider.Tool{{Name: "echo", Description: "Echo <n>.", Schema: json.RawMessage(`{"type":"object"}`)}}
	all := conversation()
	chat, resp := NewChat(provider.Config{}), NewResponses(provider.Config{})
	check := func(req *provider.Request) {
		t.Helper()
		got, err := joined(chat.encode(req))
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeWhole(t, chat.body(req)); !bytes.Equal(got, want) {
			t.Fatalf("chat, %d messages:\n got %s\nwant %s", len(req.Messages), got, want)
		}
		got, err = joined(resp.encode(req))
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeWhole(t, responsesBody(req)); !bytes.Equal(got, want) {
			t.Fatalf("responses, %d messages:\n got %s\nwant %s", len(req.Messages), got, want)
		}
	}
	var history []runnel.Message
	for i, m := range all {
		history = append(history, m)
		req := &provider.Request{Model: "m", System: "sys", Messages: history, Tools: tools, MaxTokens: 100 * i}
		check(req)
		check(req) // from the cache
	}
	// A rebuilt history: other messages at the same positions.
	rebuilt := conversation()
	rebuilt[1] = runnel.UserText("something else")
	rebuilt[3].Content = append([]runnel.Block(nil), rebuilt[3].Content[:1]...)
	check(&provider.Request{Model: "m", Messages: rebuilt})
	// No message at all: the list is still there, as an API wants it
	// (the whole struct's encoding cannot show this: the tail leaves the
	// list out).
	empty := &provider.Request{Model: "m"}
	if b, _ := joined(chat.encode(empty)); !bytes.Contains(b, []byte(`"messages":[]`)) {
		t.Errorf("chat without messages: %s", b)
	}
	if b, _ := joined(resp.encode(empty)); !bytes.Contains(b, []byte(`"input":[]`)) {
		t.Errorf("responses without messages: %s", b)
	}
}
