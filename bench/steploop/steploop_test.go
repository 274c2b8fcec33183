package main

import (
	"context"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// benchFakes starts the fake model and the callback server in this process
// (go test -bench measures runnel's loop alone; the cross-runtime comparison
// with the AI SDK is `go run ./bench/steploop`).
func benchFakes(b *testing.B, steps int) fakeURLs {
	b.Helper()
	llm, err := benchkit.ServeModel(benchScript(steps)) // records nothing, unlike llmtest.NewServer
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(llm.Close)
	cb := httptest.NewServer(benchkit.CallbackHandler(toolName, toolOutput))
	b.Cleanup(cb.Close)
	return fakeURLs{Model: llm.URL + "/v1", Callback: cb.URL + "/tools/call"}
}

// BenchmarkNativeLoop20Steps is one turn of 20 callback-tool steps (21
// model calls) through run.Manager.Run. µs/step is per model call.
func BenchmarkNativeLoop20Steps(b *testing.B) {
	const steps = 20
	n := newNative(benchFakes(b, steps), steps, nil)
	b.Cleanup(n.close)
	benchTurns(b, steps, n.one)
}

// BenchmarkNativeLoop20StepsAfter400KiB is the same turn replaying 400 KiB
// of earlier exchanges: what a long history adds to a step.
func BenchmarkNativeLoop20StepsAfter400KiB(b *testing.B) {
	const steps = 20
	hist := newHistory(400)
	llm, err := benchkit.ServeModel(benchScript(steps + hist.toolResults()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(llm.Close)
	cb := httptest.NewServer(benchkit.CallbackHandler(toolName, toolOutput))
	b.Cleanup(cb.Close)
	n := newNative(fakeURLs{Model: llm.URL + "/v1", Callback: cb.URL + "/tools/call"}, steps, hist)
	b.Cleanup(n.close)
	benchTurns(b, steps, n.one)
}

// BenchmarkFloor20Steps is the same traffic from a bare loop with no agent:
// subtract it from BenchmarkNativeLoop20Steps for runnel's own overhead.
func BenchmarkFloor20Steps(b *testing.B) {
	const steps = 20
	f := newFloor(benchFakes(b, steps), steps, nil)
	b.Cleanup(f.close)
	benchTurns(b, steps, f.one)
}

func benchTurns(b *testing.B, steps int, one func(context.Context) error) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := one(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*(steps+1)), "µs/step")
}

// TestHistoryTurns runs one turn of each Go contestant from a replayed
// history: the fake model must count the history's tool results with the
// turn's (or the turn would end early or never), and both forms of the
// history must be accepted. It times nothing.
func TestHistoryTurns(t *testing.T) {
	const steps = 3
	hist := newHistory(8)
	if hist.bytes() < 8<<10 || len(hist.chat) != 4*hist.exchanges || len(hist.runnel) != len(hist.chat) || len(hist.modelMessages) != len(hist.chat) {
		t.Fatalf("history of %d bytes, %d exchanges: %d chat, %d runnel, %d model messages",
			hist.bytes(), hist.exchanges, len(hist.chat), len(hist.runnel), len(hist.modelMessages))
	}
	llm, err := benchkit.ServeModel(benchScript(hist.toolResults() + steps))
	if err != nil {
		t.Fatal(err)
	}
	defer llm.Close()
	cb := httptest.NewServer(benchkit.CallbackHandler(toolName, toolOutput))
	defer cb.Close()
	u := fakeURLs{Model: llm.URL + "/v1", Callback: cb.URL + "/tools/call"}

	f := newFloor(u, steps, hist)
	defer f.close()
	n := newNative(u, steps, hist)
	defer n.close()
	for _, c := range []struct {
		name string
		one  func(context.Context) error
	}{{f.name(), f.one}, {n.name(), n.one}, {f.name() + ", again", f.one}} {
		if err := c.one(t.Context()); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
