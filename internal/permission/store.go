package permission

import (
	"encoding/json"
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
	Approved   bool
	Reason     string
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
}

// Store holds the decisions and client outputs of a replayed conversation
// as first-in-first-out lists per call key, indexed by toolCallId too.
// Each entry is consumed once. A Store is safe for concurrent use.
type Store struct {
	mu        sync.Mutex
	decisions fifo[Decision]
	outputs   fifo[Output]
}

// TakeDecision consumes the decision for a call: the oldest one recorded
// for toolCallID whose key agrees with key, else the oldest one recorded
// for key. Keys agree when they are equal or either is empty; that check
// keeps a provider that reuses ids across turns ("call_0") from applying an
// old answer to a different call. An empty toolCallID or key does not
// match by that index.
func (s *Store) TakeDecision(toolCallID, key string) (*Decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decisions.find(toolCallID, key, true)
}

// PeekDecision is TakeDecision without consuming: an ACP permission gate
// may look before it knows whether it will pause.
func (s *Store) PeekDecision(toolCallID, key string) (*Decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decisions.find(toolCallID, key, false)
}

// TakeOutput consumes the client output for a call, matched as
// TakeDecision matches.
func (s *Store) TakeOutput(toolCallID, key string) (*Output, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outputs.find(toolCallID, key, true)
}

// PeekOutput is TakeOutput without consuming.
func (s *Store) PeekOutput(toolCallID, key string) (*Output, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outputs.find(toolCallID, key, false)
}

// fifo is one kind of stored entry, reachable by id and by key.
type fifo[T any] struct {
	byID  map[string][]*slot[T]
	byKey map[string][]*slot[T]
}

type slot[T any] struct {
	id, key string
	value   T
	used    bool
}

func (f *fifo[T]) add(id, key string, v T) {
	s := &slot[T]{id: id, key: key, value: v}
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

func (f *fifo[T]) find(id, key string, consume bool) (*T, bool) {
	pick := func(s *slot[T]) (*T, bool) {
		s.used = s.used || consume
		v := s.value
		return &v, true
	}
	if id != "" {
		for _, s := range f.byID[id] {
			if !s.used && (s.key == "" || key == "" || s.key == key) {
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

// resultClass is what a tool_result block is to the store.
type resultClass int

const (
	resultExecuted resultClass = iota // an ordinary result: the call ran (or was refused)
	resultDeferred                    // settled without running; not an answer
	resultApproval
	resultClientOutput
)

// call is one tool_call block and where it sits.
type call struct {
	seq   int // position among all blocks, unique per call
	block runnel.Block
}

// answer is one tool_result block, tied to the call it answers: the
// nearest earlier call with its toolCallId (providers may reuse ids), or
// none.
type answer struct {
	message int
	block   runnel.Block
	call    *call
	class   resultClass
}

// scan ties every tool_result to its call and classifies it.
func scan(messages []runnel.Message, isClient func(name string) bool) ([]*call, []answer) {
	var calls []*call
	latest := map[string]*call{}
	var answers []answer
	seq := 0
	for i, m := range messages {
		for _, b := range m.Content {
			seq++
			switch b.Type {
			case runnel.BlockToolCall:
				c := &call{seq: seq, block: b}
				calls = append(calls, c)
				if b.ToolCallID != "" {
					latest[b.ToolCallID] = c
				}
			case runnel.BlockToolResult:
				a := answer{message: i, block: b, call: latest[b.ToolCallID]}
				if b.ToolCallID == "" {
					a.call = nil
				}
				name := b.ToolName
				if a.call != nil {
					name = a.call.block.ToolName
				}
				a.class = classify(b, func() bool { return isClient(name) })
				answers = append(answers, a)
			}
		}
	}
	return calls, answers
}

// classify reads kind first; without it, the shape: an object output with
// a boolean approved is an approval, anything else is a client output when
// it answers a client tool. A result whose text starts with
// DEFERRED_NOT_EXECUTED is never an answer, whatever its kind.
func classify(b runnel.Block, isClient func() bool) resultClass {
	switch {
	case strings.HasPrefix(b.OutputText(), DeferredPrefix):
		return resultDeferred
	case b.Kind == runnel.ResultKindApproval:
		return resultApproval
	case b.Kind == runnel.ResultKindClientOutput:
		return resultClientOutput
	case b.Kind != "":
		return resultExecuted
	}
	if _, _, ok := approvalShape(b.Output); ok {
		return resultApproval
	}
	if isClient() {
		return resultClientOutput
	}
	return resultExecuted
}

// approvalShape reads {approved: bool, reason?: string}, also when the
// output is a string holding that object.
func approvalShape(output json.RawMessage) (approved bool, reason string, ok bool) {
	v, err := parseJSON(string(output))
	if err != nil {
		return false, "", false
	}
	if v.kind == jsonString {
		if parsed, isJSON := parseJSONish(v.text); isJSON {
			v = parsed
		}
	}
	a, found := v.member("approved")
	if v.kind != jsonObject || !found || a.kind != jsonBool {
		return false, "", false
	}
	if r, found := v.member("reason"); found && r.kind == jsonString {
		reason = r.text
	}
	return a.boolean, reason, true
}

// approvalOf reads an approval block. With kind "approval" a bare boolean
// output is accepted too; anything unreadable is a denial.
func approvalOf(b runnel.Block) (approved bool, reason string) {
	if approved, reason, ok := approvalShape(b.Output); ok {
		return approved, reason
	}
	if v, err := parseJSON(string(b.Output)); err == nil && v.kind == jsonBool {
		return v.boolean, ""
	}
	return false, ""
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
	// nameAndKey names the call an answer belongs to and keys it: from the
	// call when there is one, else from what the result block carries.
	nameAndKey := func(a answer) (string, string) {
		name, input := a.block.ToolName, a.block.Input
		if a.call != nil {
			name, input = a.call.block.ToolName, a.call.block.Input
		}
		if name == "" {
			return "", ""
		}
		var bound []string
		if opts.BoundPaths != nil {
			bound = opts.BoundPaths(spec(name))
		}
		key, _ := Key(name, input, KeyOptions{Servers: opts.Servers, BoundPaths: bound})
		return name, key
	}

	_, answers := scan(messages, isClient)
	spent := map[*call]bool{}
	for _, a := range answers {
		if a.call != nil && (a.class == resultExecuted || a.class == resultClientOutput) {
			spent[a.call] = true
		}
	}
	turn := LatestUserText(messages)
	s := &Store{}
	for _, a := range answers {
		switch {
		case a.class == resultApproval && (a.call == nil || !spent[a.call]):
			name, key := nameAndKey(a)
			approved, reason := approvalOf(a.block)
			s.decisions.add(a.block.ToolCallID, key, Decision{
				ToolCallID: a.block.ToolCallID, ToolName: name, Key: key, Approved: approved, Reason: reason,
			})
		case a.class == resultClientOutput && turn >= 0 && a.message >= turn:
			name, key := nameAndKey(a)
			s.outputs.add(a.block.ToolCallID, key, Output{
				ToolCallID: a.block.ToolCallID, ToolName: name, Key: key, Output: a.block.Output, IsError: a.block.IsError,
			})
		}
	}
	return s
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
	turn := LatestUserText(messages)
	if turn < 0 {
		return nil
	}
	previous := LatestUserText(messages[:turn])
	calls, answers := scan(messages, func(string) bool { return false })
	answered := map[*call]bool{}
	deferred := map[*call]bool{}
	for _, a := range answers {
		if a.call == nil {
			continue
		}
		if a.class == resultDeferred {
			deferred[a.call] = true
		} else {
			answered[a.call] = true
		}
	}
	first, last := blockRange(messages, previous+1, turn)
	var parked []ParkedCall
	for _, c := range calls {
		if c.seq < first || c.seq > last || answered[c] {
			continue
		}
		parked = append(parked, ParkedCall{
			ToolCallID: c.block.ToolCallID, ToolName: c.block.ToolName, Input: c.block.Input, Deferred: deferred[c],
		})
	}
	return parked
}

// blockRange returns the block sequence numbers (as scan counts them) of
// messages[from:to], first and last inclusive.
func blockRange(messages []runnel.Message, from, to int) (first, last int) {
	seq := 0
	first, last = 1, 0
	for i, m := range messages {
		if i == from {
			first = seq + 1
		}
		seq += len(m.Content)
		if i == to-1 {
			last = seq
		}
	}
	return first, last
}
