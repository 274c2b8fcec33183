package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/runnel/runnel"
)

// longRequest is a run request replaying about kb KiB of earlier exchanges,
// each a question, a preamble with a tool call, its result and an answer:
// the shape of bench/steploop's -history-kb.
func longRequest(tb testing.TB, kb int) []byte {
	tb.Helper()
	text := func(k, n int) string {
		return strings.Repeat(fmt.Sprintf("word%d \"quoted\" \n", k%7), n/16)
	}
	req := runnel.RunRequest{Model: "openai/m"}
	for k := 0; ; k++ {
		id := fmt.Sprintf("call_%04d", k)
		req.Messages = append(req.Messages,
			runnel.UserText(text(k, 300)),
			runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{
				{Type: runnel.BlockText, Text: text(k+1, 200)},
				{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: "lookup", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, k))},
			}},
			runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{
				{Type: runnel.BlockToolResult, ToolCallID: id, ToolName: "lookup", Output: runnel.TextOutput(text(k+2, 1500))},
			}},
			runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: text(k+3, 600)}}},
		)
		body, err := json.Marshal(req)
		if err != nil {
			tb.Fatal(err)
		}
		if len(body) >= kb<<10 {
			return body
		}
	}
}

func BenchmarkDecodeRequest(b *testing.B) {
	for _, kb := range []int{4, 400} {
		body := longRequest(b, kb)
		b.Run(fmt.Sprintf("%dKiB", kb), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeRequest(declaredBody{bytes.NewReader(body), int64(len(body))}, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
