package llmtest

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"
)

func anthropicTools() []anthropic.ToolUnionParam {
	schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{}}
	return []anthropic.ToolUnionParam{
		anthropic.ToolUnionParamOfTool(schema, "get_weather"),
		anthropic.ToolUnionParamOfTool(schema, "get_time"),
	}
}

type block struct {
	Type, Text, Thinking, Signature, ID, Name, Input string
}

func blocksOf(m anthropic.Message) []block {
	var out []block
	for _, c := range m.Content {
		b := block{Type: c.Type, Text: c.Text, Thinking: c.Thinking, Signature: c.Signature, ID: c.ID, Name: c.Name}
		if c.Type == "tool_use" {
			b.Input = string(c.Input)
		}
		out = append(out, b)
	}
	return out
}

func TestMessagesStream(t *testing.T) {
	reply := twoCalls()
	reply.Reasoning = "Two lookups."
	srv := start(t, Rule{When: Match{API: APIMessages, SystemContains: "weather bot"}, Reply: reply})
	client := anthropicClient(t, srv)
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "You are a Weather Bot."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather and time?"))},
		Tools:     anthropicTools(),
	})
	defer stream.Close()
	var msg anthropic.Message
	jsonDeltas := map[int64]int{}
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			jsonDeltas[ev.Index]++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	got := blocksOf(msg)
	if len(got) != 4 {
		t.Fatalf("blocks %+v, want thinking, text and two tool_use", got)
	}
	if got[0].Signature == "" || got[2].ID == "" {
		t.Fatalf("thinking signature %q, generated tool id %q: want both set", got[0].Signature, got[2].ID)
	}
	want := []block{
		{Type: "thinking", Thinking: "Two lookups.", Signature: got[0].Signature},
		{Type: "text", Text: "Let me check."},
		{Type: "tool_use", ID: got[2].ID, Name: "get_weather", Input: `{"city":"Paris","unit":"celsius"}`},
		{Type: "tool_use", ID: "call_fixed", Name: "get_time", Input: `{"tz":"Europe/Paris"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accumulated message (-want +got):\n%s", diff)
	}
	if msg.StopReason != "tool_use" || msg.Usage.InputTokens != 42 || msg.Usage.OutputTokens != 7 {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
	if jsonDeltas[2] < 2 || jsonDeltas[3] < 2 {
		t.Errorf("input_json_delta events per block %v, want several each", jsonDeltas)
	}
}

func TestMessagesNonStreaming(t *testing.T) {
	srv := start(t, Rule{When: Match{API: APIMessages}, Reply: Reply{
		Text:      "Calling.",
		ToolCalls: []ToolCall{{Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}},
	}})
	client := anthropicClient(t, srv)
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather?"))},
		Tools:     anthropicTools(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := blocksOf(*msg)
	want := []block{
		{Type: "text", Text: "Calling."},
		{Type: "tool_use", ID: got[len(got)-1].ID, Name: "get_weather", Input: `{"city":"Paris"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if msg.StopReason != "tool_use" || msg.Usage.OutputTokens != defaultOutputTokens {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
}
