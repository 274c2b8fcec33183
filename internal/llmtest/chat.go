package llmtest

// OpenAI Chat Completions encoding, as api.openai.com and compatible servers
// (vLLM, DeepSeek) send it.

func (o outcome) chatFinishReason() string {
	if len(o.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (o outcome) chatUsage() obj {
	return obj{
		{"prompt_tokens", o.usage.Input},
		{"completion_tokens", o.usage.Output},
		{"total_tokens", o.usage.Input + o.usage.Output},
	}
}

// chatStream is the chunk sequence of a streamed completion: a role chunk,
// reasoning_content pieces, content pieces, each tool call (id, type and name
// first, then argument pieces carrying only index and arguments), a chunk with
// the finish_reason, the usage chunk with empty choices when the client asked
// for it, and [DONE].
func (o outcome) chatStream() []sseEvent {
	id := o.id("chatcmpl-")
	chunk := func(delta obj, finish any) sseEvent {
		return sseEvent{data: mustJSON(obj{
			{"id", id},
			{"object", "chat.completion.chunk"},
			{"created", created},
			{"model", o.model},
			{"choices", []obj{{
				{"index", 0},
				{"delta", delta},
				{"logprobs", nil},
				{"finish_reason", finish},
			}}},
		})}
	}
	events := []sseEvent{chunk(obj{{"role", "assistant"}, {"content", ""}}, nil)}
	for _, p := range o.pieces(o.reasoning) {
		events = append(events, chunk(obj{{"reasoning_content", p}}, nil))
	}
	for _, p := range o.pieces(o.text) {
		events = append(events, chunk(obj{{"content", p}}, nil))
	}
	for i, tc := range o.calls {
		events = append(events, chunk(obj{{"tool_calls", []obj{{
			{"index", i},
			{"id", tc.ID},
			{"type", "function"},
			{"function", obj{{"name", tc.Name}, {"arguments", ""}}},
		}}}}, nil))
		for _, p := range o.pieces(string(tc.Arguments)) {
			events = append(events, chunk(obj{{"tool_calls", []obj{{
				{"index", i},
				{"function", obj{{"arguments", p}}},
			}}}}, nil))
		}
	}
	events = append(events, chunk(obj{}, o.chatFinishReason()))
	if o.includeUsage {
		events = append(events, sseEvent{data: mustJSON(obj{
			{"id", id},
			{"object", "chat.completion.chunk"},
			{"created", created},
			{"model", o.model},
			{"choices", []obj{}},
			{"usage", o.chatUsage()},
		})})
	}
	return append(events, sseEvent{data: []byte("[DONE]")})
}

// chatJSON is the non-streaming chat.completion object.
func (o outcome) chatJSON() []byte {
	msg := obj{{"role", "assistant"}}
	if o.text != "" || len(o.calls) == 0 {
		msg = append(msg, kv{"content", o.text})
	} else {
		msg = append(msg, kv{"content", nil})
	}
	if o.reasoning != "" {
		msg = append(msg, kv{"reasoning_content", o.reasoning})
	}
	if len(o.calls) > 0 {
		calls := make([]obj, 0, len(o.calls))
		for _, tc := range o.calls {
			calls = append(calls, obj{
				{"id", tc.ID},
				{"type", "function"},
				{"function", obj{{"name", tc.Name}, {"arguments", string(tc.Arguments)}}},
			})
		}
		msg = append(msg, kv{"tool_calls", calls})
	}
	msg = append(msg, kv{"refusal", nil})
	return mustJSON(obj{
		{"id", o.id("chatcmpl-")},
		{"object", "chat.completion"},
		{"created", created},
		{"model", o.model},
		{"choices", []obj{{
			{"index", 0},
			{"message", msg},
			{"logprobs", nil},
			{"finish_reason", o.chatFinishReason()},
		}}},
		{"usage", o.chatUsage()},
	})
}

// openAIError is the error body of both OpenAI APIs.
func openAIError(status int, message string) []byte {
	typ, code := "server_error", any(nil)
	switch {
	case status == 429:
		typ, code = "requests", "rate_limit_exceeded"
	case status == 401:
		typ, code = "invalid_request_error", "invalid_api_key"
	case status < 500:
		typ = "invalid_request_error"
	}
	return mustJSON(obj{{"error", obj{
		{"message", message},
		{"type", typ},
		{"param", nil},
		{"code", code},
	}}})
}
