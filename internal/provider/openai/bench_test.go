package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/openai"
	"github.com/runnel/runnel/internal/provider/providertest"
)

// The answer of one tool step, as OpenAI streams it.
var (
	chatToolAnswer = sse(
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"echo","arguments":""}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"n\":1}"}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":90,"completion_tokens":5,"total_tokens":95}}`,
		`[DONE]`)
	responsesToolAnswer = sse(
		`{"type":"response.created","response":{"id":"r","status":"in_progress"}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc","call_id":"call_1","name":"echo","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{\"n\":1}"}`,
		`{"type":"response.function_call_arguments.done","output_index":0,"arguments":"{\"n\":1}"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc","call_id":"call_1","name":"echo","arguments":"{\"n\":1}"}}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":90,"output_tokens":5,"total_tokens":95}}}`)
)

// toolLoopRequest is the request of step steps+1 of bench/steploop's loop:
// the prompt, then steps rounds of an echo call and its result.
func toolLoopRequest(steps int) *provider.Request {
	msgs := []runnel.Message{runnel.UserText("Call echo until told to stop.")}
	for i := range steps {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{
				{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: "echo", Input: json.RawMessage(`{"n":1}`)}}},
			runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{
				{Type: runnel.BlockToolResult, ToolCallID: id, Output: runnel.TextOutput("ok")}}},
		)
	}
	return &provider.Request{Model: "bench-model", Messages: msgs, Tools: []provider.Tool{{
		Name: "echo", Description: "Echo n back.",
		Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`),
	}}}
}

// replayed is n bytes of an earlier conversation, as a platform replays
// it: turns of a user question and an assistant answer of about 2 KiB.
func replayed(n int) []runnel.Message {
	var msgs []runnel.Message
	line := strings.Repeat("Some earlier words, \"quoted\" <and> escaped. ", 45)
	for size := 0; size < n; size += 2 * len(line) {
		msgs = append(msgs, runnel.UserText(line),
			runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: line}}})
	}
	return msgs
}

// benchStream measures one model call with a history of 0 to 200 earlier
// tool steps, and of 20 after 400 KiB of replayed conversation. The
// adapter keeps each message's encoding across calls, as it does across
// a run's steps, so the cost should barely grow with the history.
func benchStream(b *testing.B, answer string, newModel func(provider.Config) provider.Model) {
	m := newModel(provider.Config{BaseURL: "http://model.invalid/v1", APIKey: testKey,
		HTTPClient: &http.Client{Transport: providertest.CannedTransport(answer)}})
	for _, c := range []struct {
		steps int
		extra int // bytes of earlier conversation replayed before the loop
	}{{0, 0}, {10, 0}, {20, 0}, {40, 0}, {200, 0}, {20, 400 << 10}} {
		name := fmt.Sprintf("history=%d", c.steps)
		if c.extra > 0 {
			name += fmt.Sprintf("+%dKiB", c.extra>>10)
		}
		b.Run(name, func(b *testing.B) {
			req := toolLoopRequest(c.steps)
			if c.extra > 0 {
				req.Messages = append(replayed(c.extra), req.Messages...)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := m.Stream(ctx, req, func(provider.Chunk) {})
				if err != nil || resp.StopReason != "tool_use" {
					b.Fatalf("Stream = %+v, %v", resp, err)
				}
			}
		})
	}
}

func BenchmarkChatStream(b *testing.B) {
	benchStream(b, chatToolAnswer, func(c provider.Config) provider.Model { return openai.NewChat(c) })
}

func BenchmarkResponsesStream(b *testing.B) {
	benchStream(b, responsesToolAnswer, func(c provider.Config) provider.Model { return openai.NewResponses(c) })
}
