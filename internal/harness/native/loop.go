package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/strictjson"
)

const (
	defaultMaxSteps = 50
	defaultParallel = 4
)

// The defaults of Turn.MaxStepBytes and Turn.MaxRunBytes: far above any
// real answer (a 128k-token answer is about half a megabyte), far below
// what would hurt the process.
const (
	DefaultMaxStepBytes = 8 << 20
	DefaultMaxRunBytes  = 32 << 20
)

// chunkOverhead is what each chunk counts on top of its text, so a stream
// of empty chunks (or of tool calls without arguments, each of which an
// adapter keeps) is bounded too.
const chunkOverhead = 64

// phase is where the loop is. Each phase method does its work and names
// the phase that follows, so the whole control flow reads in Run's switch.
type phase int

const (
	// phaseResume settles the calls a paused turn left waiting and puts the
	// replayed history in the order model APIs require.
	phaseResume phase = iota
	phaseCallModel
	phaseRunTools
	phaseFinish
)

// state is one run of the loop: the conversation as the model will see it
// next, what this turn added, and the tool calls waiting to run.
type state struct {
	turn    *Turn
	sink    runnel.Sink
	log     *slog.Logger
	tools   map[string]provider.Tool
	history []runnel.Message
	out     Outcome
	// calls are the tool_call blocks of the last model step.
	calls []runnel.Block
	// streamed counts what the model has streamed in this run.
	streamed int64
}

// Run drives the loop until the model ends its turn, the step limit is
// reached or a call pauses the turn, and then emits done. On a failure
// (model error, cancelled ctx) it returns the error and what the turn added
// so far, and emits no done: the caller reports the failure and ends the
// stream. Run waits for every tool execution it started before returning.
func Run(ctx context.Context, t *Turn, sink runnel.Sink) (*Outcome, error) {
	s := &state{
		turn:    t,
		sink:    sink,
		log:     t.Logger,
		tools:   make(map[string]provider.Tool, len(t.Tools)),
		history: append([]runnel.Message(nil), t.Messages...),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, tool := range t.Tools {
		s.tools[tool.Name] = tool
	}
	ph := phaseResume
	for {
		if err := ctx.Err(); err != nil {
			return &s.out, context.Cause(ctx)
		}
		var err error
		switch ph {
		case phaseResume:
			ph = s.resume(ctx)
		case phaseCallModel:
			ph, err = s.callModel(ctx)
		case phaseRunTools:
			ph = s.runTools(ctx)
		case phaseFinish:
			sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: s.out.StopReason})
			return &s.out, nil
		}
		if err != nil {
			return &s.out, err
		}
	}
}

func (s *state) maxSteps() int {
	if s.turn.MaxSteps > 0 {
		return s.turn.MaxSteps
	}
	return defaultMaxSteps
}

// callModel runs one model step: stream it, record the assistant message,
// and go on to the tools it called or finish the turn.
func (s *state) callModel(ctx context.Context) (phase, error) {
	s.out.Steps++
	step := s.out.Steps
	req := &provider.Request{
		Model:     s.turn.ModelID,
		System:    s.turn.System,
		Messages:  s.history,
		Tools:     s.turn.Tools,
		MaxTokens: s.turn.MaxTokens,
	}
	parts := &partStream{sink: s.sink, step: step}
	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	resp, err := s.turn.Model.Stream(sctx, req, s.capped(step, stop, parts.emit))
	parts.close()
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		err = context.Cause(sctx) // a cap stopped the step; say so, not "context canceled"
	}
	if err != nil {
		return phaseFinish, err
	}
	content := make([]runnel.Block, 0, len(resp.Content))
	for _, b := range resp.Content {
		if b.Type != runnel.BlockToolCall {
			content = append(content, b)
			continue
		}
		// Some OpenAI-compatible servers send calls without an id. The id
		// names the call across replicas and turns (interactions, the
		// Idempotency-Key of a callback), so it must not repeat from one
		// run to the next as a counter would.
		if b.ToolCallID == "" {
			b.ToolCallID = newCallID()
		}
		// The raw arguments are checked later, so the model can be told
		// exactly what was wrong with them. What is recorded and streamed
		// must be JSON that a replay can send back, and a request holding
		// a member twice is refused (internal/strictjson), so arguments
		// that fail the strict check are kept as a JSON string.
		s.calls = append(s.calls, b)
		if len(b.Input) > 0 && strictjson.Check(b.Input) != nil {
			b.Input = runnel.TextOutput(string(b.Input))
		}
		content = append(content, b)
		s.sink.Emit(runnel.Event{Type: runnel.EventToolCall, ID: b.ToolCallID, Name: b.ToolName, Input: b.Input})
	}
	usage := resp.Usage
	if usage.Total == 0 {
		usage.Total = usage.Input + usage.Output
	}
	s.out.Usage.Add(usage)
	// Cumulative: each usage event carries the run's totals so far, so the
	// last one is the run's total, as platforms read it (DESIGN §3.4).
	total := s.out.Usage
	s.sink.Emit(runnel.Event{Type: runnel.EventUsage, Usage: &total})
	// An empty answer adds nothing: some APIs reject an assistant message
	// without content when the history is replayed.
	if len(content) > 0 {
		msg := runnel.Message{Role: runnel.RoleAssistant, Content: content}
		s.history = append(s.history, msg)
		s.out.Messages = append(s.out.Messages, msg)
		if text := msg.Text(); strings.TrimSpace(text) != "" {
			s.out.Output = text
		}
	}
	s.log.DebugContext(ctx, "model step", "step", step, "tool_calls", len(s.calls), "stop", resp.StopReason)
	if len(s.calls) == 0 {
		s.out.StopReason = endReason(resp.StopReason)
		return phaseFinish, nil
	}
	return phaseRunTools, nil
}

// capped counts every chunk of a step against the step's and the run's
// caps and passes it on; past either it stops the step (stop's cause is
// what the model call then fails with) and drops what still comes.
func (s *state) capped(step int, stop context.CancelCauseFunc, emit func(provider.Chunk)) func(provider.Chunk) {
	maxStep, maxRun := s.turn.MaxStepBytes, s.turn.MaxRunBytes
	if maxStep <= 0 {
		maxStep = DefaultMaxStepBytes
	}
	if maxRun <= 0 {
		maxRun = DefaultMaxRunBytes
	}
	var inStep int64
	over := false
	return func(c provider.Chunk) {
		if over {
			return
		}
		n := int64(len(c.Text)+len(c.ToolCallID)+len(c.ToolName)) + chunkOverhead
		inStep += n
		s.streamed += n
		switch {
		case inStep > maxStep:
			over = true
			stop(runnel.Errorf(runnel.CodeProviderError,
				"The model's answer in step %d went past %s, the most one step may stream; the run was stopped. If answers this long are expected, raise the limit on the server (RUNNEL_MAX_STEP_BYTES).", step, byteCount(maxStep)))
		case s.streamed > maxRun:
			over = true
			stop(runnel.Errorf(runnel.CodeProviderError,
				"The model's answers in this run went past %s, the most one run may stream; the run was stopped. If runs this long are expected, raise the limit on the server (RUNNEL_MAX_RUN_BYTES).", byteCount(maxRun)))
		default:
			emit(c)
		}
	}
}

// byteCount writes a size the way people configure it.
func byteCount(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// endReason is the stop reason of a turn the model ended itself. A normal
// end is end_turn whatever the API called it; anything else (max_tokens,
// refusal, content_filter) is passed on, because the caller should know
// the answer may be cut short.
func endReason(apiReason string) string {
	switch apiReason {
	case "", "end_turn", "stop", "stop_sequence", "tool_use":
		return runnel.StopEndTurn
	}
	return apiReason
}

// runTools settles every call of the last step, in call order, and decides
// whether the turn goes on, stops at the step limit, or pauses.
func (s *state) runTools(ctx context.Context) phase {
	calls := s.calls
	s.calls = nil
	results, interactions := s.dispatch(ctx, calls, deferOnPause)
	s.addResults(calls, results)
	switch {
	case len(interactions) > 0:
		s.out.Interactions = interactions
		s.out.StopReason = runnel.StopPaused
		return phaseFinish
	case s.out.Steps >= s.maxSteps():
		s.out.StopReason = runnel.StopMaxSteps
		return phaseFinish
	}
	return phaseCallModel
}

// addResults answers the settled calls in one tool message, in call
// order. A paused call gets no result: the next request answers it.
func (s *state) addResults(calls []runnel.Block, results map[int]harness.ToolResult) {
	msg := runnel.Message{Role: runnel.RoleTool}
	for i, c := range calls {
		r, ok := results[i]
		if !ok {
			continue
		}
		msg.Content = append(msg.Content, runnel.Block{
			Type: runnel.BlockToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName,
			Output: r.Output, IsError: r.IsError,
		})
	}
	if len(msg.Content) > 0 {
		s.history = append(s.history, msg)
		s.out.Messages = append(s.out.Messages, msg)
	}
}

// partStream turns a model's chunks into message and thought events. Each
// run of text (or reasoning) chunks is one part with its own id, closed
// when a chunk of another kind arrives or the stream ends.
type partStream struct {
	sink   runnel.Sink
	step   int
	open   runnel.EventType // EventMessageEnd or EventThoughtEnd while a part is open
	id     string
	counts map[string]int
}

func (p *partStream) emit(c provider.Chunk) {
	switch c.Kind {
	case provider.ChunkText:
		p.delta("msg", runnel.EventMessageStart, runnel.EventMessageDelta, runnel.EventMessageEnd, c.Text)
	case provider.ChunkReasoning:
		p.delta("thought", runnel.EventThoughtStart, runnel.EventThoughtDelta, runnel.EventThoughtEnd, c.Text)
	default:
		p.close()
	}
}

func (p *partStream) delta(prefix string, start, delta, end runnel.EventType, text string) {
	if text == "" {
		return
	}
	if p.open != end {
		p.close()
		if p.counts == nil {
			p.counts = map[string]int{}
		}
		p.counts[prefix]++
		p.id = fmt.Sprintf("%s_%d", prefix, p.step)
		if n := p.counts[prefix]; n > 1 {
			p.id = fmt.Sprintf("%s_%d_%d", prefix, p.step, n)
		}
		p.open = end
		p.sink.Emit(runnel.Event{Type: start, ID: p.id})
	}
	p.sink.Emit(runnel.Event{Type: delta, ID: p.id, Delta: text})
}

func (p *partStream) close() {
	if p.open != "" {
		p.sink.Emit(runnel.Event{Type: p.open, ID: p.id})
		p.open = ""
	}
}

// newCallID is a fresh tool call id for a call its provider sent without one.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}
