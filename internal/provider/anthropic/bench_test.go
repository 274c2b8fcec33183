package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/anthropic"
	"github.com/runnel/runnel/internal/provider/providertest"
)

// toolAnswer is one tool step as the Messages API streams it.
const toolAnswer = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":90,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"echo\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"n\\\":1}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// BenchmarkStream measures one model call with a history of 0 to 200
// earlier tool steps (bench/steploop's loop), and of 20 after 400 KiB of
// replayed conversation. The adapter keeps the conversation's encoding
// across calls, as across a run's steps.
func BenchmarkStream(b *testing.B) {
	m := anthropic.New(provider.Config{BaseURL: "http://model.invalid", APIKey: testKey,
		HTTPClient: &http.Client{Transport: providertest.CannedTransport(toolAnswer)}})
	for _, c := range []struct{ steps, extra int }{{0, 0}, {10, 0}, {20, 0}, {40, 0}, {200, 0}, {20, 400 << 10}} {
		name := fmt.Sprintf("history=%d", c.steps)
		if c.extra > 0 {
			name += fmt.Sprintf("+%dKiB", c.extra>>10)
		}
		b.Run(name, func(b *testing.B) {
			var msgs []runnel.Message
			line := strings.Repeat("Some earlier words, \"quoted\" <and> escaped. ", 45)
			for size := 0; size < c.extra; size += 2 * len(line) {
				msgs = append(msgs, runnel.UserText(line),
					runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: line}}})
			}
			msgs = append(msgs, runnel.UserText("Call echo until told to stop."))
			for i := range c.steps {
				id := fmt.Sprintf("toolu_%d", i)
				msgs = append(msgs,
					runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{
						{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: "echo", Input: json.RawMessage(`{"n":1}`)}}},
					runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{
						{Type: runnel.BlockToolResult, ToolCallID: id, Output: runnel.TextOutput("ok")}}},
				)
			}
			req := &provider.Request{Model: "claude-test", Messages: msgs, Tools: []provider.Tool{{
				Name: "echo", Description: "Echo n back.",
				Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`),
			}}}
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
