// Package telemetry is runnel's tracing and metrics: a span per run, per
// model call, per tool call and per pause, named with the OpenTelemetry
// GenAI semantic conventions, exported over OTLP/HTTP to the operator's
// collector and, per run, to the collector the request names; and the
// Prometheus metrics operators alert on.
//
// A run's trace joins the caller's (its traceparent is the run span's
// parent) and continues into what the run calls: callbacks and direct
// calls, MCP servers (Inject, Transport) and ACP agents (TRACEPARENT).
package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Telemetry.
type Options struct {
	// Endpoint is the operator's OTLP/HTTP traces endpoint
	// (RUNNEL_OTLP_ENDPOINT); empty exports nothing but the runs' own.
	Endpoint string
	// Headers go with the operator's exports.
	Headers map[string]string
	// Version is runnel's, for the service.version resource attribute.
	Version string
	// HTTPClient sends per-run exports; nil is a client with a timeout.
	HTTPClient *http.Client
	// ExportTimeout bounds one per-run export; zero is 5 s.
	ExportTimeout time.Duration
	Logger        *slog.Logger
}

// Telemetry is one process's tracing and metrics. It is safe for
// concurrent use; Close it when the process stops.
type Telemetry struct {
	provider      *sdktrace.TracerProvider
	shared        sdktrace.SpanProcessor // the operator's exporter, or nil
	res           *resource.Resource
	metrics       *Metrics
	client        *http.Client
	exportTimeout time.Duration
	log           *slog.Logger

	// exports queue ended runs' spans for their collectors; the workers
	// start with the first (a process whose runs name no collector runs
	// none). mu guards closed against a run ending during Close.
	exports   chan exportJob
	workers   sync.WaitGroup
	startOnce sync.Once
	mu        sync.Mutex
	closed    bool
	closeOnce sync.Once
}

// propagator reads and writes W3C traceparent, tracestate and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// New returns a Telemetry; with an Endpoint its exporter is set up (it
// connects lazily, so a collector that is down does not stop runnel).
func New(o Options) (*Telemetry, error) {
	t := &Telemetry{metrics: newMetrics(), client: o.HTTPClient, exportTimeout: o.ExportTimeout, log: o.Logger,
		exports: make(chan exportJob, exportQueue)}
	if t.client == nil {
		t.client = &http.Client{Timeout: 10 * time.Second}
	}
	if t.exportTimeout <= 0 {
		t.exportTimeout = 5 * time.Second
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.res = resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("runnel"), semconv.ServiceVersion(o.Version))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(t.res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample()))}
	if o.Endpoint != "" {
		e, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(tracesURL(o.Endpoint)),
			otlptracehttp.WithHeaders(o.Headers))
		if err != nil {
			return nil, err
		}
		t.shared = sdktrace.NewBatchSpanProcessor(e)
		opts = append(opts, sdktrace.WithSpanProcessor(t.shared))
	}
	t.provider = sdktrace.NewTracerProvider(opts...)
	return t, nil
}

// Metrics are the process's metrics.
func (t *Telemetry) Metrics() *Metrics { return t.metrics }

// Close sends what is queued (within ctx) and stops the exporters.
func (t *Telemetry) Close(ctx context.Context) error {
	var err error
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		close(t.exports)
		t.mu.Unlock()
		done := make(chan struct{})
		go func() { t.workers.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		err = errors.Join(err, t.provider.Shutdown(ctx))
	})
	return err
}

// RunInfo describes a run to its span.
type RunInfo struct {
	RunID, SessionID, Harness, Model, Provider string
	// Traceparent and Baggage are the caller's W3C context, if any.
	Traceparent, Baggage string
	// Export is the run's own collector, or nil.
	Export *Export
	// CaptureContent puts tool arguments and results and model output on
	// spans (telemetry.capture.content.enabled); off by default.
	CaptureContent bool
	// Redact removes the run's secrets from text put on a span; nil
	// keeps text as it is.
	Redact func(string) string
}

// Run is one run's tracing: its span, its calls' spans, its metrics. A
// nil *Run traces nothing, so code under test needs none.
type Run struct {
	t        *Telemetry
	info     RunInfo
	tracer   trace.Tracer
	span     trace.Span
	ctx      context.Context
	start    time.Time
	provider *sdktrace.TracerProvider // the run's own, with Export
	coll     *collector
	ended    sync.Once
}

// StartRun starts a run's span, a child of the caller's traceparent when
// it carries a valid one; the returned context carries it.
func (t *Telemetry) StartRun(ctx context.Context, info RunInfo) (context.Context, *Run) {
	if info.Redact == nil {
		info.Redact = func(s string) string { return s }
	}
	r := &Run{t: t, info: info, start: time.Now()}
	carrier := propagation.MapCarrier{}
	if info.Traceparent != "" {
		carrier["traceparent"] = strings.TrimSpace(info.Traceparent)
	}
	if info.Baggage != "" {
		carrier["baggage"] = strings.TrimSpace(info.Baggage)
	}
	// The caller's context replaces whatever span ctx held (the HTTP
	// server's): the run belongs to the caller's trace.
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	ctx = propagator.Extract(ctx, carrier)
	tp := t.provider
	if info.Export != nil {
		r.coll = &collector{}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(t.res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())), sdktrace.WithSpanProcessor(r.coll)}
		if t.shared != nil {
			opts = append(opts, sdktrace.WithSpanProcessor(shared{t.shared}))
		}
		r.provider = sdktrace.NewTracerProvider(opts...)
		tp = r.provider
	}
	if info.Export == nil && t.shared == nil {
		// No span of this run can reach anyone: give them their ids, and
		// record nothing (unseen.go).
		r.tracer = unseenTracer{}
	} else {
		r.tracer = tp.Tracer("github.com/runnel/runnel")
	}
	ctx, r.span = r.tracer.Start(ctx, "invoke_agent "+info.Harness, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			semconv.GenAIOperationNameKey.String("invoke_agent"),
			semconv.GenAIAgentNameKey.String(info.Harness),
			semconv.GenAIRequestModelKey.String(info.Model),
			semconv.GenAIProviderNameKey.String(info.Provider),
			semconv.GenAIConversationIDKey.String(info.SessionID),
			attribute.String("runnel.run.id", info.RunID),
			attribute.String("runnel.harness", info.Harness),
		))
	r.ctx = ctx
	t.metrics.activeRuns.Inc()
	return ctx, r
}

// TraceID is the run's trace id (the caller's, when it sent one).
func (r *Run) TraceID() string { return r.span.SpanContext().TraceID().String() }

// SpanID is the run span's id.
func (r *Run) SpanID() string { return r.span.SpanContext().SpanID().String() }

// Traceparent is the W3C traceparent of the span ctx carries, or of the
// run's span: what an ACP agent gets as TRACEPARENT.
func (r *Run) Traceparent(ctx context.Context) string {
	if r == nil {
		return ""
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = r.ctx
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Capturing reports whether content goes on spans.
func (r *Run) Capturing() bool { return r.info.CaptureContent }

// AgentStarted counts an ACP agent process the run started.
func (r *Run) AgentStarted(agent string) {
	if r == nil {
		return
	}
	r.t.metrics.agentStarts.WithLabelValues(agent).Inc()
	r.span.AddEvent("agent started", trace.WithAttributes(attribute.String("runnel.agent", agent)))
}

// SandboxStarted counts the run's workspace opened in a sandbox (local,
// isolated).
func (r *Run) SandboxStarted(kind string) {
	if r == nil {
		return
	}
	r.t.metrics.sandboxes.WithLabelValues(kind).Inc()
	r.span.SetAttributes(attribute.String("runnel.sandbox", kind))
}

// Pause records a pause: a span under the run's for the interaction, and
// the pause count.
func (r *Run) Pause(kind, toolName, toolCallID, interactionID string) {
	if r == nil {
		return
	}
	_, s := r.tracer.Start(r.ctx, "pause "+kind, trace.WithAttributes(
		attribute.String("runnel.interaction.kind", kind),
		attribute.String("runnel.interaction.id", interactionID),
		semconv.GenAIToolNameKey.String(toolName),
		semconv.GenAIToolCallIDKey.String(toolCallID),
	))
	s.End()
	r.t.metrics.pauses.WithLabelValues(kind).Inc()
}

// Outcome is how a run ended, for its span and metrics.
type Outcome struct {
	Status, StopReason, ErrorCode, Error string
	InputTokens, OutputTokens            int64
}

// End ends the run's span, counts the run, and queues the run's own
// export. It is safe to call more than once; the first call counts.
func (r *Run) End(o Outcome) {
	if r == nil {
		return
	}
	r.ended.Do(func() {
		r.span.SetAttributes(
			attribute.String("runnel.status", o.Status),
			semconv.GenAIUsageInputTokensKey.Int64(o.InputTokens),
			semconv.GenAIUsageOutputTokensKey.Int64(o.OutputTokens),
		)
		if o.StopReason != "" {
			r.span.SetAttributes(attribute.String("runnel.stop_reason", o.StopReason))
		}
		if o.ErrorCode != "" || o.Status == "failed" {
			r.span.SetAttributes(semconv.ErrorTypeKey.String(orString(o.ErrorCode, "internal")))
			r.span.SetStatus(codes.Error, r.info.Redact(o.Error))
		}
		r.span.End()
		r.t.metrics.activeRuns.Dec()
		r.t.metrics.runEnded(r.info.Harness, o.Status, time.Since(r.start))
		if r.provider == nil {
			return
		}
		spans, dropped := r.coll.take()
		if dropped > 0 {
			r.t.metrics.traceDropped.WithLabelValues("too_many_spans").Add(float64(dropped))
		}
		// Nothing of the run's provider runs in the background: ending
		// it only releases it.
		_ = r.provider.Shutdown(context.Background())
		if len(spans) > 0 {
			r.t.enqueue(exportJob{to: *r.info.Export, spans: spans})
		}
	})
}

// ModelCall is one model call's span.
type ModelCall struct {
	r     *Run
	span  trace.Span
	start time.Time
	first time.Duration
}

// Model starts a model call's span ("chat <model>") under ctx's span.
func (r *Run) Model(ctx context.Context, model string) (context.Context, *ModelCall) {
	if r == nil {
		return ctx, nil
	}
	ctx, s := r.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameKey.String("chat"),
		semconv.GenAIRequestModelKey.String(model),
		semconv.GenAIProviderNameKey.String(r.info.Provider),
	))
	return ctx, &ModelCall{r: r, span: s, start: time.Now()}
}

// FirstToken marks the call's first streamed output; only the first mark
// counts.
func (c *ModelCall) FirstToken() {
	if c != nil && c.first == 0 {
		c.first = max(time.Since(c.start), time.Nanosecond)
	}
}

// End ends the call's span with its usage and finish reason, or err.
// output is the call's text, put on the span only when capturing.
func (c *ModelCall) End(inputTokens, outputTokens int64, finish string, output func() string, err error) {
	if c == nil {
		return
	}
	m, p := c.r.t.metrics, c.r.info.Provider
	c.span.SetAttributes(
		semconv.GenAIUsageInputTokensKey.Int64(inputTokens),
		semconv.GenAIUsageOutputTokensKey.Int64(outputTokens),
	)
	if finish != "" {
		c.span.SetAttributes(semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{finish}))
	}
	if c.r.info.CaptureContent && output != nil {
		c.span.SetAttributes(semconv.GenAIOutputMessagesKey.String(c.r.info.Redact(output())))
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
		c.span.SetAttributes(semconv.ErrorTypeKey.String("model_error"))
		c.span.SetStatus(codes.Error, c.r.info.Redact(err.Error()))
	}
	if c.first > 0 {
		m.modelTTFT.WithLabelValues(p).Observe(c.first.Seconds())
	}
	m.modelTime.WithLabelValues(p, outcome).Observe(time.Since(c.start).Seconds())
	m.tokens.WithLabelValues(p, "input").Add(float64(inputTokens))
	m.tokens.WithLabelValues(p, "output").Add(float64(outputTokens))
	c.span.End()
}

// ToolCall is one tool call's span.
type ToolCall struct {
	r     *Run
	span  trace.Span
	kind  string
	start time.Time
}

// Tool starts a tool call's span ("execute_tool <name>") under ctx's
// span; kind is how runnel runs it (callback, direct, mcp, builtin, code).
// args go on the span only when capturing.
func (r *Run) Tool(ctx context.Context, name, callID, kind string, args json.RawMessage) (context.Context, *ToolCall) {
	if r == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String("execute_tool"),
		semconv.GenAIToolNameKey.String(name),
		semconv.GenAIToolCallIDKey.String(callID),
		semconv.GenAIToolTypeKey.String(toolType(kind)),
		attribute.String("runnel.tool.kind", kind),
	}
	if r.info.CaptureContent {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(r.info.Redact(string(args))))
	}
	ctx, s := r.tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &ToolCall{r: r, span: s, kind: kind, start: time.Now()}
}

// End ends the call's span: a failed call's span has error status (the
// message is not put on it: a tool's error text is content).
func (c *ToolCall) End(isError bool, result func() string) {
	if c == nil {
		return
	}
	outcome := "ok"
	if isError {
		outcome = "error"
		c.span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		c.span.SetStatus(codes.Error, "the tool call failed")
	}
	if c.r.info.CaptureContent && result != nil {
		c.span.SetAttributes(semconv.GenAIToolCallResultKey.String(c.r.info.Redact(result())))
	}
	c.r.t.metrics.toolTime.WithLabelValues(c.kind, outcome).Observe(time.Since(c.start).Seconds())
	c.span.End()
}

// toolType is the GenAI tool type of a runnel tool kind: "extension" for
// tools that run outside the agent (callbacks, MCP), "function" for the
// rest.
func toolType(kind string) string {
	switch kind {
	case "callback", "direct", "mcp":
		return "extension"
	}
	return "function"
}

// Inject writes the trace context and baggage of ctx into h.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Inject writes the trace context and baggage of ctx's span, or of the
// run's when ctx has none, into h: how callbacks, direct calls and MCP
// requests carry the run's trace.
func (r *Run) Inject(ctx context.Context, h http.Header) {
	if r == nil {
		return
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = r.ctx
	}
	Inject(ctx, h)
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
