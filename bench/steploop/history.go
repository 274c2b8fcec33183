package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/runnel/runnel"
)

// history is a replayed conversation that comes before the benchmark's
// prompt: what a stateless runner is sent when a chat has gone on for a
// while. It is made of exchanges, each a user question, an assistant
// message with text and one echo call, the call's result, and the
// assistant's answer, so that the replayed history holds tool calls and
// results as a real agent's does, not only text. Every contestant sends
// the same messages, each in its own form.
type history struct {
	exchanges int
	// chat is the history as OpenAI Chat Completions messages (the floors'
	// form, and what the fake model receives from everyone); its size is
	// the one -history-kb asks for.
	chat []json.RawMessage
	// modelMessages is the same as AI SDK ModelMessages.
	modelMessages []any
	// runnel is the same as runnel's request messages.
	runnel []runnel.Message
}

// The sizes of one exchange's texts, in bytes before JSON escaping: about
// 2.3 KB an exchange, a typical mix of prompts, tool output and answers.
const (
	histQuestionBytes = 600
	histPreambleBytes = 300
	histResultBytes   = 900
	histAnswerBytes   = 500
)

// newHistory builds exchanges until the history, as Chat Completions
// messages, holds at least kb KiB of JSON. It is the same for the same kb
// (a fixed seed), so every contestant and every invocation send the same.
func newHistory(kb int) *history {
	h := &history{}
	rng := rand.New(rand.NewPCG(1, 2))
	size := 0
	for k := 0; size < kb<<10; k++ {
		h.exchanges++
		id := fmt.Sprintf("call_hist_%04d", k)
		args := fmt.Sprintf(`{"n":%d}`, k)
		question := fmt.Sprintf("Earlier question %d: ", k) + filler(rng, histQuestionBytes)
		preamble, result, answer := filler(rng, histPreambleBytes), filler(rng, histResultBytes), filler(rng, histAnswerBytes)

		chat := []any{
			map[string]any{"role": "user", "content": question},
			map[string]any{"role": "assistant", "content": preamble, "tool_calls": []any{map[string]any{
				"id": id, "type": "function", "function": map[string]any{"name": toolName, "arguments": args},
			}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": result},
			map[string]any{"role": "assistant", "content": answer},
		}
		for _, m := range chat {
			raw, err := json.Marshal(m)
			if err != nil {
				panic(err) // maps of strings always encode
			}
			h.chat = append(h.chat, raw)
			size += len(raw) + 1 // and a comma
		}
		h.modelMessages = append(h.modelMessages,
			map[string]any{"role": "user", "content": question},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": preamble},
				map[string]any{"type": "tool-call", "toolCallId": id, "toolName": toolName, "input": map[string]any{"n": k}},
			}},
			map[string]any{"role": "tool", "content": []any{map[string]any{
				"type": "tool-result", "toolCallId": id, "toolName": toolName,
				"output": map[string]any{"type": "text", "value": result},
			}}},
			map[string]any{"role": "assistant", "content": answer},
		)
		h.runnel = append(h.runnel,
			runnel.UserText(question),
			runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{
				{Type: runnel.BlockText, Text: preamble},
				{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: toolName, Input: json.RawMessage(args)},
			}},
			runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{
				{Type: runnel.BlockToolResult, ToolCallID: id, ToolName: toolName, Output: runnel.TextOutput(result)},
			}},
			runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: answer}}},
		)
	}
	return h
}

// bytes is the size of the history as Chat Completions JSON.
func (h *history) bytes() int {
	n := 0
	for _, m := range h.chat {
		n += len(m) + 1
	}
	return n
}

// toolResults is how many tool results the history holds: the fake
// model's script counts them with the turn's own.
func (h *history) toolResults() int {
	if h == nil {
		return 0
	}
	return h.exchanges
}

var fillerWords = strings.Fields(`the agent reads a file and calls a tool with its arguments then writes
	the result back into the conversation so that the model can decide what to do next while the user
	waits for an answer about the build the tests the deployment and the configuration of each service`)

// filler is n bytes of text, roughly: words, a line break now and then and
// a quoted phrase, so that encoding it escapes something, as real text does.
func filler(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		switch r := rng.IntN(20); {
		case r == 0:
			b.WriteString("\n")
		case r == 1:
			b.WriteString(`"` + fillerWords[rng.IntN(len(fillerWords))] + `" `)
		default:
			b.WriteString(fillerWords[rng.IntN(len(fillerWords))] + " ")
		}
	}
	return b.String()
}
