package native

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
)

func assistantCalls(calls ...runnel.Block) runnel.Message {
	return runnel.Message{Role: runnel.RoleAssistant, Content: calls}
}

func toolMsg(results ...runnel.Block) runnel.Message {
	return runnel.Message{Role: runnel.RoleTool, Content: results}
}

func TestAnswerInPlace(t *testing.T) {
	user := runnel.UserText("go")
	later := runnel.UserText("something else")
	c1, c2 := call("c1", "a", `{}`), call("c2", "b", `{}`)
	r1, r2 := result("c1", "a", "one", false), result("c2", "b", "two", false)
	deferred := result("c1", "a", harness.Deferred, true)
	approvalBlock := runnel.Block{Type: runnel.BlockToolResult, ToolCallID: "c1", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)}
	unanswered := result("c2", "b", Unanswered, true)
	tests := []struct {
		name string
		in   []runnel.Message
		want []runnel.Message
	}{
		{"a well-formed history is unchanged",
			[]runnel.Message{user, assistantCalls(c1, c2), toolMsg(r1, r2), later},
			[]runnel.Message{user, assistantCalls(c1, c2), toolMsg(r1, r2), later}},
		{"results come in call order",
			[]runnel.Message{user, assistantCalls(c1, c2), toolMsg(r2), toolMsg(r1)},
			[]runnel.Message{user, assistantCalls(c1, c2), toolMsg(r1, r2)}},
		{"results after a newer user message move before it",
			[]runnel.Message{user, assistantCalls(c1, c2), toolMsg(r1), later, toolMsg(r2)},
			[]runnel.Message{user, assistantCalls(c1, c2), toolMsg(r1, r2), later}},
		{"results in a user message leave its text where it was",
			[]runnel.Message{user, assistantCalls(c1), {Role: runnel.RoleUser, Content: []runnel.Block{r1, {Type: runnel.BlockText, Text: "and more"}}}},
			[]runnel.Message{user, assistantCalls(c1), toolMsg(r1), {Role: runnel.RoleUser, Content: []runnel.Block{{Type: runnel.BlockText, Text: "and more"}}}}},
		{"a real result beats a Deferred one, whatever the order",
			[]runnel.Message{user, assistantCalls(c1), toolMsg(r1), toolMsg(deferred)},
			[]runnel.Message{user, assistantCalls(c1), toolMsg(r1)}},
		{"an approval is never a result",
			[]runnel.Message{user, assistantCalls(c1), toolMsg(deferred), toolMsg(approvalBlock)},
			[]runnel.Message{user, assistantCalls(c1), toolMsg(deferred)}},
		{"of two real results the later wins",
			[]runnel.Message{user, assistantCalls(c1), toolMsg(result("c1", "a", "browser said", false)), toolMsg(r1)},
			[]runnel.Message{user, assistantCalls(c1), toolMsg(r1)}},
		{"a result for no call is dropped; a call with none is answered",
			[]runnel.Message{user, assistantCalls(c2), toolMsg(result("ghost", "x", "boo", false)), later},
			[]runnel.Message{user, assistantCalls(c2), toolMsg(unanswered), later}},
		{"a reused id belongs to its nearest call",
			[]runnel.Message{user, assistantCalls(c1), toolMsg(r1), later, assistantCalls(c1), toolMsg(result("c1", "a", "second", false))},
			[]runnel.Message{user, assistantCalls(c1), toolMsg(r1), later, assistantCalls(c1), toolMsg(result("c1", "a", "second", false))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, answerInPlace(tt.in)); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
		})
	}
}
