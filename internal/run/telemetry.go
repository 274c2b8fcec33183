package run

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/strictjson"
	"github.com/runnel/runnel/internal/telemetry"
)

// telemetryFields is the request's telemetry (DESIGN §3.1).
// exportAuthorization, at either level, is the collector's Authorization
// header when headers carry none (decisions.md).
type telemetryFields struct {
	Exporters struct {
		OTLP *struct {
			Endpoint            string            `json:"endpoint"`
			Headers             map[string]string `json:"headers"`
			ExportAuthorization string            `json:"exportAuthorization"`
		} `json:"otlp"`
	} `json:"exporters"`
	Capture struct {
		Content struct {
			Enabled bool `json:"enabled"`
		} `json:"content"`
	} `json:"capture"`
	ExportAuthorization string `json:"exportAuthorization"`
}

// readTelemetry decodes the request's telemetry once: its OTLP target
// (nil without one), whether content is captured, and the secrets its
// headers carry. A telemetry runnel cannot read is refused, not ignored:
// the platform would look for spans that never come.
func readTelemetry(req *runnel.RunRequest) (export *telemetry.Export, capture bool, secrets []string, err error) {
	raw := strings.TrimSpace(string(req.Telemetry))
	if raw == "" || raw == "null" {
		return nil, false, nil, nil
	}
	var f telemetryFields
	if err := strictjson.Unmarshal([]byte(raw), &f); err != nil {
		return nil, false, nil, invalid("telemetry cannot be read (%s); send {exporters: {otlp: {endpoint, headers}}, capture: {content: {enabled}}}.", err)
	}
	capture = f.Capture.Content.Enabled
	o := f.Exporters.OTLP
	if o == nil || o.Endpoint == "" && len(o.Headers) == 0 && o.ExportAuthorization == "" {
		return nil, capture, []string{f.ExportAuthorization}, nil
	}
	u, perr := url.Parse(o.Endpoint)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, false, nil, invalid("telemetry.exporters.otlp.endpoint is not an http or https URL without credentials; give the collector's traces URL.")
	}
	export = &telemetry.Export{Endpoint: o.Endpoint, Headers: map[string]string{}}
	for k, v := range o.Headers {
		export.Headers[k] = v
		secrets = append(secrets, v)
	}
	auth := o.ExportAuthorization
	if auth == "" {
		auth = f.ExportAuthorization
	}
	if auth != "" {
		secrets = append(secrets, auth, strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")))
		if !hasHeader(export.Headers, "Authorization") {
			export.Headers["Authorization"] = auth
		}
	}
	return export, capture, secrets, nil
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// startTrace starts the run's span (a child of the caller's traceparent)
// and names its trace in the plan, its logs and its result.
func (m *Manager) startTrace(ctx context.Context, p *plan) context.Context {
	info := telemetry.RunInfo{RunID: p.runID, SessionID: p.sessionID, Harness: p.harness, Model: p.req.Model,
		Export: p.export, CaptureContent: p.capture, Redact: p.red.String}
	if p.model != nil {
		info.Provider = p.model.provider
	}
	if c := p.req.Context; c != nil && c.Propagation != nil {
		info.Traceparent, info.Baggage = c.Propagation.Traceparent, c.Propagation.Baggage
	}
	ctx, p.obs = m.tel.StartRun(ctx, info)
	p.traceID = p.obs.TraceID()
	p.log = p.log.With("trace_id", p.traceID, "span_id", p.obs.SpanID())
	return ctx
}

// endTrace ends the run's span with how the run ended; err is a refusal
// after planning (an unreachable required MCP server, a workspace that
// could not open), which the server counts with the others.
func endTrace(p *plan, res *runnel.Result, err error) {
	if err != nil {
		code := codeOf(err)
		p.obs.End(telemetry.Outcome{Status: "refused", ErrorCode: code, Error: err.Error()})
		return
	}
	p.obs.End(telemetry.Outcome{Status: string(res.Status), StopReason: res.StopReason, ErrorCode: string(res.ErrorCode),
		Error: res.Error, InputTokens: int64(res.Usage.Input), OutputTokens: int64(res.Usage.Output)})
}

// codeOf is the error code of a refusal.
func codeOf(err error) string {
	var rerr *runnel.Error
	if errors.As(err, &rerr) {
		return string(rerr.Code)
	}
	return string(runnel.CodeInternal)
}

// tracedModel gives every model call a span and its metrics.
type tracedModel struct {
	next  provider.Model
	obs   *telemetry.Run
	model string
}

func (t *tracedModel) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	ctx, call := t.obs.Model(ctx, t.model)
	resp, err := t.next.Stream(ctx, req, func(c provider.Chunk) {
		call.FirstToken()
		emit(c)
	})
	var in, out int64
	var stop string
	if resp != nil {
		in, out, stop = int64(resp.Usage.Input), int64(resp.Usage.Output), resp.StopReason
	}
	call.End(in, out, stop, func() string { return responseText(resp) }, err)
	return resp, err
}

// responseText is a response's text, for a span that captures content.
func responseText(resp *provider.Response) string {
	if resp == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range resp.Content {
		if c.Type == runnel.BlockText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}
