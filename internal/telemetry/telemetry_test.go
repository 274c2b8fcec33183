package telemetry

import (
	"context"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://collector:4318":                    "http://collector:4318/v1/traces",
		"http://collector:4318/":                   "http://collector:4318/v1/traces",
		"https://cloud.example/api/otlp/v1/traces": "https://cloud.example/api/otlp/v1/traces",
		"http://collector:4318/custom":             "http://collector:4318/custom",
	} {
		if got := tracesURL(in); got != want {
			t.Errorf("tracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestANilRunTracesNothing: code that runs without telemetry (a nil
// *Run) can call every method.
func TestANilRunTracesNothing(t *testing.T) {
	var r *Run
	ctx, call := r.Model(context.Background(), "m")
	call.FirstToken()
	call.End(1, 2, "stop", func() string { return "x" }, nil)
	ctx, tool := r.Tool(ctx, "t", "id", "callback", nil)
	tool.End(false, nil)
	r.Pause("user_approval", "t", "id", "int_id")
	r.AgentStarted("claude")
	r.SandboxStarted("local")
	h := http.Header{}
	r.Inject(ctx, h)
	if len(h) != 0 || r.Traceparent(ctx) != "" {
		t.Errorf("a nil run wrote %v", h)
	}
	r.End(Outcome{Status: "completed"})
}

// TestRunsWithoutACollectorStartNothing: a run's span and trace id exist
// without any exporter, its traceparent joins the caller's trace, and no
// goroutine is left (TestMain checks).
func TestRunsWithoutACollectorStartNothing(t *testing.T) {
	tel, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, r := tel.StartRun(context.Background(), RunInfo{Harness: "native",
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if r.TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s, want the caller's", r.TraceID())
	}
	if tp := r.Traceparent(ctx); tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-"+r.SpanID()+"-01" {
		t.Errorf("traceparent %q, want the run span's", tp)
	}
	_, fresh := tel.StartRun(context.Background(), RunInfo{Harness: "native", Traceparent: "00-not-a-trace"})
	if fresh.TraceID() == r.TraceID() || len(fresh.TraceID()) != 32 {
		t.Errorf("a malformed traceparent gave trace %q", fresh.TraceID())
	}
	r.End(Outcome{Status: "completed"})
	fresh.End(Outcome{Status: "failed", Error: "boom"})
	fresh.End(Outcome{Status: "completed"}) // counted once
	if err := tel.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
