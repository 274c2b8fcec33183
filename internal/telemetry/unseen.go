package telemetry

import (
	"context"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// unseenTracer starts the spans of a run that nothing will export: no
// operator endpoint and no collector of the run's own. The SDK would
// record each one (its attributes, events and status) for no reader, and
// a run holds its span and its model call's span for as long as it waits
// on the model, so every concurrent run paid for them.
//
// Its spans carry the identity the SDK's would: the parent's trace (a new
// one at the root), a new span id, and the parent's sampled flag and
// trace state (sampled at the root), as ParentBased(AlwaysSample) decides.
// So trace ids in results and logs, and the traceparent sent to
// callbacks, MCP servers and agents, are as before; only nothing is
// recorded.
type unseenTracer struct{ embedded.Tracer }

func (unseenTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	cfg := trace.SpanContextConfig{
		TraceID:    parent.TraceID(),
		SpanID:     newSpanID(),
		TraceFlags: parent.TraceFlags() & trace.FlagsSampled,
		TraceState: parent.TraceState(),
	}
	if !parent.IsValid() {
		cfg.TraceID, cfg.TraceFlags, cfg.TraceState = newTraceID(), trace.FlagsSampled, trace.TraceState{}
	}
	// A span context alone in a context is a span that records nothing.
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg))
	return ctx, trace.SpanFromContext(ctx)
}

// newTraceID and newSpanID draw ids as the SDK's default generator does:
// random, never all zero.
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		putRandom(id[:])
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		putRandom(id[:])
	}
	return id
}

func putRandom(b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := rand.Uint64()
		for j := i; j < len(b) && j < i+8; j++ {
			b[j] = byte(v >> (8 * (j - i)))
		}
	}
}
