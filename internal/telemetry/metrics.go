package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are runnel's Prometheus metrics, on a registry of their own (no
// default registry: two servers in one process, as in tests, never share
// counts).
type Metrics struct {
	reg          *prometheus.Registry
	runs         *prometheus.CounterVec
	runDuration  *prometheus.HistogramVec
	activeRuns   prometheus.Gauge
	pauses       *prometheus.CounterVec
	modelTTFT    *prometheus.HistogramVec
	modelTime    *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	toolTime     *prometheus.HistogramVec
	agentStarts  *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	sandboxes    *prometheus.CounterVec
	traceDropped *prometheus.CounterVec
}

// Buckets: a run lasts seconds to many minutes; a model's first token
// comes in tens of milliseconds to tens of seconds; a tool takes a
// millisecond (a builtin) to minutes (a command).
var (
	runBuckets   = []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	modelBuckets = []float64{.025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	toolBuckets  = []float64{.001, .005, .025, .1, .25, 1, 2.5, 10, 30, 120, 600}
)

func newMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_runs_total",
			Help: "Runs that ended, by harness and status (completed, paused, failed, cancelled)."}, []string{"harness", "status"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runnel_run_duration_seconds",
			Help: "How long runs took, by harness and status.", Buckets: runBuckets}, []string{"harness", "status"}),
		activeRuns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "runnel_active_runs",
			Help: "Runs in progress."}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_pauses_total",
			Help: "Interactions runs paused for, by kind (user_approval, client_tool)."}, []string{"kind"}),
		modelTTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runnel_model_time_to_first_token_seconds",
			Help: "Time from a model call to its first streamed output, by provider.", Buckets: modelBuckets}, []string{"provider"}),
		modelTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runnel_model_call_duration_seconds",
			Help: "Model calls from request to last chunk, retries included, by provider and outcome (ok, error).", Buckets: modelBuckets}, []string{"provider", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_model_tokens_total",
			Help: "Tokens the providers reported, by provider and type (input, output)."}, []string{"provider", "type"}),
		toolTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runnel_tool_call_duration_seconds",
			Help: "Tool calls runnel ran, by kind (callback, direct, mcp, builtin, code) and outcome (ok, error).", Buckets: toolBuckets}, []string{"kind", "outcome"}),
		agentStarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_agent_process_starts_total",
			Help: "ACP agent processes started, by agent."}, []string{"agent"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_refusals_total",
			Help: "Requests refused before a run started, by error code."}, []string{"code"}),
		sandboxes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_sandbox_starts_total",
			Help: "Run workspaces opened, by sandbox (local, isolated)."}, []string{"sandbox"}),
		traceDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_trace_exports_dropped_total",
			Help: "Per-run span exports not made, by reason (queue_full, too_many_spans, failed, closed)."}, []string{"reason"}),
	}
	m.reg.MustRegister(m.runs, m.runDuration, m.activeRuns, m.pauses, m.modelTTFT, m.modelTime, m.tokens,
		m.toolTime, m.agentStarts, m.refusals, m.sandboxes, m.traceDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the metrics' registry, for tests and embedding programs.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Refused counts a request refused before it ran.
func (m *Metrics) Refused(code string) {
	if code == "" {
		code = "unknown"
	}
	m.refusals.WithLabelValues(code).Inc()
}

func (m *Metrics) runEnded(harness, status string, d time.Duration) {
	m.runs.WithLabelValues(harness, status).Inc()
	m.runDuration.WithLabelValues(harness, status).Observe(d.Seconds())
}
