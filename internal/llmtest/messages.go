package llmtest

// Anthropic Messages encoding. Content blocks come in the order thinking,
// text, tool_use.

func (o outcome) messagesStopReason() string {
	if len(o.calls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// signature stands in for the opaque signature Anthropic attaches to thinking
// blocks; clients only carry it back.
func (o outcome) signature() string { return "sig_" + o.base }

type messagesBuilder struct {
	events []sseEvent
	index  int // the next content block index
}

func (b *messagesBuilder) add(typ string, fields ...kv) {
	b.events = append(b.events, sseEvent{name: typ, data: mustJSON(append(obj{{"type", typ}}, fields...))})
}

// block streams one content block: its start, its deltas, its stop.
func (b *messagesBuilder) block(start obj, deltas []obj) {
	i := b.index
	b.index++
	b.add("content_block_start", kv{"index", i}, kv{"content_block", start})
	for _, d := range deltas {
		b.add("content_block_delta", kv{"index", i}, kv{"delta", d})
	}
	b.add("content_block_stop", kv{"index", i})
}

// messagesStream is the event sequence of a streamed message.
func (o outcome) messagesStream() []sseEvent {
	b := &messagesBuilder{}
	b.add("message_start", kv{"message", obj{
		{"id", o.id("msg_")},
		{"type", "message"},
		{"role", "assistant"},
		{"model", o.model},
		{"content", []obj{}},
		{"stop_reason", nil},
		{"stop_sequence", nil},
		{"usage", obj{
			{"input_tokens", o.usage.Input},
			{"cache_creation_input_tokens", 0},
			{"cache_read_input_tokens", 0},
			{"output_tokens", 1},
		}},
	}})
	b.add("ping")
	if o.reasoning != "" {
		var deltas []obj
		for _, p := range o.pieces(o.reasoning) {
			deltas = append(deltas, obj{{"type", "thinking_delta"}, {"thinking", p}})
		}
		deltas = append(deltas, obj{{"type", "signature_delta"}, {"signature", o.signature()}})
		b.block(obj{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, deltas)
	}
	if o.text != "" {
		var deltas []obj
		for _, p := range o.pieces(o.text) {
			deltas = append(deltas, obj{{"type", "text_delta"}, {"text", p}})
		}
		b.block(obj{{"type", "text"}, {"text", ""}}, deltas)
	}
	for _, tc := range o.calls {
		var deltas []obj
		for _, p := range o.pieces(string(tc.Arguments)) {
			deltas = append(deltas, obj{{"type", "input_json_delta"}, {"partial_json", p}})
		}
		b.block(obj{{"type", "tool_use"}, {"id", tc.ID}, {"name", tc.Name}, {"input", obj{}}}, deltas)
	}
	b.add("message_delta",
		kv{"delta", obj{{"stop_reason", o.messagesStopReason()}, {"stop_sequence", nil}}},
		kv{"usage", obj{{"input_tokens", o.usage.Input}, {"output_tokens", o.usage.Output}}},
	)
	b.add("message_stop")
	return b.events
}

// messagesJSON is the non-streaming Message object.
func (o outcome) messagesJSON() []byte {
	content := []obj{}
	if o.reasoning != "" {
		content = append(content, obj{{"type", "thinking"}, {"thinking", o.reasoning}, {"signature", o.signature()}})
	}
	if o.text != "" {
		content = append(content, obj{{"type", "text"}, {"text", o.text}})
	}
	for _, tc := range o.calls {
		content = append(content, obj{
			{"type", "tool_use"}, {"id", tc.ID}, {"name", tc.Name}, {"input", objectArguments(tc.Arguments)},
		})
	}
	return mustJSON(obj{
		{"id", o.id("msg_")},
		{"type", "message"},
		{"role", "assistant"},
		{"model", o.model},
		{"content", content},
		{"stop_reason", o.messagesStopReason()},
		{"stop_sequence", nil},
		{"usage", obj{{"input_tokens", o.usage.Input}, {"output_tokens", o.usage.Output}}},
	})
}

// anthropicError is the Anthropic error body.
func anthropicError(status int, message, requestID string) []byte {
	typ := "api_error"
	switch status {
	case 400:
		typ = "invalid_request_error"
	case 401:
		typ = "authentication_error"
	case 403:
		typ = "permission_error"
	case 404:
		typ = "not_found_error"
	case 413:
		typ = "request_too_large"
	case 429:
		typ = "rate_limit_error"
	case 503, 529:
		typ = "overloaded_error"
	}
	return mustJSON(obj{
		{"type", "error"},
		{"error", obj{{"type", typ}, {"message", message}}},
		{"request_id", requestID},
	})
}
