package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"modernc.org/quickjs"
)

// maxDrainJobs is how many jobs quickjs's ExecutePendingJobs runs before it
// gives up on a self-feeding queue and returns; an async loop that never
// awaits a tool reaches it, and drain then goes on until the budget ends.
const maxDrainJobs = 1 << 20

type toolKey struct{ server, tool string }

// session is one Run: one VM, the event loop around it, and the tool calls
// in flight. The VM and the fields without a comment belong to the
// session's goroutine, the only one that touches the VM while the script
// runs (a Warm's goroutine builds it before and closes it after); the call
// goroutines only send on results.
type session struct {
	parent      context.Context // the caller's: its end means cancelled, not timed out
	budget      context.Context // parent with the timeout
	calls       context.Context // budget, also cancelled when the script settles: the calls' context
	cancelCalls context.CancelFunc
	deadline    time.Time
	opts        Options
	caller      Caller
	order       []toolKey // the tools, in the order given, without duplicates; a script calls them by index
	vm          *quickjs.VM
	// resolve and reject are the prelude's runnel$resolve and
	// runnel$reject, which the sandbox frees.
	resolve, reject quickjs.Value

	results chan callDone // capacity MaxConcurrentCalls, so a call never blocks sending
	wg      sync.WaitGroup
	running int
	waiting []*toolCall
	settled *settlement // set by the script's report: no call starts after it

	pendingBytes int64 // the arguments of the calls waiting or running

	// dropped counts the calls not made because the script had returned,
	// cancelled the calls in flight when it returned.
	dropped, cancelled int

	hooks hooks // what tests observe and steer; none in production

	mu        sync.Mutex // guards the fields below, which Run reads when it abandons the VM
	logs      []string
	logRoom   int
	abandoned bool // Run has returned without the VM: no call may start
	vmEnded   bool // the VM is closed (or handed to the Warm) and the Output sent
}

// runWith is Run, with the hooks of tests.
func runWith(ctx context.Context, script string, tools []Tool, caller Caller, opts *Options, h hooks) Output {
	o := opts.withDefaults()
	if o.Limiter != nil && !o.Limiter.admits() {
		return busy().withEmpty()
	}
	budget, cancelBudget := context.WithTimeout(ctx, o.Timeout)
	defer cancelBudget()
	calls, cancelCalls := context.WithCancel(budget)
	deadline, _ := budget.Deadline()
	s := &session{
		parent:      ctx,
		budget:      budget,
		calls:       calls,
		cancelCalls: cancelCalls,
		deadline:    deadline,
		opts:        o,
		caller:      caller,
		results:     make(chan callDone, o.MaxConcurrentCalls),
		logRoom:     o.MaxLogBytes,
		hooks:       h,
	}
	known := make(map[toolKey]bool, len(tools))
	for _, t := range tools {
		k := toolKey{t.Server, t.Name}
		if !known[k] {
			known[k] = true
			s.order = append(s.order, k)
		}
	}

	done := make(chan Output, 1)
	go func() {
		// The Output goes first: the budget ends only with Run, so that a
		// script that finished in time is never taken for one that did not.
		done <- s.run(script)
		s.vmGone()
	}()
	out, ok := s.wait(done)
	if !ok {
		out = s.abandon(done)
	}
	return out.withEmpty()
}

// withEmpty writes the empty logs and the null result as the model reads
// them.
func (out Output) withEmpty() Output {
	if out.Logs == nil {
		out.Logs = []string{}
	}
	if out.Result == nil {
		out.Result = json.RawMessage("null")
	}
	return out
}

// wait returns the session's Output, unless the engine is still running
// Options.AbandonGrace after the budget ended.
func (s *session) wait(done <-chan Output) (Output, bool) {
	select {
	case out := <-done:
		return out, true
	case <-s.budget.Done():
	}
	grace := time.NewTimer(s.opts.AbandonGrace)
	defer grace.Stop()
	select {
	case out := <-done:
		return out, true
	case <-grace.C:
		return Output{}, false
	}
}

// abandon returns without the VM, which is still inside one long built-in
// call: the engine checks for an interrupt only between calls. No call can
// start from now on, and the calls in flight, cancelled with the budget,
// are waited for; the VM's goroutine ends on its own when the engine stops,
// and leaves the Limiter's count then. If it has just ended, its Output is
// there after all.
func (s *session) abandon(done <-chan Output) Output {
	s.mu.Lock()
	if s.vmEnded {
		s.mu.Unlock()
		return <-done
	}
	s.abandoned = true
	if s.opts.Limiter != nil {
		// Under mu, so that vmGone, which takes the sandbox out of the
		// count, cannot come first.
		s.opts.Limiter.abandon()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return s.stopped(s.logsSoFar())
}

// vmGone is the last thing the VM's goroutine does, after the VM is closed
// (or handed to the Warm, which closes it next) and the Output sent: an
// abandoned sandbox leaves the Limiter's count.
func (s *session) vmGone() {
	s.mu.Lock()
	s.vmEnded = true
	abandoned := s.abandoned
	s.mu.Unlock()
	if abandoned && s.opts.Limiter != nil {
		s.opts.Limiter.end()
	}
}

func (s *session) run(script string) Output {
	sb := s.opts.Warm.take(s.opts.MemoryLimit)
	if sb == nil {
		var err error
		if sb, err = newSandbox(s.opts.MemoryLimit); err != nil {
			return s.failure(err)
		}
	}
	// Without a Warm the sandbox is closed here; a Warm's goroutine closes
	// it after Run has returned, off the caller's path.
	defer s.opts.Warm.retire(sb)
	if s.hooks.sandbox != nil {
		s.hooks.sandbox(sb)
	}
	sb.attach(s)
	vm := sb.vm

	// The eval timeout stops JS when the budget ends; Interrupt stops it
	// when the caller goes away meanwhile.
	interrupted := make(chan struct{})
	stop := context.AfterFunc(s.budget, func() {
		defer close(interrupted)
		vm.Interrupt()
	})
	defer func() {
		if !stop() {
			<-interrupted
		}
	}()
	defer s.shutdown()

	if out, failed := s.start(sb, script); failed {
		return out
	}
	if out, failed := s.loop(); failed {
		return out
	}
	s.shutdown() // before finish, which reports what it cancelled
	return s.finish()
}

// start gives the sandbox the script's tools and limits and runs the
// script's synchronous part.
func (s *session) start(sb *sandbox, script string) (Output, bool) {
	if err := s.enter(); err != nil {
		return s.failure(err), true
	}
	if _, err := sb.install.Call(quickjs.UndefinedValue, s.toolList(), s.opts.MaxResultBytes, s.opts.MaxLogBytes); err != nil {
		return s.failure(err), true
	}

	// The script is the body of an async function, so that top-level await
	// and return work. It starts on the wrapper's line, so that the line
	// numbers in its errors are the script's own.
	if err := s.enter(); err != nil {
		return s.failure(err), true
	}
	promise, err := s.vm.EvalValue(scriptPrefix+script+"\n})()", quickjs.EvalGlobal)
	if err != nil {
		return s.failure(err), true
	}
	defer promise.Free()
	if err := s.enter(); err != nil {
		return s.failure(err), true
	}
	if _, err := sb.settle.Call(quickjs.UndefinedValue, promise); err != nil {
		return s.failure(err), true
	}
	return Output{}, false
}

// toolList is the prelude's tool list: [server, tool] for each tool, in
// the order given, without duplicates.
func (s *session) toolList() string {
	list := make([][2]string, 0, len(s.order))
	for _, k := range s.order {
		list = append(list, [2]string{k.server, k.tool})
	}
	b, _ := json.Marshal(list) // strings only: cannot fail
	return string(b)
}

// loop runs the script's jobs and delivers tool results until its promise
// settles. Calls the script makes wait until the queue is drained before
// they start: by then the job that reports the script's return has run if
// the script returned, so no call starts once it has, not even from a job
// queued before the return.
func (s *session) loop() (Output, bool) {
	for {
		if err := s.drain(); err != nil {
			return s.failure(err), true
		}
		if s.settled != nil {
			return Output{}, false
		}
		s.launchWaiting()
		if s.running == 0 {
			if s.budget.Err() != nil {
				return s.failure(errStopped), true
			}
			return Output{
				Logs:    s.logsSoFar(),
				Failure: FailureScript,
				Error:   "the script's promise never settled: it waited for something that can never happen (the sandbox has no timers or events; only tool calls complete later)",
			}, true
		}
		select {
		case d := <-s.results:
			if err := s.deliver(d); err != nil {
				return s.failure(err), true
			}
		case <-s.budget.Done():
			return s.failure(errStopped), true
		}
		for more := true; more; {
			select {
			case d := <-s.results:
				if err := s.deliver(d); err != nil {
					return s.failure(err), true
				}
			default:
				more = false
			}
		}
	}
}

// drain runs the queued jobs: promise reactions and async continuations.
func (s *session) drain() error {
	for {
		if err := s.enter(); err != nil {
			return err
		}
		n, err := s.vm.ExecutePendingJobs()
		switch {
		case s.settled != nil:
			// Whatever stopped the drain (the Interrupt of hostReport) is of
			// no interest now.
			return nil
		case err != nil && n >= maxDrainJobs:
			continue
		default:
			return err
		}
	}
}

// enter must precede every call into the VM: it refuses once the budget has
// ended and otherwise gives the engine what is left of it, so that one
// budget covers every synchronous stretch and the waits between them.
func (s *session) enter() error {
	if s.budget.Err() != nil {
		return errStopped
	}
	left := time.Until(s.deadline)
	if left <= 0 {
		return errStopped
	}
	if s.hooks.evalTimeout != nil {
		s.hooks.evalTimeout(left)
	}
	return s.vm.SetEvalTimeout(left)
}

// refuseImport is the module loader: there are no modules to import.
func refuseImport(_ *quickjs.VM, name string) (string, error) {
	return "", fmt.Errorf("import is not available in this sandbox (module %q); call tools.<server>.<tool>(args) instead", name)
}
