package permission

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/runnel/runnel"
)

// DeferredPrefix starts the result text of a call that was settled
// without running because the turn paused (DESIGN §5.3). Such results are
// not answers.
const DeferredPrefix = "DEFERRED_NOT_EXECUTED"

// Decision is a person's answer to an approval request, read back from the
// replayed conversation.
type Decision struct {
	ToolCallID string
	ToolName   string // as the model called it
	Key        string // the call key; empty when the call could not be keyed
	// Args is the canonical JSON (CanonicalJSON) of the arguments of the
	// call the approval answers, the arguments its signature covers;
	// empty when they are not canonical.
	Args     string
	Approved bool
	Reason   string
	// InteractionID is the interaction the answer names, when it names one
	// (interactionId, or Agenta's interactionToken).
	InteractionID string
}

// Output is a client tool's result as the browser produced it, read back
// from the current turn.
type Output struct {
	ToolCallID string
	ToolName   string
	Key        string
	Output     json.RawMessage
	IsError    bool
}

// ExtractOptions tells Extract about the run's tools.
type ExtractOptions struct {
	// Servers are the run's MCP server names, as in KeyOptions.
	Servers []string
	// BoundPaths returns the dotted argument paths a tool's contextBindings
	// set; nil means no tool has bindings. It is given the tool name with
	// the server prefix stripped (StripServerPrefix).
	BoundPaths func(toolName string) []string
	// IsClientTool reports whether a tool is a client tool; it decides what
	// a result without a kind is when it is not an approval. nil means no
	// tool is. It is given the same name as BoundPaths.
	IsClientTool func(toolName string) bool
	// Exact binds each decision to the very call it answers: it is taken
	// only by a call with the same toolCallId, name and canonical
	// arguments, never by key. Signed runs set it, so a call executes on
	// an approval only when it is the call the signature covers.
	Exact bool
}

// Store holds the decisions and client outputs of a replayed conversation
// as first-in-first-out lists per call key, indexed by toolCallId too.
// Each entry is consumed once. A Store is safe for concurrent use.
type Store struct {
	mu        sync.Mutex
	exact     bool
	decisions fifo[Decision]
	outputs   fifo[Output]
}

// CallRef is a call asking the store for its answer.
type CallRef struct {
	ID   string // the tool call id
	Name string // the tool name as the model called it
	Key  string // the call key (Key); empty when it cannot be keyed
	// Args is the canonical JSON of the arguments (CanonicalJSON of the
	// arguments as an interaction shows them); only Exact stores read it.
	Args string
}

// TakeDecision consumes the decision for a call, or returns none.
//
// A call that cannot be keyed is never approved by a stored decision: its
// arguments cannot be compared with what a person saw. Otherwise it is the
// oldest decision recorded for the call's id whose key is the call's key,
// else the oldest one recorded for the key (an external harness re-issues
// a call with a new id). The key check keeps a provider that reuses ids
// across turns ("call_0") from applying an old answer to a different call.
// An Exact store matches only a decision given for the same name and
// canonical arguments, and by id when the call has one; a call without an
// id (an ACP agent's re-issued call) matches by those alone.
func (s *Store) TakeDecision(c CallRef) (*Decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findDecision(c, true)
}

// PeekDecision is TakeDecision without consuming: an ACP permission gate
// may look before it knows whether it will pause.
func (s *Store) PeekDecision(c CallRef) (*Decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findDecision(c, false)
}

func (s *Store) findDecision(c CallRef, consume bool) (*Decision, bool) {
	if c.Key == "" {
		return nil, false
	}
	if s.exact {
		same := func(d *Decision) bool { return d.ToolName == c.Name && d.Args != "" && d.Args == c.Args }
		if c.ID != "" {
			return s.decisions.find(c.ID, "", consume, same)
		}
		// A call an external agent re-issued after a cold resume has an
		// id of its own that no approval can name; it takes the approval
		// given for the very same name and canonical arguments, once.
		return s.decisions.findKey(c.Key, consume, same)
	}
	return s.decisions.find(c.ID, c.Key, consume, func(d *Decision) bool { return d.Key == c.Key })
}

// TakeOutput consumes the client output for a call: the oldest one
// recorded for its id whose key agrees (equal, or either empty: an output
// runs nothing, so a call that cannot be keyed may still get its
// browser's answer by id), else the oldest one recorded for its key.
func (s *Store) TakeOutput(c CallRef) (*Output, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findOutput(c, true)
}

// PeekOutput is TakeOutput without consuming.
func (s *Store) PeekOutput(c CallRef) (*Output, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findOutput(c, false)
}

func (s *Store) findOutput(c CallRef, consume bool) (*Output, bool) {
	return s.outputs.find(c.ID, c.Key, consume, func(o *Output) bool {
		return o.Key == "" || c.Key == "" || o.Key == c.Key
	})
}

// fifo is one kind of stored entry, reachable by id and by key.
type fifo[T any] struct {
	byID  map[string][]*slot[T]
	byKey map[string][]*slot[T]
}

type slot[T any] struct {
	value T
	used  bool
}

func (f *fifo[T]) add(id, key string, v T) {
	s := &slot[T]{value: v}
	if f.byID == nil {
		f.byID, f.byKey = map[string][]*slot[T]{}, map[string][]*slot[T]{}
	}
	if id != "" {
		f.byID[id] = append(f.byID[id], s)
	}
	if key != "" {
		f.byKey[key] = append(f.byKey[key], s)
	}
}

// find returns the oldest unused entry for id that agrees, else the
// oldest unused entry for key (an empty key looks nothing up by key).
func (f *fifo[T]) find(id, key string, consume bool, agrees func(*T) bool) (*T, bool) {
	pick := func(s *slot[T]) (*T, bool) {
		s.used = s.used || consume
		v := s.value
		return &v, true
	}
	if id != "" {
		for _, s := range f.byID[id] {
			if !s.used && agrees(&s.value) {
				return pick(s)
			}
		}
	}
	if key != "" {
		for _, s := range f.byKey[key] {
			if !s.used {
				return pick(s)
			}
		}
	}
	return nil, false
}

// findKey returns the oldest unused entry for key that agrees.
func (f *fifo[T]) findKey(key string, consume bool, agrees func(*T) bool) (*T, bool) {
	for _, s := range f.byKey[key] {
		if !s.used && agrees(&s.value) {
			s.used = s.used || consume
			v := s.value
			return &v, true
		}
	}
	return nil, false
}

// LatestUserText returns the index of the latest user message with text
// (the turn's prompt), or -1. Tool results sent in a user message carry no
// text, so an approval does not start a new turn.
func LatestUserText(messages []runnel.Message) int {
	for i := len(messages) - 1; i >= 0; i-- {
		if messages[i].Role == runnel.RoleUser && strings.TrimSpace(messages[i].Text()) != "" {
			return i
		}
	}
	return -1
}

// Extract reads the stored decisions and outputs of a replayed
// conversation (DESIGN §5.4).
//
// Decisions come from the whole history, except an approval whose call
// has since been answered by an ordinary result: that approval was spent
// when the call ran (or was superseded), and must not approve an identical
// call later. An approval block whose output is not {approved: bool} is a
// denial: it cannot be read as consent, and asking again could wedge the
// conversation.
//
// Client outputs come only from the current turn: blocks at or after the
// latest user message with text.
//
// A decision's key is computed from the call it answers (found by
// toolCallId, the nearest earlier call with that id); when there is no
// such call, from the toolName and input the result block itself carries.
func Extract(messages []runnel.Message, opts ExtractOptions) *Store {
	spec := func(name string) string { return StripServerPrefix(name, opts.Servers) }
	isClient := func(name string) bool { return opts.IsClientTool != nil && opts.IsClientTool(spec(name)) }
	// about names the call an answer belongs to, keys it and writes its
	// arguments canonically: from the call when there is one, else from
	// what the result block carries.
	about := func(a *ReplayedAnswer) (name, key, args string) {
		name, input := a.Block.ToolName, a.Block.Input
		if a.Call != nil {
			name, input = a.Call.Block.ToolName, a.Call.Block.Input
		}
		if name == "" {
			return "", "", ""
		}
		var bound []string
		if opts.BoundPaths != nil {
			bound = opts.BoundPaths(spec(name))
		}
		key, _ = Key(name, input, KeyOptions{Servers: opts.Servers, BoundPaths: bound})
		if c, err := CanonicalJSON(emptyAsObject(input)); err == nil {
			args = string(c)
		}
		return name, key, args
	}

	r := ReadReplay(messages, isClient)
	s := &Store{exact: opts.Exact}
	add := func(a *ReplayedAnswer) {
		switch {
		case a.Class == ResultApproval && (a.Call == nil || !a.Call.Spent()):
			name, key, args := about(a)
			ans := AnswerOf(a.Block)
			s.decisions.add(a.Block.ToolCallID, key, Decision{
				ToolCallID: a.Block.ToolCallID, ToolName: name, Key: key, Args: args, Approved: ans.Approved, Reason: ans.Reason,
				InteractionID: ans.InteractionID,
			})
		case a.Class == ResultClientOutput && r.Turn >= 0 && a.Message >= r.Turn:
			name, key, _ := about(a)
			s.outputs.add(a.Block.ToolCallID, key, Output{
				ToolCallID: a.Block.ToolCallID, ToolName: name, Key: key, Output: a.Block.Output, IsError: a.Block.IsError,
			})
		}
	}
	for _, a := range answersInOrder(r) {
		add(a)
	}
	return s
}

// answersInOrder is every result of r in conversation order, tied or not,
// so the first-in-first-out lists keep the order the person answered in.
func answersInOrder(r *Replay) []*ReplayedAnswer {
	var all []*ReplayedAnswer
	for _, c := range r.Calls {
		all = append(all, c.Answers...)
	}
	all = append(all, r.Untied...)
	slices.SortFunc(all, func(a, b *ReplayedAnswer) int {
		return cmp.Or(cmp.Compare(a.Message, b.Message), cmp.Compare(a.Index, b.Index))
	})
	return all
}

// emptyAsObject reads absent or null arguments as {}, as the loop and the
// interaction show them.
func emptyAsObject(input json.RawMessage) json.RawMessage {
	if t := strings.TrimSpace(string(input)); t == "" || t == "null" {
		return json.RawMessage(`{}`)
	}
	return input
}

// ParkedCall is a tool call a paused turn left without an answer.
type ParkedCall struct {
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	// Deferred is true when the call does have a DEFERRED_NOT_EXECUTED
	// result, so the model has already seen it settled; a caller adding a
	// superseded result may want to replace that one rather than add a
	// second result for one call.
	Deferred bool
}

// Unanswered returns the tool calls of the turn before the latest user
// message with text (the messages between the previous user message with
// text and it) that have no tool_result after them other than
// DEFERRED_NOT_EXECUTED ones. When a newer user message arrived, these
// calls were parked by a pause the person never answered, and must be
// resolved as superseded before the model runs again (DESIGN §5.4).
func Unanswered(messages []runnel.Message) []ParkedCall {
	r := ReadReplay(messages, nil)
	if r.Turn < 0 {
		return nil
	}
	var parked []ParkedCall
	for _, c := range r.Calls {
		if c.Message <= r.Previous || c.Message >= r.Turn {
			continue
		}
		answered, deferred := false, false
		for _, a := range c.Answers {
			if a.Class == ResultDeferred {
				deferred = true
			} else {
				answered = true
			}
		}
		if !answered {
			parked = append(parked, ParkedCall{
				ToolCallID: c.Block.ToolCallID, ToolName: c.Block.ToolName, Input: c.Block.Input, Deferred: deferred,
			})
		}
	}
	return parked
}
