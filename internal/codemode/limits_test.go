package codemode

import (
	"context"
	"encoding/json"
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
// after the budget is over. No call starts afterwards, even once the
// built-in returns. The script sizes the search itself, so that it outlasts
// the budget and the grace on any machine and under the race detector
// without taking minutes: it grows a search until one takes 5ms, then runs
// one about eighty times longer.
func TestRunLongBuiltin(t *testing.T) {
	var stray sync.WaitGroup
	r := &recorder{}
	script := `await tools.s.echo({n: 1});
console.log("searching");
const needle = "a".repeat(100) + "b";
let size = 1e3, took = 0;
while (took < 5) {
  size *= 2;
  const haystack = "a".repeat(size), start = Date.now();
  haystack.indexOf(needle);
  took = Date.now() - start;
}
"a".repeat(size * 80).indexOf(needle);
await tools.s.echo({n: 2})`
	opts := &Options{Timeout: 100 * time.Millisecond, AbandonGrace: 50 * time.Millisecond}
	out := runWith(context.Background(), script, testTools(), r, opts, &stray)
	want := got{
		Result:  "null",
		Logs:    []string{"searching"},
		Failure: FailureTimeout,
		Error:   "the script did not finish within 100ms and was stopped (its tool calls were cancelled); do less per script or pass a larger timeoutMs (at most 120000)",
	}
	if diff := cmp.Diff(want, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	stray.Wait()
	if calls, _ := r.snapshot(); !cmp.Equal(calls, []string{`s.echo {"n":1}`}) {
		t.Errorf("calls %q, want only the first", calls)
	}
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
