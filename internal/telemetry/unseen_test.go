package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestUnseenSpansCarryTheSDKsIdentity: a span nothing exports is not
// recorded, yet what leaves the process (trace id, sampled flag, trace
// state) is what the SDK's span would carry, under every kind of parent,
// with a span id of its own.
func TestUnseenSpansCarryTheSDKsIdentity(t *testing.T) {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	defer func() { _ = sdk.Shutdown(context.Background()) }()
	for name, carrier := range map[string]propagation.MapCarrier{
		"no parent":           {},
		"sampled parent":      {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"unsampled parent":    {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		"parent with a state": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=x"},
	} {
		t.Run(name, func(t *testing.T) {
			parent := propagator.Extract(context.Background(), carrier)
			_, want := sdk.Tracer("t").Start(parent, "s")
			_, got := unseenTracer{}.Start(parent, "s")
			w, g := want.SpanContext(), got.SpanContext()
			if got.IsRecording() {
				t.Error("an unseen span records")
			}
			if !g.IsValid() || g.IsRemote() {
				t.Errorf("span context %+v, want a valid local one", g)
			}
			if g.TraceFlags() != w.TraceFlags() || g.TraceState().String() != w.TraceState().String() {
				t.Errorf("flags %s state %q, the SDK's %s %q", g.TraceFlags(), g.TraceState(), w.TraceFlags(), w.TraceState())
			}
			p := trace.SpanContextFromContext(parent)
			if p.IsValid() && (g.TraceID() != p.TraceID() || g.SpanID() == p.SpanID()) {
				t.Errorf("trace %s span %s under %s %s: want the parent's trace and a new span", g.TraceID(), g.SpanID(), p.TraceID(), p.SpanID())
			}
		})
	}
}

// TestARunWithoutCollectorsRecordsNothing: without an operator endpoint
// or a collector of the run's own, the run's and its calls' spans are
// not recorded, and a call's span is a child in the run's trace.
func TestARunWithoutCollectorsRecordsNothing(t *testing.T) {
	tel, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, r := tel.StartRun(context.Background(), RunInfo{Harness: "native"})
	mctx, call := r.Model(ctx, "m")
	if r.span.IsRecording() || call.span.IsRecording() {
		t.Error("spans nobody exports are recorded")
	}
	run, model := trace.SpanContextFromContext(ctx), trace.SpanContextFromContext(mctx)
	if model.TraceID() != run.TraceID() || model.SpanID() == run.SpanID() || !model.IsSampled() {
		t.Errorf("model call span %s/%s under run %s/%s", model.TraceID(), model.SpanID(), run.TraceID(), run.SpanID())
	}
	call.End(1, 2, "stop", nil, nil)
	r.End(Outcome{Status: "completed"})
	if err := tel.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
