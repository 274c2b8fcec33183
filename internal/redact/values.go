package redact

import "github.com/runnel/runnel"

// Event returns e with every text, id and JSON field redacted. Ids are
// redacted too: a tool call id is chosen by the model or its provider and
// can carry a secret like any text the model writes.
func (r *Redactor) Event(e runnel.Event) runnel.Event {
	if r.Empty() {
		return e
	}
	e.ID, e.Delta, e.Name, e.Message = r.String(e.ID), r.String(e.Delta), r.String(e.Name), r.String(e.Message)
	if e.Type == runnel.EventMessage || e.Type == runnel.EventThought {
		e.Text = r.final(e.Text) // the whole of what was streamed
	} else {
		e.Text = r.String(e.Text)
	}
	e.Input, e.Output, e.Render = r.JSON(e.Input), r.JSON(e.Output), r.JSON(e.Render)
	if e.Interaction != nil {
		it := r.interaction(*e.Interaction)
		e.Interaction = &it
	}
	if e.Answer != nil {
		a := *e.Answer
		a.ID, a.ToolCallID, a.Reason = r.String(a.ID), r.String(a.ToolCallID), r.String(a.Reason)
		e.Answer = &a
	}
	return e
}

// interaction redacts everything but the signature: it is runnel's own
// HMAC, and changing it would make the answer to the interaction fail.
func (r *Redactor) interaction(it runnel.Interaction) runnel.Interaction {
	it.ID, it.ToolCallID, it.ToolName = r.String(it.ID), r.String(it.ToolCallID), r.String(it.ToolName)
	it.Input, it.Render = r.JSON(it.Input), r.JSON(it.Render)
	if tc := it.ToolCall; tc != nil {
		it.ToolCall = &runnel.InteractionToolCall{ToolCallID: r.String(tc.ToolCallID), Title: r.String(tc.Title),
			RawInput: r.JSON(tc.RawInput), ResolvedName: r.String(tc.ResolvedName)}
	}
	if it.Options != nil {
		opts := make([]string, len(it.Options))
		for i, o := range it.Options {
			opts[i] = r.String(o)
		}
		it.Options = opts
	}
	return it
}

// Message returns m with every block redacted. A reasoning block's
// provider signature is left alone: it is opaque, and the provider refuses
// a replay whose signature changed.
func (r *Redactor) Message(m runnel.Message) runnel.Message {
	if r.Empty() {
		return m
	}
	blocks := make([]runnel.Block, len(m.Content))
	for i, b := range m.Content {
		b.Text, b.Data, b.URI = r.final(b.Text), r.String(b.Data), r.String(b.URI)
		b.ToolCallID, b.ToolName = r.String(b.ToolCallID), r.String(b.ToolName)
		b.Input, b.Output = r.JSON(b.Input), r.JSON(b.Output)
		blocks[i] = b
	}
	m.Content = blocks
	return m
}

// Result redacts res in place.
func (r *Redactor) Result(res *runnel.Result) {
	if r.Empty() || res == nil {
		return
	}
	res.Output, res.Error = r.final(res.Output), r.String(res.Error)
	for i := range res.Messages {
		res.Messages[i] = r.Message(res.Messages[i])
	}
	for i := range res.Events {
		res.Events[i] = r.Event(res.Events[i])
	}
	for i := range res.Interactions {
		res.Interactions[i] = r.interaction(res.Interactions[i])
	}
	for i := range res.Notices {
		res.Notices[i] = r.String(res.Notices[i])
	}
}
