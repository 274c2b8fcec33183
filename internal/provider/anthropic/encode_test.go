package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

// TestCachedEncodingIsTheWholeEncoding: at every step of a growing
// conversation (including the messages the API merges, a message that
// converts to nothing between two of one role, and system messages), and
// after a history is rebuilt, the cached body equals encoding/json's
// encoding of the whole request.
func TestCachedEncodingIsTheWholeEncoding(t *testing.T) {
	text := func(role runnel.Role, s string) runnel.Message {
		return runnel.Message{Role: role, Content: []runnel.Block{{Type: runnel.BlockText, Text: s}}}
	}
	all := []runnel.Message{
		text(runnel.RoleSystem, "Be <brief>."),
		text(runnel.RoleUser, "hi & more"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "signed", Signature: "sig"},
			{Type: runnel.BlockText, Text: "calling"},
			{Type: runnel.BlockToolCall, ToolCallID: "t1", ToolName: "echo", Input: json.RawMessage(`{"n":"<1>"}`)}}},
		{Role: runnel.RoleTool, Content: []runnel.Block{{Type: runnel.BlockToolResult, ToolCallID: "t1", Output: runnel.TextOutput("ok")}}},
		// Merged into the tool message's user message, after its result.
		text(runnel.RoleUser, "and then?"),
		{Role: runnel.RoleTool, Content: []runnel.Block{{Type: runnel.BlockToolResult, ToolCallID: "t0", Output: runnel.TextOutput("late"), IsError: true}}},
		text(runnel.RoleAssistant, "answer"),
		// Unsigned reasoning converts to nothing: the users around it merge.
		text(runnel.RoleUser, "one"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "unsigned"}}},
		text(runnel.RoleUser, "two"),
		text(runnel.RoleSystem, "Also: be kind."),
		{Role: runnel.RoleUser},
		text(runnel.RoleAssistant, "done"),
	}
	tools := []provider.Tool{{Name: "echo", Description: "Echo <n>.", Schema: json.RawMessage(`{"type":"object"}`)}}
	m := New(provider.Config{})
	check := func(req *provider.Request) {
		t.Helper()
		parts, err := m.encode(req)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body(req)); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(parts, nil); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%d messages:\n got %s\nwant %s", len(req.Messages), got, want.Bytes())
		}
	}
	var history []runnel.Message
	for i, msg := range all {
		history = append(history, msg)
		req := &provider.Request{Model: "claude", System: "sys", Messages: history, Tools: tools, MaxTokens: 10 * i}
		check(req)
		check(req)
	}
	rebuilt := append([]runnel.Message(nil), all...)
	rebuilt[4] = text(runnel.RoleAssistant, "something else")
	check(&provider.Request{Model: "claude", Messages: rebuilt})
	check(&provider.Request{Model: "claude", Messages: all[:3]})
	check(&provider.Request{Model: "claude"})
}
