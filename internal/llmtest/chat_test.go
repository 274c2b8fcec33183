package llmtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

func weatherTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time"}),
	}
}

// twoCalls is a reply with text and two tool calls whose arguments are long
// enough to be cut into several pieces.
func twoCalls() Reply {
	return Reply{
		Text: "Let me check.",
		ToolCalls: []ToolCall{
			{Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris", "unit": "celsius"}`)},
			{ID: "call_fixed", Name: "get_time", Arguments: json.RawMessage(`{"tz":"Europe/Paris"}`)},
		},
		ChunkSize: 5,
		Usage:     &Usage{Input: 42, Output: 7},
	}
}

type chatToolDelta struct {
	Index int64
	ID    string
	Name  string
	Args  string
}

func TestChatStreamTextReasoningUsage(t *testing.T) {
	srv := start(t, Rule{
		When:  Match{API: APIChat, LastUserContains: "hello"},
		Reply: Reply{Text: "Hi there, dear friend!", Reasoning: "The user greets me.", Usage: &Usage{Input: 42, Output: 7}},
	})
	client := openaiClient(t, srv)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "gpt-test",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var reasoning string
	contentChunks := 0
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator rejected chunk %s", chunk.RawJSON())
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		if f, ok := chunk.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
			var piece string
			if err := json.Unmarshal([]byte(f.Raw()), &piece); err != nil {
				t.Fatalf("reasoning_content %s: %v", f.Raw(), err)
			}
			reasoning += piece
		}
		if chunk.Choices[0].Delta.Content != "" {
			contentChunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	type summary struct {
		Content, Finish, Reasoning, Model string
		Usage                             [3]int64
	}
	got := summary{
		Content:   acc.Choices[0].Message.Content,
		Finish:    acc.Choices[0].FinishReason,
		Reasoning: reasoning,
		Model:     acc.Model,
		Usage:     [3]int64{acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.TotalTokens},
	}
	want := summary{"Hi there, dear friend!", "stop", "The user greets me.", "gpt-test", [3]int64{42, 7, 49}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accumulated completion (-want +got):\n%s", diff)
	}
	if contentChunks < 2 {
		t.Errorf("content came in %d chunks, want it split", contentChunks)
	}
}

func TestChatStreamToolCalls(t *testing.T) {
	srv := start(t, Rule{When: Match{HasTool: "get_weather"}, Reply: twoCalls()})
	client := openaiClient(t, srv)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather and time?")},
		Tools:    weatherTools(),
	})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var deltas []chatToolDelta
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, c := range chunk.Choices {
			for _, tc := range c.Delta.ToolCalls {
				deltas = append(deltas, chatToolDelta{tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments})
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	msg := acc.Choices[0].Message
	if msg.Content != "Let me check." || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("content %q finish %q, want text and tool_calls", msg.Content, acc.Choices[0].FinishReason)
	}
	type call struct{ Name, Args string }
	var calls []call
	for _, tc := range msg.ToolCalls {
		calls = append(calls, call{tc.Function.Name, tc.Function.Arguments})
	}
	wantCalls := []call{{"get_weather", `{"city":"Paris","unit":"celsius"}`}, {"get_time", `{"tz":"Europe/Paris"}`}}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if id0, id1 := msg.ToolCalls[0].ID, msg.ToolCalls[1].ID; id0 == "" || id0 == id1 || id1 != "call_fixed" {
		t.Errorf("tool call ids %q, %q: want a generated one and the scripted one", id0, id1)
	}
	// The first delta of each call names it; the following ones carry only
	// argument pieces, several of them.
	pieces := map[int64]int{}
	for i, d := range deltas {
		first := i == 0 || deltas[i-1].Index != d.Index
		if first != (d.ID != "" && d.Name != "") {
			t.Errorf("delta %d %+v: id and name must come exactly on a call's first delta", i, d)
		}
		if !first {
			pieces[d.Index]++
		}
	}
	if pieces[0] < 2 || pieces[1] < 2 {
		t.Errorf("argument pieces per call %v, want each split in several", pieces)
	}
}

func TestChatNonStreaming(t *testing.T) {
	reply := twoCalls()
	reply.Reasoning = "Two tools are needed."
	srv := start(t, Rule{When: Match{API: APIChat}, Reply: reply})
	client := openaiClient(t, srv)
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")},
		Tools:    weatherTools(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	msg := res.Choices[0].Message
	var reasoning string
	_ = json.Unmarshal([]byte(msg.JSON.ExtraFields["reasoning_content"].Raw()), &reasoning)
	type summary struct {
		Content, Reasoning, Finish string
		Names                      []string
		Args                       []string
		Usage                      [3]int64
	}
	got := summary{Content: msg.Content, Reasoning: reasoning, Finish: res.Choices[0].FinishReason,
		Usage: [3]int64{res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.TotalTokens}}
	for _, tc := range msg.ToolCalls {
		got.Names = append(got.Names, tc.Function.Name)
		got.Args = append(got.Args, tc.Function.Arguments)
	}
	want := summary{
		Content: "Let me check.", Reasoning: "Two tools are needed.", Finish: "tool_calls",
		Names: []string{"get_weather", "get_time"},
		Args:  []string{`{"city":"Paris","unit":"celsius"}`, `{"tz":"Europe/Paris"}`},
		Usage: [3]int64{42, 7, 49},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
}

// Real servers send the usage chunk (with empty choices) only when asked.
func TestChatUsageChunkOnlyWhenAsked(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "ok"}})
	client := openaiClient(t, srv)
	for _, include := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		}
		if include {
			params.StreamOptions.IncludeUsage = openai.Bool(true)
		}
		stream := client.Chat.Completions.NewStreaming(context.Background(), params)
		defer stream.Close()
		emptyChoices := 0
		for stream.Next() {
			if len(stream.Current().Choices) == 0 {
				emptyChoices++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("include_usage=%v: %v", include, err)
		}
		want := 0
		if include {
			want = 1
		}
		if emptyChoices != want {
			t.Errorf("include_usage=%v: %d usage chunks, want %d", include, emptyChoices, want)
		}
	}
}
