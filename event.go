package runnel

import (
	"context"
	"encoding/json"
	"fmt"
)

// EventType names one kind of event in the closed vocabulary of DESIGN §3.4.
type EventType string

// The event types. EventMessage and EventThought appear only in a one-shot
// result's event list, where deltas are coalesced.
const (
	EventMessageStart       EventType = "message_start"
	EventMessageDelta       EventType = "message_delta"
	EventMessageEnd         EventType = "message_end"
	EventThoughtStart       EventType = "thought_start"
	EventThoughtDelta       EventType = "thought_delta"
	EventThoughtEnd         EventType = "thought_end"
	EventToolCall           EventType = "tool_call"
	EventToolResult         EventType = "tool_result"
	EventInteractionRequest EventType = "interaction_request"
	// EventInteractionResponse says a resume consumed an answer.
	EventInteractionResponse EventType = "interaction_response"
	EventUsage               EventType = "usage"
	EventError               EventType = "error"
	EventDone                EventType = "done"
	EventMessage             EventType = "message"
	EventThought             EventType = "thought"
	// EventNotice reports something the caller should know that is not a
	// failure of the run, such as an MCP server that could not be reached.
	EventNotice EventType = "notice"
)

// Event is one thing that happened during a run. Which fields are set
// depends on Type; MarshalJSON writes exactly the keys of that type.
type Event struct {
	Type EventType
	// ID is the message, thought or tool call id.
	ID string
	// Delta is the new text of a message_delta or thought_delta.
	Delta string
	// Text is the whole text of a coalesced message or thought, or a notice.
	Text string
	// Name, Input and Render describe a tool_call.
	Name   string
	Input  json.RawMessage
	Render json.RawMessage
	// Output and IsError describe a tool_result; Denied marks one a
	// person or the policy declined, so a frontend can show "declined"
	// rather than "failed".
	Output  json.RawMessage
	IsError bool
	Denied  bool
	// Interaction is the request of an interaction_request.
	Interaction *Interaction
	// Answer is the answer of an interaction_response.
	Answer *InteractionAnswer
	// Usage is the payload of a usage event.
	Usage *Usage
	// Message and Code describe an error event.
	Message string
	Code    ErrorCode
	// StopReason ends the run in a done event; TraceID names the run's
	// trace there.
	StopReason string
	TraceID    string
}

// MarshalJSON writes the wire shape of the event's type.
func (e Event) MarshalJSON() ([]byte, error) {
	type idOnly struct {
		Type EventType `json:"type"`
		ID   string    `json:"id"`
	}
	switch e.Type {
	case EventMessageStart, EventMessageEnd, EventThoughtStart, EventThoughtEnd:
		return json.Marshal(idOnly{e.Type, e.ID})
	case EventMessageDelta, EventThoughtDelta:
		return json.Marshal(struct {
			Type  EventType `json:"type"`
			ID    string    `json:"id"`
			Delta string    `json:"delta"`
		}{e.Type, e.ID, e.Delta})
	case EventMessage, EventThought, EventNotice:
		return json.Marshal(struct {
			Type EventType `json:"type"`
			Text string    `json:"text"`
		}{e.Type, e.Text})
	case EventToolCall:
		return json.Marshal(struct {
			Type   EventType       `json:"type"`
			ID     string          `json:"id"`
			Name   string          `json:"name"`
			Input  json.RawMessage `json:"input"`
			Render json.RawMessage `json:"render,omitempty"`
		}{e.Type, e.ID, e.Name, orEmptyObject(e.Input), e.Render})
	case EventToolResult:
		return json.Marshal(struct {
			Type    EventType       `json:"type"`
			ID      string          `json:"id"`
			Output  json.RawMessage `json:"output"`
			IsError bool            `json:"isError,omitempty"`
			Denied  bool            `json:"denied,omitempty"`
			Render  json.RawMessage `json:"render,omitempty"`
		}{e.Type, e.ID, orNull(e.Output), e.IsError, e.Denied, e.Render})
	case EventInteractionRequest:
		if e.Interaction == nil {
			return nil, fmt.Errorf("interaction_request event without an interaction")
		}
		it := e.Interaction
		return json.Marshal(struct {
			Type    EventType          `json:"type"`
			ID      string             `json:"id"`
			Kind    InteractionKind    `json:"kind"`
			Payload interactionPayload `json:"payload"`
		}{e.Type, it.ID, it.Kind, interactionPayload{
			ToolCallID: it.ToolCallID, ToolName: it.ToolName, Input: orEmptyObject(it.Input),
			Options: it.Options, Render: it.Render, Signature: it.Signature, ToolCall: it.ToolCall,
		}})
	case EventInteractionResponse:
		if e.Answer == nil {
			return nil, fmt.Errorf("interaction_response event without an answer")
		}
		a := e.Answer
		return json.Marshal(struct {
			Type    EventType       `json:"type"`
			ID      string          `json:"id"`
			Kind    InteractionKind `json:"kind"`
			Payload answerPayload   `json:"payload"`
		}{e.Type, a.ID, a.Kind, answerPayload{ToolCallID: a.ToolCallID, Approved: a.Approved, Reason: a.Reason}})
	case EventUsage:
		u := Usage{}
		if e.Usage != nil {
			u = *e.Usage
		}
		return json.Marshal(struct {
			Type EventType `json:"type"`
			Usage
		}{e.Type, u})
	case EventError:
		return json.Marshal(struct {
			Type    EventType `json:"type"`
			Message string    `json:"message"`
			Code    ErrorCode `json:"code,omitempty"`
		}{e.Type, e.Message, e.Code})
	case EventDone:
		return json.Marshal(struct {
			Type       EventType `json:"type"`
			StopReason string    `json:"stopReason"`
			TraceID    string    `json:"traceId,omitempty"`
		}{e.Type, e.StopReason, e.TraceID})
	}
	return nil, fmt.Errorf("unknown event type %q", e.Type)
}

// UnmarshalJSON reads any event shape MarshalJSON writes.
func (e *Event) UnmarshalJSON(data []byte) error {
	var w struct {
		Type       EventType          `json:"type"`
		ID         string             `json:"id"`
		Delta      string             `json:"delta"`
		Text       string             `json:"text"`
		Name       string             `json:"name"`
		Input      json.RawMessage    `json:"input"`
		Render     json.RawMessage    `json:"render"`
		Output     json.RawMessage    `json:"output"`
		IsError    bool               `json:"isError"`
		Denied     bool               `json:"denied"`
		Kind       InteractionKind    `json:"kind"`
		Payload    interactionPayload `json:"payload"`
		Message    string             `json:"message"`
		Code       ErrorCode          `json:"code"`
		StopReason string             `json:"stopReason"`
		TraceID    string             `json:"traceId"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*e = Event{Type: w.Type, ID: w.ID, Delta: w.Delta, Text: w.Text, Name: w.Name,
		Input: w.Input, Render: w.Render, Output: w.Output, IsError: w.IsError, Denied: w.Denied,
		Message: w.Message, Code: w.Code, StopReason: w.StopReason, TraceID: w.TraceID}
	switch w.Type {
	case EventUsage:
		var u Usage
		if err := json.Unmarshal(data, &u); err != nil {
			return err
		}
		e.Usage, e.Input, e.Output = &u, nil, nil
	case EventInteractionRequest:
		p := w.Payload
		e.Interaction = &Interaction{ID: w.ID, Kind: w.Kind, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
			Input: p.Input, Options: p.Options, Render: p.Render, Signature: p.Signature, ToolCall: p.ToolCall}
	case EventInteractionResponse:
		var a struct {
			Payload answerPayload `json:"payload"`
		}
		if err := json.Unmarshal(data, &a); err != nil {
			return err
		}
		e.Answer = &InteractionAnswer{ID: w.ID, Kind: w.Kind, ToolCallID: a.Payload.ToolCallID,
			Approved: a.Payload.Approved, Reason: a.Payload.Reason}
		e.ID = ""
	}
	return nil
}

type answerPayload struct {
	ToolCallID string `json:"toolCallId"`
	Approved   bool   `json:"approved"`
	Reason     string `json:"reason,omitempty"`
}

type interactionPayload struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Options    []string        `json:"options,omitempty"`
	Render     json.RawMessage `json:"render,omitempty"`
	Signature  string          `json:"signature,omitempty"`
	// ToolCall is what Agenta's frontend draws an approval from.
	ToolCall *InteractionToolCall `json:"toolCall,omitempty"`
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return json.RawMessage(`{}`)
	}
	return raw
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`null`)
	}
	return raw
}

// Sink receives a run's events in order. A harness emits from one goroutine
// at a time, so a Sink need not lock unless it is shared between runs.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f(e).
func (f SinkFunc) Emit(e Event) { f(e) }

// Discard is a Sink that drops every event.
type Discard struct{}

// Emit does nothing.
func (Discard) Emit(Event) {}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request that started a
// run, so the server's request id and the run's id in logs and results are
// one and the same.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the id WithRequestID stored in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
