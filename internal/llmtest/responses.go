package llmtest

import "fmt"

// OpenAI Responses API encoding. Output items come in the order reasoning,
// message, function calls, each at its own output_index.

// responsesBuilder collects the events of one streamed response, numbering
// them with sequence_number as the API does.
type responsesBuilder struct {
	events []sseEvent
	output []obj // finished items, for response.completed
}

func (b *responsesBuilder) add(typ string, fields ...kv) {
	o := append(obj{{"type", typ}}, fields...)
	o = append(o, kv{"sequence_number", len(b.events)})
	b.events = append(b.events, sseEvent{name: typ, data: mustJSON(o)})
}

// responseObject is the Response resource in the given state.
func (o outcome) responseObject(status string, output []obj) obj {
	var usage any
	if status == "completed" {
		usage = obj{
			{"input_tokens", o.usage.Input},
			{"input_tokens_details", obj{{"cached_tokens", 0}}},
			{"output_tokens", o.usage.Output},
			{"output_tokens_details", obj{{"reasoning_tokens", 0}}},
			{"total_tokens", o.usage.Input + o.usage.Output},
		}
	}
	if output == nil {
		output = []obj{}
	}
	return obj{
		{"id", o.id("resp_")},
		{"object", "response"},
		{"created_at", created},
		{"status", status},
		{"error", nil},
		{"incomplete_details", nil},
		{"instructions", nil},
		{"model", o.model},
		{"output", output},
		{"parallel_tool_calls", true},
		{"tool_choice", "auto"},
		{"tools", []obj{}},
		{"usage", usage},
		{"metadata", obj{}},
	}
}

func (o outcome) reasoningItem(text string) obj {
	summary := []obj{}
	if text != "" {
		summary = append(summary, obj{{"type", "summary_text"}, {"text", text}})
	}
	return obj{{"id", o.id("rs_")}, {"type", "reasoning"}, {"summary", summary}}
}

func (o outcome) messageItem(status string, content []obj) obj {
	return obj{
		{"id", o.id("msg_")},
		{"type", "message"},
		{"status", status},
		{"content", content},
		{"role", "assistant"},
	}
}

func outputText(text string) obj {
	return obj{{"type", "output_text"}, {"annotations", []obj{}}, {"logprobs", []obj{}}, {"text", text}}
}

func (o outcome) functionCallItem(i int, status, args string) obj {
	tc := o.calls[i]
	item := obj{
		{"id", fmt.Sprintf("%s%02d", o.id("fc_"), i)},
		{"type", "function_call"},
		{"status", status},
		{"arguments", args},
		{"call_id", tc.ID},
		{"name", tc.Name},
	}
	if tc.Namespace != "" {
		item = append(item, kv{"namespace", tc.Namespace})
	}
	return item
}

// responsesStream is the event sequence of a streamed response.
func (o outcome) responsesStream() []sseEvent {
	b := &responsesBuilder{}
	b.add("response.created", kv{"response", o.responseObject("in_progress", nil)})
	b.add("response.in_progress", kv{"response", o.responseObject("in_progress", nil)})
	if o.reasoning != "" {
		o.streamReasoning(b)
	}
	if o.text != "" {
		o.streamMessage(b)
	}
	for i := range o.calls {
		o.streamFunctionCall(b, i)
	}
	b.add("response.completed", kv{"response", o.responseObject("completed", b.output)})
	return b.events
}

func (o outcome) streamReasoning(b *responsesBuilder) {
	idx, id := len(b.output), o.id("rs_")
	at := []kv{{"item_id", id}, {"output_index", idx}, {"summary_index", 0}}
	b.add("response.output_item.added", kv{"output_index", idx}, kv{"item", o.reasoningItem("")})
	b.add("response.reasoning_summary_part.added", append(at, kv{"part", obj{{"type", "summary_text"}, {"text", ""}}})...)
	for _, p := range o.pieces(o.reasoning) {
		b.add("response.reasoning_summary_text.delta", append(at, kv{"delta", p})...)
	}
	b.add("response.reasoning_summary_text.done", append(at, kv{"text", o.reasoning})...)
	b.add("response.reasoning_summary_part.done", append(at, kv{"part", obj{{"type", "summary_text"}, {"text", o.reasoning}}})...)
	item := o.reasoningItem(o.reasoning)
	b.add("response.output_item.done", kv{"output_index", idx}, kv{"item", item})
	b.output = append(b.output, item)
}

func (o outcome) streamMessage(b *responsesBuilder) {
	idx, id := len(b.output), o.id("msg_")
	at := []kv{{"item_id", id}, {"output_index", idx}, {"content_index", 0}}
	b.add("response.output_item.added", kv{"output_index", idx}, kv{"item", o.messageItem("in_progress", []obj{})})
	b.add("response.content_part.added", append(at, kv{"part", outputText("")})...)
	for _, p := range o.pieces(o.text) {
		b.add("response.output_text.delta", append(at, kv{"delta", p}, kv{"logprobs", []obj{}})...)
	}
	b.add("response.output_text.done", append(at, kv{"text", o.text}, kv{"logprobs", []obj{}})...)
	b.add("response.content_part.done", append(at, kv{"part", outputText(o.text)})...)
	item := o.messageItem("completed", []obj{outputText(o.text)})
	b.add("response.output_item.done", kv{"output_index", idx}, kv{"item", item})
	b.output = append(b.output, item)
}

func (o outcome) streamFunctionCall(b *responsesBuilder, i int) {
	idx := len(b.output)
	args := string(o.calls[i].Arguments)
	added := o.functionCallItem(i, "in_progress", "")
	at := []kv{{"item_id", added[0].v}, {"output_index", idx}}
	b.add("response.output_item.added", kv{"output_index", idx}, kv{"item", added})
	for _, p := range o.pieces(args) {
		b.add("response.function_call_arguments.delta", append(at, kv{"delta", p})...)
	}
	b.add("response.function_call_arguments.done", append(at, kv{"name", o.calls[i].Name}, kv{"arguments", args})...)
	item := o.functionCallItem(i, "completed", args)
	b.add("response.output_item.done", kv{"output_index", idx}, kv{"item", item})
	b.output = append(b.output, item)
}

// responsesJSON is the non-streaming Response resource.
func (o outcome) responsesJSON() []byte {
	var output []obj
	if o.reasoning != "" {
		output = append(output, o.reasoningItem(o.reasoning))
	}
	if o.text != "" {
		output = append(output, o.messageItem("completed", []obj{outputText(o.text)}))
	}
	for i := range o.calls {
		output = append(output, o.functionCallItem(i, "completed", string(o.calls[i].Arguments)))
	}
	return mustJSON(o.responseObject("completed", output))
}
