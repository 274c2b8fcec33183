package run

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

// A cold resume renders the conversation as one prompt (DESIGN §5.4):
// who said what, each call and its (capped) result, and each answer to an
// approval, with the instruction to make an approved call again.
func TestRenderHistory(t *testing.T) {
	long := strings.Repeat("x", 5000)
	msgs := []runnel.Message{
		runnel.UserText("list the files"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{
			{Type: runnel.BlockText, Text: "Listing."},
			{Type: runnel.BlockToolCall, ToolCallID: "c1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "c2", ToolName: "get_user", Input: json.RawMessage(`{}`)},
		}},
		{Role: runnel.RoleTool, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "c1", Output: runnel.TextOutput(long)},
			{Type: runnel.BlockToolResult, ToolCallID: "c2", Output: runnel.TextOutput("DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required."), IsError: true},
		}},
		runnel.UserText("now delete them"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{
			{Type: runnel.BlockToolCall, ToolCallID: "c3", ToolName: "Bash", Input: json.RawMessage(`{"command":"rm *"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "c4", ToolName: "Write", Input: json.RawMessage(`{"path":"a"}`)},
		}},
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "c3", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)},
			{Type: runnel.BlockToolResult, ToolCallID: "c4", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":false,"reason":"not that one"}`)},
		}},
	}
	got := renderHistory(msgs, func(string) bool { return false }, DefaultHistoryChars)
	want := "Conversation so far:\n\n" +
		"User: list the files\n" +
		"Assistant: Listing.\n" +
		`[called Bash({"command":"ls"})]` + "\n" +
		`[called get_user({})]` + "\n" +
		"[Bash returned: " + strings.Repeat("x", 4000) + "… [1000 more characters]]\n" +
		"[get_user was not run: the turn paused for another call first.]\n" +
		"User: now delete them\n" +
		`[called Bash({"command":"rm *"})]` + "\n" +
		`[called Write({"path":"a"})]` + "\n" +
		"[user APPROVED Bash; the call has NOT run yet. Call the tool again with the same arguments now to execute it.]\n" +
		`[user DENIED Write; the call was not executed. Their reason: "not that one"]` + "\n\n" +
		"Continue the user's latest request from where it stopped, taking the answers above into account."
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("renderHistory (-want +got):\n%s", diff)
	}

	// Past the cap the oldest lines go; the header, the latest lines and
	// the closing instruction stay.
	short := renderHistory(msgs, func(string) bool { return false }, 600)
	if len(short) > 600 || !strings.HasPrefix(short, "Conversation so far:") || strings.Contains(short, "list the files") ||
		!strings.Contains(short, "[user DENIED Write") || !strings.HasSuffix(short, "into account.") {
		t.Errorf("capped rendering (%d chars):\n%s", len(short), short)
	}
}
