package native

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
)

// pauseRule says what becomes of a step's runnable calls when another
// call of the step pauses.
type pauseRule int

const (
	// deferOnPause settles them with Deferred: a model step waits whole
	// for the person, so nothing of it runs before they have answered.
	deferOnPause pauseRule = iota
	// runOnPause runs them anyway: on resume, a runnable call is one a
	// person has answered, and waiting would answer nobody.
	runOnPause
)

// dispatch gives every call of one step its verdict, in call order, then
// runs the executable ones (a bounded number at once), unless a call
// pauses and the rule defers them. It returns the result of each settled
// call by index and the interactions of the paused ones. Results and
// interaction requests are emitted in call order, whatever order the
// executions finish in, so a stream reads the same way every time.
func (s *state) dispatch(ctx context.Context, calls []runnel.Block, rule pauseRule) (map[int]harness.ToolResult, []runnel.Interaction) {
	verdicts := make([]harness.Verdict, len(calls))
	var interactions []runnel.Interaction
	for i, c := range calls {
		verdicts[i] = s.verdict(ctx, c, rule == runOnPause)
		if it := verdicts[i].Interaction(); it != nil {
			interactions = append(interactions, *it)
		}
	}
	for _, v := range verdicts {
		if v.Answer() != nil {
			s.sink.Emit(runnel.Event{Type: runnel.EventInteractionResponse, Answer: v.Answer()})
		}
	}
	results := make(map[int]harness.ToolResult, len(calls))
	if len(interactions) > 0 && rule == deferOnPause {
		for i, v := range verdicts {
			switch {
			case v.Interaction() != nil:
				s.sink.Emit(runnel.Event{Type: runnel.EventInteractionRequest, Interaction: v.Interaction()})
			case v.Run() != nil:
				results[i] = harness.TextResult(harness.Deferred, true)
				s.emitResult(calls[i], results[i])
			default:
				results[i] = v.Result()
				s.emitResult(calls[i], results[i])
			}
		}
		return results, interactions
	}
	done, wait := s.execute(ctx, verdicts)
	for i := range calls {
		r := <-done[i]
		if it := verdicts[i].Interaction(); it != nil {
			s.sink.Emit(runnel.Event{Type: runnel.EventInteractionRequest, Interaction: it})
			continue
		}
		results[i] = r
		s.emitResult(calls[i], r)
	}
	wait()
	return results, interactions
}

// execute starts the executable verdicts, at most Parallel at once, and
// returns one channel per call that yields its result, and a wait that
// returns once every goroutine it started has ended.
func (s *state) execute(ctx context.Context, verdicts []harness.Verdict) ([]chan harness.ToolResult, func()) {
	parallel := s.turn.Parallel
	if parallel <= 0 {
		parallel = defaultParallel
	}
	slots := make(chan struct{}, parallel)
	done := make([]chan harness.ToolResult, len(verdicts))
	var wg sync.WaitGroup
	for i, v := range verdicts {
		done[i] = make(chan harness.ToolResult, 1)
		if v.Run() == nil {
			done[i] <- v.Result()
			continue
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			done[i] <- runSafely(ctx, v.Run())
		})
	}
	return done, wg.Wait
}

// runSafely runs fn and turns a panic into a tool error: a broken tool must
// not take the run down.
func runSafely(ctx context.Context, fn harness.ToolFunc) (r harness.ToolResult) {
	defer func() {
		if p := recover(); p != nil {
			r = harness.TextResult(fmt.Sprintf("Tool failed with an internal error: %v", p), true)
		}
	}()
	return fn(ctx)
}

// verdict checks the call against the advertised tools before asking the
// dispatcher: an unknown name or unusable arguments are answered to the
// model, so it can correct itself, and never reach a tool. resumed says
// the call is a parked one being settled.
func (s *state) verdict(ctx context.Context, c runnel.Block, resumed bool) harness.Verdict {
	tool, ok := s.tools[c.ToolName]
	if !ok {
		return harness.Answer(harness.TextResult(s.unknownTool(c.ToolName), true))
	}
	input, problem := harness.CheckArgs(c.ToolName, c.Input, tool.Schema)
	if problem != "" {
		return harness.Answer(harness.TextResult(problem, true))
	}
	if s.turn.Dispatcher == nil {
		return harness.Answer(harness.TextResult(fmt.Sprintf("Tool '%s' cannot be executed in this run.", c.ToolName), true))
	}
	return s.turn.Dispatcher.Dispatch(ctx, harness.Call{ID: c.ToolCallID, Name: c.ToolName, Input: input, Resumed: resumed})
}

func (s *state) unknownTool(name string) string {
	if len(s.tools) == 0 {
		return fmt.Sprintf("Tool '%s' is not available: this run has no tools. Answer without calling tools.", name)
	}
	names := make([]string, 0, len(s.tools))
	for n := range s.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("Tool '%s' is not available. Available tools: %s.", name, strings.Join(names, ", "))
}

func (s *state) emitResult(c runnel.Block, r harness.ToolResult) {
	s.sink.Emit(runnel.Event{Type: runnel.EventToolResult, ID: c.ToolCallID, Output: r.Output, IsError: r.IsError, Denied: r.Denied})
}
