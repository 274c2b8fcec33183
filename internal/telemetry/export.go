package telemetry

import (
	"context"
	"net/url"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Export is a run's own OTLP/HTTP target (the request's
// telemetry.exporters.otlp): the run's spans go there once it ends.
type Export struct {
	// Endpoint is the collector's traces URL; one with no path gets the
	// OTLP/HTTP default /v1/traces.
	Endpoint string
	// Headers go with the export (they carry the platform's credential).
	Headers map[string]string
}

// Bounds of per-run export: a run keeps at most maxRunSpans spans, at
// most exportQueue finished runs wait for export, and exportWorkers send
// them. A slow or dead collector costs queued memory, never a run's time;
// past the bounds spans are dropped and counted.
const (
	maxRunSpans   = 4096
	exportQueue   = 256
	exportWorkers = 2
)

// collector keeps a run's ended spans in memory until the run ends.
type collector struct {
	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	dropped int
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.spans) >= maxRunSpans {
		c.dropped++
		return
	}
	c.spans = append(c.spans, s)
}

func (c *collector) take() ([]sdktrace.ReadOnlySpan, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, d := c.spans, c.dropped
	c.spans, c.dropped = nil, 0
	return s, d
}

func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

// shared is the server's span processor inside a run's provider: the
// run's provider ending must not stop the server's exporter.
type shared struct{ sdktrace.SpanProcessor }

func (shared) Shutdown(context.Context) error { return nil }

// exportJob is one ended run's spans for its collector.
type exportJob struct {
	to    Export
	spans []sdktrace.ReadOnlySpan
}

// enqueue hands an ended run's spans to the export workers, or drops them
// when the queue is full.
func (t *Telemetry) enqueue(j exportJob) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		t.metrics.traceDropped.WithLabelValues("closed").Add(float64(len(j.spans)))
		return
	}
	t.startOnce.Do(func() {
		for range exportWorkers {
			t.workers.Add(1)
			go t.exportWorker()
		}
	})
	select {
	case t.exports <- j:
	default:
		t.metrics.traceDropped.WithLabelValues("queue_full").Add(float64(len(j.spans)))
	}
}

// exportWorker sends queued runs' spans until Close.
func (t *Telemetry) exportWorker() {
	defer t.workers.Done()
	for j := range t.exports {
		if err := t.export(j); err != nil {
			t.metrics.traceDropped.WithLabelValues("failed").Add(float64(len(j.spans)))
			t.log.Warn("per-run trace export failed", "spans", len(j.spans), "err", t.scrub(err.Error(), j.to))
		}
	}
}

func (t *Telemetry) export(j exportJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.exportTimeout)
	defer cancel()
	e, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL(j.to.Endpoint)),
		otlptracehttp.WithHeaders(j.to.Headers), otlptracehttp.WithHTTPClient(t.client),
		otlptracehttp.WithTimeout(t.exportTimeout),
		// One attempt: the queue behind it must keep moving.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		return err
	}
	err = e.ExportSpans(ctx, j.spans)
	if serr := e.Shutdown(ctx); err == nil {
		err = serr
	}
	return err
}

// tracesURL is endpoint with the OTLP/HTTP traces path when it has none.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// scrub removes an export's header values from an error's text: the
// exporter's errors may quote what it sent.
func (t *Telemetry) scrub(s string, to Export) string {
	for _, v := range to.Headers {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
