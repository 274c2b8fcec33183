package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The budgets below are short so the tests are quick, but nothing asserts
// how long anything took: only how the script ended.

func TestRunTimeout(t *testing.T) {
	tests := []struct {
		name   string
		script string
		events []string
	}{
		{name: "synchronous loop", script: `while (true) {}`},
		{name: "loop that catches", script: `for (;;) { try { while (true) {} } catch (e) {} }`},
		{name: "async loop", script: `while (true) { await Promise.resolve() }`},
		{name: "async loop of null", script: `for (;;) await null`},
		{name: "promise chain", script: `const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {})`},
		{name: "loop after a call", script: `await tools.s.echo({}); while (true) {}`},
		{name: "catastrophic regexp", script: `return /(a+)+$/.test("a".repeat(100) + "b")`},
		{name: "tool loop", script: `while (true) await tools.s.echo({})`},
		{name: "pending call", script: `await tools.s.slow({})`, events: []string{"slow ended: context deadline exceeded"}},
		// The call waits for the synchronous part to yield, which it never does.
		{name: "pending call and a loop", script: `tools.s.slow({}); while (true) {}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			out := run(t, r, tt.script, &Options{Timeout: 200 * time.Millisecond})
			want := got{
				Result:  "null",
				Logs:    []string{},
				Failure: FailureTimeout,
				Error:   "the script did not finish within 200ms and was stopped (its tool calls were cancelled); do less per script or pass a larger timeoutMs (at most 120000)",
			}
			if diff := cmp.Diff(want, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Run waited for the calls: what they saw is already recorded.
			if _, events := r.snapshot(); !cmp.Equal(tt.events, events) {
				t.Errorf("events %q, want %q", events, tt.events)
			}
		})
	}
}

// TestRunTimeoutEnforced checks the budget the script is given, not the
// sentence that names it: every entry into JS gets at most the configured
// timeout (clamped), and the calls' context ends with it. Each bound below is
// a comparison of deadlines, which load cannot break: the budget starts
// after before and before each observation.
func TestRunTimeoutEnforced(t *testing.T) {
	tests := []struct {
		name          string
		timeout, want time.Duration
	}{
		{name: "configured", timeout: 40 * time.Second, want: 40 * time.Second},
		{name: "clamped", timeout: 10 * time.Minute, want: MaxTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type observed struct {
				at   time.Time
				left time.Duration // what the engine was given, or the call's deadline from at
			}
			var mu sync.Mutex
			var entries, calls []observed
			h := hooks{evalTimeout: func(d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				entries = append(entries, observed{time.Now(), d})
			}}
			caller := CallerFunc(func(ctx context.Context, _, _ string, args json.RawMessage) (CallResult, error) {
				at := time.Now()
				deadline, ok := ctx.Deadline()
				if !ok {
					return CallResult{}, fmt.Errorf("the call's context has no deadline")
				}
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, observed{at, deadline.Sub(at)})
				return CallResult{Content: string(args)}, nil
			})
			before := time.Now()
			out := runWith(context.Background(), `return (await tools.s.echo({n: 1})).n`, testTools(), caller, &Options{Timeout: tt.timeout}, h)
			if diff := cmp.Diff(got{Result: "1", Logs: []string{}}, view(out)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(entries) < 2 || len(calls) != 1 {
				t.Fatalf("%d entries into JS and %d calls observed, want at least 2 and 1", len(entries), len(calls))
			}
			for i, o := range append(entries, calls...) {
				// The deadline is the budget's start plus the timeout: at most
				// the timeout away when observed, and no earlier than before
				// plus the timeout.
				if o.left > tt.want || o.at.Add(o.left).Before(before.Add(tt.want)) {
					t.Errorf("observation %d: %v left at %v after the start, want the budget to end %v after it",
						i, o.left, o.at.Sub(before), tt.want)
				}
			}
		})
	}
}

// TestRunMemoryEnforced checks the memory the script can actually use, not
// the sentence that names the limit: the script allocates buffers of just
// under 64 KiB until the engine refuses, frees them, and returns how many
// 64 KiB it held. It stops at twice the limit, so that a missing cap fails
// the test rather than exhausting the machine.
func TestRunMemoryEnforced(t *testing.T) {
	const script = `const chunk = 1 << 16, held = [];
let bytes = 0, error = "";
try {
  while (bytes < %d) { held.push(new ArrayBuffer(chunk - 64)); bytes += chunk }
} catch (e) {
  held.length = 0;
  error = String(e);
}
return {bytes, error}`
	allocated := func(limit int64) int64 {
		t.Helper()
		out := run(t, &recorder{}, fmt.Sprintf(script, 2*limit), &Options{Timeout: time.Minute, MemoryLimit: limit})
		var r struct {
			Bytes int64
			Error string
		}
		if err := json.Unmarshal(out.Result, &r); err != nil || out.Error != "" {
			t.Fatalf("limit %d MiB: got %+v", limit>>20, view(out))
		}
		if r.Error != "InternalError: out of memory" {
			t.Errorf("limit %d MiB: allocated %d MiB and stopped with %q, want out of memory", limit>>20, r.Bytes>>20, r.Error)
		}
		return r.Bytes
	}
	// The engine's own objects take some of the limit, not a quarter of it.
	for _, limit := range []int64{16 << 20, 32 << 20} {
		if n := allocated(limit); n > limit || n < limit/4*3 {
			t.Errorf("allocated %.2f MiB under a limit of %d MiB, want between %d and %d", float64(n)/(1<<20), limit>>20, limit/4*3>>20, limit>>20)
		}
	}
}

// TestRunFinishedInTime: a script that finishes within its budget is never
// reported as stopped, however short the grace. (The session's goroutine
// once ended the budget before sending its Output, so Run could see the
// budget end first and, with a short grace, give up on the Output.)
func TestRunFinishedInTime(t *testing.T) {
	for i := range 20 {
		out := Run(context.Background(), `return 1`, nil, &recorder{}, &Options{Timeout: time.Minute, AbandonGrace: time.Nanosecond})
		if diff := cmp.Diff(got{Result: "1", Logs: []string{}}, view(out)); diff != "" {
			t.Fatalf("run %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestRunCancelled cancels the caller's context while the script runs.
func TestRunCancelled(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{name: "during a loop", script: `await tools.s.echo({}); while (true) {}`},
		{name: "during an async loop", script: `await tools.s.echo({}); while (true) await null`},
		{name: "during a call", script: `await tools.s.echo({}); await tools.s.slow({})`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The first call cancels the run: the script is then past it.
			r := &recorder{onCall: cancel}
			out := Run(ctx, tt.script, testTools(), r, &Options{Timeout: time.Minute})
			want := got{Result: "null", Logs: []string{}, Failure: FailureCancelled, Error: "the script was stopped because the run was cancelled"}
			if diff := cmp.Diff(want, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunMemory(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{name: "array bomb", script: `let a = []; while (true) a.push(new Array(1e6).fill(1))`},
		{name: "string bomb", script: `let a = []; for (let i = 0; ; i++) a.push("x".repeat(1e6) + i)`},
		{name: "async bomb", script: `let a = []; while (true) { await null; a.push(new Array(1e6).fill(1)) }`},
		{name: "bomb after a call", script: `await tools.s.echo({}); let a = []; while (true) a.push(new Array(1e6).fill(1))`},
		{name: "typed array", script: `return new Uint8Array(1e9).length`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, &recorder{}, tt.script, &Options{Timeout: time.Minute, MemoryLimit: 16 << 20})
			want := got{Result: "null", Logs: []string{}, Failure: FailureMemory, Error: "the script ran out of memory (the sandbox has 16 MiB) and was stopped"}
			if diff := cmp.Diff(want, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunPendingCap: calls waiting to start hold their arguments in Go's
// heap, so a script cannot queue them without end.
func TestRunPendingCap(t *testing.T) {
	r := &recorder{}
	out := run(t, r, `const big = "x".repeat(1 << 20);
let first;
for (let i = 0; i < 20; i++) tools.s.echo({big}).catch(e => { first = first || [i, e.message] });
await null;
return first`, &Options{Timeout: time.Minute, MemoryLimit: 8 << 20})
	want := got{
		Result: `[7,"too many tool calls waiting (at most 10000, with at most 8 MiB of arguments); await some before making more"]`,
		Logs:   []string{"[warn] 7 tool calls were not made because the script had already returned; await the calls whose results or effects you need"},
	}
	if diff := cmp.Diff(want, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if calls, _ := r.snapshot(); len(calls) != 0 {
		t.Errorf("%d calls made, want none", len(calls))
	}
}

// TestRunLongBuiltin: the engine cannot interrupt one long built-in call (a
// naive string search here), so Run returns without the VM once the grace
// after the budget is over, and the Limiter counts the VM until it ends:
// with a bound of 1, the next Run is refused at once. No call starts
// afterwards, even once the built-in returns.
//
// Nothing here races the machine's speed. The budget ends (the run is
// cancelled) only once the VM's goroutine is seen inside the search, whose
// size is the test's (longHaystack: about a second of work, against a
// grace of a nanosecond). Ending it from a hook called just before the
// search would not do: the engine looks for an interrupt whenever a Go function it
// called returns, so the VM would sometimes stop before the search began.
func TestRunLongBuiltin(t *testing.T) {
	lim := NewLimiter(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watch ends when the search did, or with Run if the VM never
	// reached it.
	stop := make(chan struct{})
	var once sync.Once
	stopWatch := func() { once.Do(func() { close(stop) }) }
	h := hooks{log: func(line string) {
		if line == "searched" {
			stopWatch()
		}
	}}
	watched := whenInside("modernc.org/libquickjs._js_string_indexOf(", stop, cancel)
	r := &recorder{}
	script := fmt.Sprintf(`await tools.s.echo({n: 1});
const haystack = "a".repeat(%d), needle = "a".repeat(%d) + "b";
console.log("searching");
haystack.indexOf(needle);
console.log("searched");
await tools.s.echo({n: 2})`, longHaystack, longNeedle)
	opts := &Options{Timeout: time.Minute, AbandonGrace: time.Nanosecond, Limiter: lim}
	out := runWith(ctx, script, testTools(), r, opts, h)
	stopWatch()
	if !<-watched {
		t.Fatalf("the search ended before the test saw it start; got %+v", view(out))
	}
	want := got{Result: "null", Logs: []string{"searching"}, Failure: FailureCancelled, Error: "the script was stopped because the run was cancelled"}
	if diff := cmp.Diff(want, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := lim.Abandoned(); n != 1 {
		t.Errorf("%d sandboxes abandoned, want 1", n)
	}

	// The bound is reached: the same script is refused, without running.
	refused := Run(context.Background(), script, testTools(), r, &Options{Timeout: time.Minute, Limiter: lim})
	if diff := cmp.Diff(got{Result: "null", Logs: []string{}, Failure: FailureBusy, Error: wantBusy}, view(refused)); diff != "" {
		t.Errorf("while the VM runs on (-want +got):\n%s", diff)
	}

	if err := lim.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls, _ := r.snapshot(); !cmp.Equal(calls, []string{`s.echo {"n":1}`}) {
		t.Errorf("calls %q, want only the first", calls)
	}
	again := Run(context.Background(), `return (await tools.s.echo({n: 3})).n`, testTools(), r, &Options{Timeout: time.Minute, Limiter: lim})
	if diff := cmp.Diff(got{Result: "3", Logs: []string{}}, view(again)); diff != "" {
		t.Errorf("once the VM ended (-want +got):\n%s", diff)
	}
}

// whenInside calls f once a goroutine's stack holds frame, which it looks
// for every millisecond until it sees it or stop is closed. The channel
// returned says, once the watch is over, whether it saw it.
func whenInside(frame string, stop <-chan struct{}, f func()) <-chan bool {
	seen := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		buf := make([]byte, 1<<20)
		for {
			if n := runtime.Stack(buf, true); strings.Contains(string(buf[:n]), frame) {
				f()
				seen <- true
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				seen <- false
				return
			}
		}
	}()
	return seen
}

// TestRunNothingAfterReturn checks that what a script leaves behind never
// calls a tool after it returned, that calls in flight are cancelled before
// Run returns, and that the model is told.
func TestRunNothingAfterReturn(t *testing.T) {
	const (
		notMade   = "[warn] 1 tool call was not made because the script had already returned; await the calls whose results or effects you need"
		cancelled = "[warn] 1 tool call was still running when the script returned and cancelled; await the calls whose results or effects you need"
	)
	tests := []struct {
		name   string
		script string
		calls  []string
		events []string
		logs   []string
	}{
		{
			name:   "call not awaited",
			script: `tools.s.slow({n: 1}); return "returned"`,
			logs:   []string{notMade},
		},
		{
			name:   "call not awaited, after an await",
			script: `await tools.s.echo({n: 1}); tools.s.slow({n: 2}); return "returned"`,
			calls:  []string{`s.echo {"n":1}`},
			logs:   []string{notMade},
		},
		{
			name:   "call in flight",
			script: `tools.s.slow({n: 1}); await tools.s.echo({n: 2}); return "returned"`,
			calls:  []string{`s.slow {"n":1}`, `s.echo {"n":2}`},
			events: []string{"slow ended: context canceled"},
			logs:   []string{cancelled},
		},
		{
			name:   "chain after a call",
			script: `await tools.s.echo({n: 1}).then(() => { tools.s.echo({n: 2}) }); return "returned"`,
			calls:  []string{`s.echo {"n":1}`},
			logs:   []string{notMade},
		},
		{
			// The drain stops right after the job that reports the return.
			name:   "chain of awaits",
			script: `(async () => { for (let i = 0; i < 5; i++) await null; await tools.s.echo({late: true}) })(); return "returned"`,
			logs:   []string{},
		},
		{
			name:   "job queued before the return",
			script: `(async () => { await null; tools.s.echo({late: true}) })(); return "returned"`,
			logs:   []string{notMade},
		},
		{
			name:   "endless chain",
			script: `(async () => { for (;;) { await null; tools.s.echo({late: true}) } })(); return "returned"`,
			logs:   []string{notMade},
		},
		{
			name:   "endless loop of calls",
			script: `(async () => { for (;;) await tools.s.echo({}) })(); return "returned"`,
			logs:   []string{notMade},
		},
		{
			name:   "call from a finally",
			script: `try { return "returned" } finally { Promise.resolve().then(() => tools.s.echo({late: true})) }`,
			logs:   []string{notMade},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			out := run(t, r, tt.script, nil)
			if diff := cmp.Diff(got{Result: `"returned"`, Logs: tt.logs}, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			calls, events := r.snapshot()
			if diff := cmp.Diff(tt.calls, calls, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.events, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunCallAfterFailure: a script that fails with calls in flight gets
// them cancelled too.
func TestRunCallAfterFailure(t *testing.T) {
	r := &recorder{}
	out := run(t, r, `tools.s.slow({}); await tools.s.echo({}); throw new Error("gone")`, nil)
	if out.Failure != FailureScript || !strings.HasPrefix(out.Error, "Error: gone") {
		t.Errorf("got %+v, want the script's error", out)
	}
	if _, events := r.snapshot(); !cmp.Equal(events, []string{"slow ended: context canceled"}) {
		t.Errorf("events %q, want the slow call cancelled", events)
	}
}

// TestRunConcurrentRuns runs sandboxes side by side: each has its own VM.
func TestRunConcurrentRuns(t *testing.T) {
	const n = 8
	outs := make(chan Output, n)
	for i := range n {
		go func() {
			script := `let s = 0; for (let i = 0; i < 20; i++) s += (await tools.s.echo({n: i})).n; return [s, ` + string(rune('0'+i)) + `]`
			outs <- Run(context.Background(), script, testTools(), &recorder{}, nil)
		}()
	}
	seen := map[string]bool{}
	for range n {
		out := <-outs
		if out.Error != "" {
			t.Fatalf("got %+v", out)
		}
		var r []int
		if err := json.Unmarshal(out.Result, &r); err != nil || len(r) != 2 || r[0] != 190 {
			t.Fatalf("result %s", out.Result)
		}
		seen[string(out.Result)] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct results, want %d", len(seen), n)
	}
}
