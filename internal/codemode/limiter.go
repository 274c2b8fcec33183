package codemode

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Limiter bounds the sandboxes that outlive their Run. The engine cannot
// interrupt one long built-in call, so Run returns without such a VM after
// Options.AbandonGrace, and the VM's goroutine keeps a CPU, and up to
// Options.MemoryLimit, until the built-in ends, which can take minutes. A
// model that retries the script would pile them up until every CPU of the
// process is taken. While the abandoned sandboxes number at least the
// bound, every Run given the Limiter refuses at once (FailureBusy) with a
// sentence telling the model to retry later or call the tools directly;
// each abandoned sandbox leaves the count when its goroutine ends.
//
// Runs already under way when the bound is reached may still be abandoned,
// so the count can exceed the bound by the scripts running at that moment;
// what it prevents is new scripts joining them.
//
// Create one per process, in main, and give it to every Run through
// Options.Limiter. A Limiter is safe for concurrent use.
type Limiter struct {
	bound int

	mu        sync.Mutex
	abandoned int
	// ended is closed, and replaced, whenever an abandoned sandbox ends,
	// waking those who wait for the count to drop.
	ended chan struct{}
}

// NewLimiter returns a Limiter that refuses scripts while bound sandboxes
// are abandoned. A bound of zero or less means half the CPUs the process
// may use (GOMAXPROCS, which follows a container's CPU limit), and at least
// one: each abandoned sandbox holds a CPU, so that leaves at least half of
// them to the runs and to the scripts that behave, and with the default
// memory limit of 64 MiB it keeps their memory to 64 MiB per two CPUs.
func NewLimiter(bound int) *Limiter {
	if bound <= 0 {
		bound = defaultBound(runtime.GOMAXPROCS(0))
	}
	return &Limiter{bound: bound, ended: make(chan struct{})}
}

func defaultBound(procs int) int {
	return max(1, procs/2)
}

// Abandoned is how many sandboxes are still running after their Run
// returned, for the process's metrics.
func (l *Limiter) Abandoned() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.abandoned
}

// Wait returns once no abandoned sandbox is left, or with ctx's error: for
// a shutdown that waits for them, and for tests that check that no
// goroutine outlives them.
func (l *Limiter) Wait(ctx context.Context) error {
	return l.waitBelow(ctx, 1)
}

// waitBelow returns once fewer than n sandboxes are abandoned.
func (l *Limiter) waitBelow(ctx context.Context, n int) error {
	for {
		l.mu.Lock()
		count, ended := l.abandoned, l.ended
		l.mu.Unlock()
		if count < n {
			return nil
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// admits reports whether a new Run may start.
func (l *Limiter) admits() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.abandoned < l.bound
}

// abandon counts a sandbox Run returned without.
func (l *Limiter) abandon() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.abandoned++
}

// end is called by the goroutine of an abandoned sandbox once its VM is
// closed.
func (l *Limiter) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.abandoned--
	close(l.ended)
	l.ended = make(chan struct{})
}

// busy is the Output of a Run the Limiter refused.
func busy() Output {
	return Output{
		Failure: FailureBusy,
		Error:   "the script was not run because earlier scripts overran their time budget inside one long built-in call (such as a search or a sort over a huge string or array) and are still being stopped; retry later, or call the tools directly instead of through " + RunScriptName,
	}
}

// hooks let tests observe and steer a session where it otherwise depends on
// timing. Run passes none.
type hooks struct {
	// log sees each console line in the VM's goroutine, once it is kept
	// and outside any lock; it may block, as a long built-in would.
	log func(line string)
	// evalTimeout sees the timeout each entry into JS is given.
	evalTimeout func(time.Duration)
	// sandbox sees the sandbox the session got, before the script runs.
	sandbox func(*sandbox)
}
