package codemode

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// awaitReady returns once w has all its sandboxes ready and has closed
// those retired, starting the building if no Run has yet: the state of a
// Warm between a model's scripts, which come seconds apart. It takes the
// sandboxes ready and puts them back: no room is made, so nothing is built
// meanwhile and the sends cannot block.
func (w *Warm) awaitReady(tb testing.TB) {
	tb.Helper()
	if !w.start() {
		tb.Fatal("the Warm is closed")
	}
	held := make([]*sandbox, 0, w.size)
	for range w.size {
		held = append(held, <-w.ready)
	}
	for _, sb := range held {
		w.ready <- sb
	}
	w.closing.Wait()
}

// sandboxRecorder records the sandboxes a Warm builds and those Runs use.
type sandboxRecorder struct {
	mu    sync.Mutex
	built []*sandbox
	used  []*sandbox
}

func (r *sandboxRecorder) watch(w *Warm) *Warm {
	w.built = func(sb *sandbox) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.built = append(r.built, sb)
	}
	return w
}

func (r *sandboxRecorder) hooks() hooks {
	return hooks{sandbox: func(sb *sandbox) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.used = append(r.used, sb)
	}}
}

// TestWarmScriptsApart runs scripts one after the other in sandboxes a Warm
// had ready, each trying to leave something for the next, and checks that
// nothing reaches it: every script gets a sandbox built for no one else.
func TestWarmScriptsApart(t *testing.T) {
	var rec sandboxRecorder
	w := rec.watch(NewWarm(nil))
	defer w.Close()
	const leave = `globalThis.leak = 1; var declared = 2; Array.prototype.extra = 3; JSON.parse = null;
Object.prototype.polluted = 5; console.log = null; try { tools.s.extra = 4 } catch (e) {}
return "set"`
	const look = `return [typeof leak, typeof declared, [].extra, typeof JSON.parse, ({}).polluted, typeof console.log, typeof tools.s.extra]`
	for i := range 10 {
		w.awaitReady(t)
		script, want := leave, `"set"`
		if i%2 == 1 {
			script, want = look, `["undefined","undefined",null,"function",null,"function","undefined"]`
		}
		out := runWith(context.Background(), script, testTools(), &recorder{}, &Options{Timeout: time.Minute, Warm: w}, rec.hooks())
		if diff := gocmp.Diff(got{Result: want, Logs: []string{}}, view(out)); diff != "" {
			t.Fatalf("script %d (-want +got):\n%s", i, diff)
		}
	}
	w.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, sb := range rec.used {
		if sb != rec.built[i] {
			t.Errorf("script %d did not get the sandbox the Warm had ready", i)
		}
	}
	checkOnce(t, rec.built, rec.used)
}

// TestWarmConcurrent runs many scripts at once against a small Warm: some
// get a sandbox it had ready, the others one built for them; none gets one
// another script had, and when the Warm is closed every sandbox is.
func TestWarmConcurrent(t *testing.T) {
	var rec sandboxRecorder
	w := rec.watch(NewWarm(&WarmOptions{Size: 2}))
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			script := fmt.Sprintf(`if (typeof mark !== "undefined") throw new Error("shared"); globalThis.mark = %d; return (await tools.s.echo({n: %d})).n`, i, i)
			out := runWith(context.Background(), script, testTools(), &recorder{}, &Options{Timeout: time.Minute, Warm: w}, rec.hooks())
			if string(out.Result) != fmt.Sprint(i) {
				errs <- fmt.Errorf("script %d: %+v", i, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	w.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.used) != n {
		t.Fatalf("%d sandboxes used, want %d", len(rec.used), n)
	}
	checkOnce(t, rec.built, rec.used)
}

// checkOnce checks that no sandbox was used twice and that every sandbox
// built or used is closed. The recorder holds them all, so the memory of
// one cannot be reused for another.
func checkOnce(t *testing.T, built, used []*sandbox) {
	t.Helper()
	seen := map[*sandbox]bool{}
	for i, sb := range used {
		if seen[sb] {
			t.Errorf("run %d got a sandbox an earlier run had", i)
		}
		seen[sb] = true
	}
	for i, sb := range append(built, used...) {
		if !sb.closed {
			t.Errorf("sandbox %d is still open", i)
		}
	}
}

// TestWarmOptions checks that a script gets a sandbox the Warm had ready
// only when its memory limit is the Warm's, and that the limit the script
// meets is its own.
func TestWarmOptions(t *testing.T) {
	tests := []struct {
		name        string
		warmLimit   int64
		scriptLimit int64
		fromWarm    bool
	}{
		{name: "defaults", fromWarm: true},
		{name: "same limit", warmLimit: 16 << 20, scriptLimit: 16 << 20, fromWarm: true},
		{name: "smaller limit", scriptLimit: 4 << 20},
		{name: "larger limit", warmLimit: 4 << 20, scriptLimit: 32 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec sandboxRecorder
			w := rec.watch(NewWarm(&WarmOptions{MemoryLimit: tt.warmLimit}))
			defer w.Close()
			w.awaitReady(t)
			// Holds 8 MiB: within 16 MiB and more, over 4.
			script := `const held = []; for (let i = 0; i < 128; i++) held.push(new ArrayBuffer(65536 - 64)); return held.length`
			out := runWith(context.Background(), script, testTools(), &recorder{}, &Options{Timeout: time.Minute, MemoryLimit: tt.scriptLimit, Warm: w}, rec.hooks())
			want := got{Result: "128", Logs: []string{}}
			limit := cmp.Or(tt.scriptLimit, int64(DefaultMemoryLimit))
			if limit < 8<<20 {
				want = got{Result: "null", Logs: []string{}, Failure: FailureMemory,
					Error: fmt.Sprintf("the script ran out of memory (the sandbox has %d MiB) and was stopped", limit>>20)}
			}
			if diff := gocmp.Diff(want, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if fromWarm := rec.used[0] == rec.built[0]; fromWarm != tt.fromWarm {
				t.Errorf("the script got the Warm's sandbox: %v, want %v", fromWarm, tt.fromWarm)
			}
			if rec.used[0].memoryLimit != limit {
				t.Errorf("the sandbox's memory limit is %d, want %d", rec.used[0].memoryLimit, limit)
			}
		})
	}
}

// TestWarmClose checks that Close closes the sandboxes kept ready and those
// waiting to be closed, that it can be called twice, and that Runs after it
// build their own.
func TestWarmClose(t *testing.T) {
	t.Run("unused", func(t *testing.T) {
		w := NewWarm(nil)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if w.started {
			t.Error("a Warm no Run used started building")
		}
	})
	t.Run("used", func(t *testing.T) {
		var rec sandboxRecorder
		w := rec.watch(NewWarm(&WarmOptions{Size: 3}))
		w.awaitReady(t)
		run := func() Output {
			return runWith(context.Background(), `return 1`, nil, nil, &Options{Timeout: time.Minute, Warm: w}, rec.hooks())
		}
		if out := run(); out.Error != "" {
			t.Fatalf("got %+v", out)
		}
		w.Close()
		w.Close()
		if out := run(); out.Error != "" {
			t.Fatalf("after Close: got %+v", out)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.built) < 3 || len(rec.used) != 2 || rec.used[0] != rec.built[0] {
			t.Fatalf("%d built and %d used, want at least 3 built and the first used", len(rec.built), len(rec.used))
		}
		for _, sb := range rec.built {
			if sb == rec.used[1] {
				t.Error("a Run after Close got a sandbox from the Warm")
			}
		}
		checkOnce(t, rec.built, rec.used)
	})
}

// TestWarmAbandoned checks that a sandbox whose Run gave up on it (see
// TestRunLongBuiltin) is closed once it stops, whether the Warm is still
// open then or was closed meanwhile.
func TestWarmAbandoned(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm closed first: %v", closeFirst), func(t *testing.T) {
			lim := NewLimiter(1)
			var rec sandboxRecorder
			w := rec.watch(NewWarm(nil))
			defer w.Close()
			w.awaitReady(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			unblock := make(chan struct{})
			h := rec.hooks()
			h.log = func(string) {
				cancel()
				<-unblock
			}
			out := runWith(ctx, `console.log("stuck"); return 1`, nil, &recorder{}, &Options{Timeout: time.Minute, AbandonGrace: time.Nanosecond, Limiter: lim, Warm: w}, h)
			if out.Failure != FailureCancelled || lim.Abandoned() != 1 {
				t.Fatalf("got %+v with %d abandoned, want the script cancelled and abandoned", out, lim.Abandoned())
			}
			if closeFirst {
				w.Close()
			}
			close(unblock)
			if err := lim.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			w.Close()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.used[0] != rec.built[0] {
				t.Error("the script did not get the sandbox the Warm had ready")
			}
			checkOnce(t, rec.built, rec.used)
		})
	}
}
