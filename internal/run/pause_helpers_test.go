package run

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// Tool specs of the pause and resume tests.

// writeTool is a callback tool that changes something: not read-only, so
// the default plan (allow_reads) asks before it runs.
func writeTool(name string) runnel.ToolSpec {
	return runnel.ToolSpec{
		Name: name, Description: "Change something", CallRef: "ref__" + name,
		InputSchema: json.RawMessage(`{"type":"object","required":["item"],"properties":{"item":{"type":"string"}}}`),
	}
}

// clientTool is a client tool with a render hint and a required argument.
func clientTool(name, render string) runnel.ToolSpec {
	return runnel.ToolSpec{
		Name: name, Description: "Ask the browser", Kind: runnel.ToolKindClient, Render: json.RawMessage(render),
		InputSchema: json.RawMessage(`{"type":"object","required":["provider"],"properties":{"provider":{"type":"string"}}}`),
	}
}

func toolCall(id, name, args string) llmtest.ToolCall {
	return llmtest.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// pauseScript makes the model call the given tools on the user's first
// message, report every tool result it got once they are answered, and
// answer "4." to a new question about 2+2.
func pauseScript(calls ...llmtest.ToolCall) llmtest.Script {
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "new question", When: llmtest.Match{LastRole: llmtest.RoleUser, LastUserContains: "2+2"},
			Reply: llmtest.Reply{Text: "4."}},
		{Name: "report", When: llmtest.Match{LastRole: llmtest.RoleTool},
			Reply: llmtest.Reply{Text: "Last result: {{last_tool_result}}"}},
		{Name: "act", When: llmtest.Match{LastRole: llmtest.RoleUser},
			Reply: llmtest.Reply{ToolCalls: calls}},
	}}
}

// approval is the block a platform sends back for a person's answer.
func approval(toolCallID, toolName, output string) runnel.Block {
	return runnel.Block{Type: runnel.BlockToolResult, ToolCallID: toolCallID, ToolName: toolName,
		Kind: runnel.ResultKindApproval, Output: json.RawMessage(output)}
}

// clientOutput is the block a platform sends back for a browser's output.
func clientOutput(toolCallID, toolName, output string) runnel.Block {
	return runnel.Block{Type: runnel.BlockToolResult, ToolCallID: toolCallID, ToolName: toolName,
		Kind: runnel.ResultKindClientOutput, Output: json.RawMessage(output)}
}

// resumeRequest is the next request as a platform builds it: the history
// it sent, what the paused turn added, and a tool message with the
// answers, all through JSON as over the wire.
func resumeRequest(t *testing.T, req *runnel.RunRequest, paused *runnel.Result, answers ...runnel.Block) *runnel.RunRequest {
	t.Helper()
	history := append(append([]runnel.Message(nil), req.Messages...), paused.Messages...)
	if len(answers) > 0 {
		history = append(history, runnel.Message{Role: runnel.RoleTool, Content: answers})
	}
	return withHistory(t, req, history)
}

// withHistory copies req with messages sent through JSON.
func withHistory(t *testing.T, req *runnel.RunRequest, history []runnel.Message) *runnel.RunRequest {
	t.Helper()
	raw, err := json.Marshal(history)
	if err != nil {
		t.Fatal(err)
	}
	next := *req
	next.Messages = nil
	if err := json.Unmarshal(raw, &next.Messages); err != nil {
		t.Fatal(err)
	}
	return &next
}

// seen renders what the model received in one request, one line per
// message: "user: text", "assistant: text [calls id name args…]",
// "tool: id=text (error)…".
func seen(c llmtest.Conversation) []string {
	var out []string
	for _, m := range c.Messages {
		line := m.Role + ":"
		if m.Text != "" {
			line += " " + m.Text
		}
		for _, tc := range m.ToolCalls {
			line += fmt.Sprintf(" [call %s %s %s]", tc.ID, tc.Name, tc.Arguments)
		}
		for _, tr := range m.ToolResults {
			line += fmt.Sprintf(" [%s=%s", tr.CallID, tr.Text)
			if tr.IsError {
				line += " (error)"
			}
			line += "]"
		}
		out = append(out, line)
	}
	return out
}

// lastSeen is what the model received in its latest request.
func lastSeen(t *testing.T, llm *llmtest.Server) []string {
	t.Helper()
	reqs := llm.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	return seen(reqs[len(reqs)-1].Conversation)
}

// checkWellFormed fails when any request the model got has a tool call
// not answered by exactly one result in the message right after it, or a
// result anywhere else: what every real model API refuses.
func checkWellFormed(t *testing.T, llm *llmtest.Server) {
	t.Helper()
	for n, r := range llm.Requests() {
		msgs := r.Conversation.Messages
		for i, m := range msgs {
			if len(m.ToolResults) > 0 && (i == 0 || len(msgs[i-1].ToolCalls) == 0) {
				t.Errorf("request %d: message %d has tool results that follow no tool calls: %v", n, i, seen(r.Conversation))
			}
			if len(m.ToolCalls) == 0 {
				continue
			}
			var want, got []string
			for _, tc := range m.ToolCalls {
				want = append(want, tc.ID)
			}
			if i+1 < len(msgs) {
				for _, tr := range msgs[i+1].ToolResults {
					got = append(got, tr.CallID)
				}
			}
			if strings.Join(want, ",") != strings.Join(got, ",") {
				t.Errorf("request %d: calls %v are answered by %v: %v", n, want, got, seen(r.Conversation))
			}
		}
	}
}

// interactionEvents are the interaction_request events of a stream.
func (r *recorder) interactions() []runnel.Interaction {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runnel.Interaction
	for _, e := range r.events {
		if e.Type == runnel.EventInteractionRequest {
			out = append(out, *e.Interaction)
		}
	}
	return out
}

// shape renders a turn's messages one block per line.
func shape(msgs []runnel.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			s := string(m.Role) + ":" + string(b.Type) + ":" + b.ToolCallID
			switch b.Type {
			case runnel.BlockText:
				s += ":" + b.Text
			case runnel.BlockToolResult:
				s += ":" + b.OutputText()
				if b.IsError {
					s += " (error)"
				}
			}
			out = append(out, s)
		}
	}
	return out
}
