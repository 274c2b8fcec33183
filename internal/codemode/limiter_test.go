package codemode

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// wantBusy is the sentence of a Run the Limiter refuses.
const wantBusy = "the script was not run because earlier scripts overran their time budget inside one long built-in call (such as a search or a sort over a huge string or array) and are still being stopped; retry later, or call the tools directly instead of through run_mcp_script"

// stuck runs a script whose VM is stuck in a call the budget cannot
// interrupt until the test calls the function returned: a log hook that
// blocks, which is, to Run, what a long built-in is. The hook ends the
// budget (by cancelling the run) once the VM is inside, so Run is abandoned
// without any race with the clock.
func stuck(t *testing.T, lim *Limiter) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unblock := make(chan struct{})
	h := hooks{log: func(string) {
		cancel()
		<-unblock
	}}
	out := runWith(ctx, `console.log("stuck"); return 1`, nil, &recorder{}, &Options{Timeout: time.Minute, AbandonGrace: time.Nanosecond, Limiter: lim}, h)
	if out.Failure != FailureCancelled {
		t.Fatalf("stuck script: got %+v, want it cancelled", out)
	}
	return func() { close(unblock) }
}

func TestLimiter(t *testing.T) {
	ctx := context.Background()
	lim := NewLimiter(2)
	check := func(when string, abandoned int, wantRun got) {
		t.Helper()
		if n := lim.Abandoned(); n != abandoned {
			t.Errorf("%s: %d sandboxes abandoned, want %d", when, n, abandoned)
		}
		out := Run(ctx, `return 1`, nil, &recorder{}, &Options{Timeout: time.Minute, Limiter: lim})
		if diff := cmp.Diff(wantRun, view(out)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", when, diff)
		}
	}
	ran := got{Result: "1", Logs: []string{}}
	refused := got{Result: "null", Logs: []string{}, Failure: FailureBusy, Error: wantBusy}

	check("at first", 0, ran)
	release1 := stuck(t, lim)
	check("one abandoned", 1, ran)
	release2 := stuck(t, lim)
	check("two abandoned", 2, refused)

	release1()
	if err := lim.waitBelow(ctx, 2); err != nil {
		t.Fatal(err)
	}
	check("one of two ended", 1, ran)

	release2()
	if err := lim.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	check("both ended", 0, ran)
}

// TestLimiterWaitContext: Wait gives up with its context.
func TestLimiterWaitContext(t *testing.T) {
	lim := NewLimiter(1)
	release := stuck(t, lim)
	defer func() {
		release()
		if err := lim.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lim.Wait(ctx); err != context.Canceled {
		t.Errorf("Wait = %v, want %v", err, context.Canceled)
	}
}

func TestLimiterDefaultBound(t *testing.T) {
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 16: 8} {
		if got := defaultBound(procs); got != want {
			t.Errorf("defaultBound(%d) = %d, want %d", procs, got, want)
		}
	}
	if got, want := NewLimiter(0).bound, defaultBound(runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("NewLimiter(0) has bound %d, want %d", got, want)
	}
	if got := NewLimiter(3).bound; got != 3 {
		t.Errorf("NewLimiter(3) has bound %d, want 3", got)
	}
}
