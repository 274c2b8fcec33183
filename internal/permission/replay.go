package permission

import (
	"bytes"
	"encoding/json"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// ResultClass is what a tool_result block of a replayed conversation is.
type ResultClass int

// The classes of a tool_result block.
const (
	// ResultExecuted is an ordinary result: the call ran, or was refused.
	ResultExecuted ResultClass = iota
	// ResultDeferred settled a call without running it because its step
	// paused (DeferredPrefix); it answers nothing.
	ResultDeferred
	// ResultApproval is a person's answer to an approval request.
	ResultApproval
	// ResultClientOutput is what the browser produced for a client tool.
	ResultClientOutput
)

// Replay is a replayed conversation read once: every tool call with the
// results that answer it, classified. The decisions of the store, the
// calls a paused turn left waiting and the signatures a resume must carry
// are all read from one Replay, so they cannot disagree about which result
// is an approval or which call it answers.
type Replay struct {
	// Calls are the tool_call blocks, in order.
	Calls []*ReplayedCall
	// Untied are the results that answer no call: no call before them has
	// their toolCallId.
	Untied []*ReplayedAnswer
	// Turn is the index of the latest user message with text (the turn's
	// prompt), or -1.
	Turn int
	// Previous is the index of the user message with text before Turn, or
	// -1: the calls after it and before Turn belong to the previous turn.
	Previous int
}

// ReplayedCall is one tool_call block and what answers it.
type ReplayedCall struct {
	Message int // index of its message
	Block   runnel.Block
	Answers []*ReplayedAnswer
}

// ReplayedAnswer is one tool_result block.
type ReplayedAnswer struct {
	Message, Index int // where the block is: Messages[Message].Content[Index]
	Block          runnel.Block
	Class          ResultClass
	// Call is the call it answers: the nearest earlier call with its
	// toolCallId (providers may reuse ids), or nil.
	Call *ReplayedCall
}

// Settled reports whether the call has a result the model has read: one
// that ran or was refused, or a deferred one (the model was told to retry).
func (c *ReplayedCall) Settled() bool {
	for _, a := range c.Answers {
		if a.Class == ResultExecuted || a.Class == ResultDeferred {
			return true
		}
	}
	return false
}

// Spent reports whether an approval of the call was used up: the call has
// since been answered for real, so its approval must not approve another.
func (c *ReplayedCall) Spent() bool {
	for _, a := range c.Answers {
		if a.Class == ResultExecuted || a.Class == ResultClientOutput {
			return true
		}
	}
	return false
}

// ReadReplay ties every tool_result of messages to the call it answers and
// classifies it. isClient reports whether a tool name (as the model called
// it) is a client tool; nil means none is.
func ReadReplay(messages []runnel.Message, isClient func(name string) bool) *Replay {
	r := &Replay{Turn: LatestUserText(messages), Previous: -1}
	if r.Turn > 0 {
		r.Previous = LatestUserText(messages[:r.Turn])
	}
	latest := map[string]*ReplayedCall{}
	for i, m := range messages {
		for j, b := range m.Content {
			switch b.Type {
			case runnel.BlockToolCall:
				c := &ReplayedCall{Message: i, Block: b}
				r.Calls = append(r.Calls, c)
				if b.ToolCallID != "" {
					latest[b.ToolCallID] = c
				}
			case runnel.BlockToolResult:
				a := &ReplayedAnswer{Message: i, Index: j, Block: b}
				if b.ToolCallID != "" {
					a.Call = latest[b.ToolCallID]
				}
				name := b.ToolName
				if a.Call != nil {
					name = a.Call.Block.ToolName
				}
				a.Class = classify(b, func() bool { return isClient != nil && isClient(name) })
				if a.Call == nil {
					r.Untied = append(r.Untied, a)
				} else {
					a.Call.Answers = append(a.Call.Answers, a)
				}
			}
		}
	}
	return r
}

// classify reads kind first; without it, the shape: an output that
// ReadApproval reads is an approval, anything else is a client output when
// it answers a client tool. A result whose text starts with
// DEFERRED_NOT_EXECUTED is never an answer, whatever its kind.
func classify(b runnel.Block, isClient func() bool) ResultClass {
	switch {
	case b.OutputHasPrefix(DeferredPrefix):
		return ResultDeferred
	case b.Kind == runnel.ResultKindApproval:
		return ResultApproval
	case b.Kind == runnel.ResultKindClientOutput:
		return ResultClientOutput
	case b.Kind != "":
		return ResultExecuted
	}
	if _, ok := ReadApproval(b.Output); ok {
		return ResultApproval
	}
	if isClient() {
		return ResultClientOutput
	}
	return ResultExecuted
}

// Approval is a person's answer as a client sends it back.
type Approval struct {
	Approved bool
	Reason   string
	// InteractionID and Signature are echoed from the interaction (the id
	// may come as Agenta's interactionToken); the signature only when
	// signing is on.
	InteractionID string
	Signature     string
}

// ReadApproval is the one reader of an approval output, for the store that
// acts on it and for the signature check alike: an object with a boolean
// approved (and optionally a string reason, interactionId and signature),
// or a JSON string holding exactly such an object, since some clients send
// every output as text. It reads strictly (internal/strictjson): member
// names match exactly, a member given twice, or twice in different case,
// makes it unreadable, and so does anything after the object. ok is false
// when output is not that shape.
func ReadApproval(output json.RawMessage) (Approval, bool) {
	out := bytes.TrimSpace(output)
	if len(out) > 0 && out[0] == '"' && !mayOpenObject(out[1:]) {
		return Approval{}, false // every tool result that is text: not decoded for nothing
	}
	if len(out) > 0 && out[0] == '"' {
		var s string
		if strictjson.Unmarshal(out, &s) != nil {
			return Approval{}, false
		}
		out = bytes.TrimSpace([]byte(s))
	}
	if len(out) == 0 || out[0] != '{' {
		return Approval{}, false
	}
	var wire struct {
		Approved      *bool  `json:"approved"`
		Reason        string `json:"reason"`
		InteractionID string `json:"interactionId"`
		// InteractionToken is Agenta's name for the interaction id.
		InteractionToken string `json:"interactionToken"`
		Signature        string `json:"signature"`
	}
	if strictjson.Unmarshal(out, &wire) != nil || wire.Approved == nil {
		return Approval{}, false
	}
	id := wire.InteractionID
	if id == "" {
		id = wire.InteractionToken
	}
	return Approval{Approved: *wire.Approved, Reason: wire.Reason, InteractionID: id, Signature: wire.Signature}, true
}

// AnswerOf is what an approval block says. With kind "approval" a bare
// boolean output counts too; anything else unreadable is a denial: it
// cannot be read as consent, and asking again could wedge the
// conversation.
func AnswerOf(b runnel.Block) Approval {
	if a, ok := ReadApproval(b.Output); ok {
		return a
	}
	var yes bool
	if strictjson.Unmarshal(bytes.TrimSpace(b.Output), &yes) == nil {
		return Approval{Approved: yes}
	}
	return Approval{}
}

// mayOpenObject reports whether the JSON string whose text (after the
// opening quote) is s may hold, once decoded and trimmed, an object: its
// first byte past ASCII white space is "{", an escape or not ASCII.
func mayOpenObject(s []byte) bool {
	for _, c := range s {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			continue
		case c == '{' || c == '\\' || c >= 0x80:
			return true
		}
		return false
	}
	return false
}
