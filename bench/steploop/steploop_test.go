package main

import (
	"context"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/llmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// benchFakes starts the fake model and the callback server in this process
// (go test -bench measures runnel's loop alone; the cross-runtime comparison
// with the AI SDK is `go run ./bench/steploop`).
func benchFakes(b *testing.B, steps int) fakeURLs {
	b.Helper()
	llm := llmtest.NewServer(benchScript(steps))
	b.Cleanup(llm.Close)
	cb := httptest.NewServer(benchkit.CallbackHandler(toolName, toolOutput))
	b.Cleanup(cb.Close)
	return fakeURLs{Model: llm.URL + "/v1", Callback: cb.URL + "/tools/call"}
}

// BenchmarkNativeLoop20Steps is one turn of 20 callback-tool steps (21
// model calls) through run.Manager.Run. µs/step is per model call.
func BenchmarkNativeLoop20Steps(b *testing.B) {
	const steps = 20
	n := newNative(benchFakes(b, steps), steps)
	b.Cleanup(n.close)
	benchTurns(b, steps, n.one)
}

// BenchmarkFloor20Steps is the same traffic from a bare loop with no agent:
// subtract it from BenchmarkNativeLoop20Steps for runnel's own overhead.
func BenchmarkFloor20Steps(b *testing.B) {
	const steps = 20
	f := newFloor(benchFakes(b, steps), steps)
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
