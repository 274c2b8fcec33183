package llmtest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

func responsesTools() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{
		responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false),
		responses.ToolParamOfFunction("get_time", map[string]any{"type": "object"}, false),
	}
}

func TestResponsesStream(t *testing.T) {
	reply := twoCalls()
	reply.Reasoning = "Need both."
	reply.ChunkSize = 4
	srv := start(t, Rule{When: Match{API: APIResponses, HasTool: "get_time"}, Reply: reply})
	client := openaiClient(t, srv)
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather and time?")},
		Tools: responsesTools(),
	})
	defer stream.Close()
	var (
		types     []string
		text      strings.Builder
		reasoning strings.Builder
		argDeltas = map[string][]string{} // by item id
		completed responses.Response
	)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Errorf("event %d (%s) has sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.reasoning_summary_text.delta":
			reasoning.WriteString(ev.AsResponseReasoningSummaryTextDelta().Delta)
		case "response.function_call_arguments.delta":
			d := ev.AsResponseFunctionCallArgumentsDelta()
			argDeltas[d.ItemID] = append(argDeltas[d.ItemID], d.Delta)
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	// The event names and their order, with runs of deltas collapsed.
	var shape []string
	for _, typ := range types {
		if strings.HasSuffix(typ, ".delta") && len(shape) > 0 && shape[len(shape)-1] == typ {
			continue
		}
		shape = append(shape, typ)
	}
	call := []string{
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
	}
	want = append(append(append(want, call...), call...), "response.completed")
	if diff := cmp.Diff(want, shape); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	if text.String() != "Let me check." || reasoning.String() != "Need both." {
		t.Errorf("text %q reasoning %q", text.String(), reasoning.String())
	}
	for id, pieces := range argDeltas {
		if len(pieces) < 2 {
			t.Errorf("item %s: arguments in %d pieces, want several", id, len(pieces))
		}
	}

	type item struct{ Type, CallID, Name, Args, Text string }
	var items []item
	for _, it := range completed.Output {
		switch it.Type {
		case "function_call":
			fc := it.AsFunctionCall()
			items = append(items, item{Type: it.Type, CallID: fc.CallID, Name: fc.Name, Args: fc.Arguments})
		case "reasoning":
			items = append(items, item{Type: it.Type, Text: it.AsReasoning().Summary[0].Text})
		default:
			items = append(items, item{Type: it.Type})
		}
	}
	generated := completed.Output[2].AsFunctionCall().CallID
	if generated == "" {
		t.Fatal("generated call_id is empty")
	}
	wantItems := []item{
		{Type: "reasoning", Text: "Need both."},
		{Type: "message"},
		{Type: "function_call", CallID: generated, Name: "get_weather", Args: `{"city":"Paris","unit":"celsius"}`},
		{Type: "function_call", CallID: "call_fixed", Name: "get_time", Args: `{"tz":"Europe/Paris"}`},
	}
	if diff := cmp.Diff(wantItems, items); diff != "" {
		t.Errorf("completed output (-want +got):\n%s", diff)
	}
	if completed.OutputText() != "Let me check." || completed.Status != "completed" {
		t.Errorf("completed output text %q status %q", completed.OutputText(), completed.Status)
	}
	u := completed.Usage
	if got := [3]int64{u.InputTokens, u.OutputTokens, u.TotalTokens}; got != [3]int64{42, 7, 49} {
		t.Errorf("usage %v, want [42 7 49]", got)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	srv := start(t, Rule{When: Match{API: APIResponses}, Reply: Reply{Text: "Plain answer."}})
	client := openaiClient(t, srv)
	res, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if res.OutputText() != "Plain answer." || res.Usage.TotalTokens != defaultInputTokens+defaultOutputTokens {
		t.Errorf("output %q usage %+v", res.OutputText(), res.Usage)
	}
}
