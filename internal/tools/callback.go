package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/telemetry"
)

const (
	// maxResponseBytes is the most of a callback response runnel reads.
	maxResponseBytes = 4 << 20
	// maxContentBytes is the most tool output a model is given; the rest is
	// replaced by a note saying how much was cut.
	maxContentBytes = 1_000_000
	// timeoutGrace is added to a spec's own timeoutMs: the platform's tool
	// runs for up to timeoutMs and still needs time to answer.
	timeoutGrace = 10 * time.Second
	// maxLoggedErrorBody is how much of a failed response is logged.
	maxLoggedErrorBody = 2048
)

// errToolTimeout marks a callback that ran out of time, as opposed to a run
// that was cancelled.
var errToolTimeout = errors.New("tool call timed out")

// callback executes callback tools by POSTing the envelope of DESIGN §4.2
// to the platform's endpoint.
type callback struct {
	endpoint string
	// base and mount confine direct calls (direct.go): the endpoint's
	// origin, and the path prefix of the platform API behind it.
	base          *url.URL
	mount         string
	authorization string
	client        *http.Client
	timeout       time.Duration
	runContext    map[string]any
	// runKind is runContext's run.kind, sent as x-agenta-run-kind so the
	// platform can tell a test run from a production one.
	runKind string
	log     *slog.Logger
}

func newCallback(cb *runnel.ToolCallback, runContext map[string]any, o *Options) *callback {
	client := &http.Client{}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		client = &c
	}
	// A redirect could carry the authorization to another origin; the
	// platform's endpoint answers directly or not at all.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	base, _ := url.Parse(cb.Endpoint) // New checked it
	c := &callback{
		endpoint:      cb.Endpoint,
		base:          base,
		mount:         mountOf(base.Path),
		authorization: cb.Authorization,
		client:        client,
		timeout:       o.Timeout,
		runContext:    runContext,
		log:           o.Logger,
	}
	if kind, ok := lookup(runContext, "run.kind"); ok {
		c.runKind, _ = kind.(string)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// envelope is the body POSTed to the endpoint.
type envelope struct {
	Data envelopeData `json:"data"`
}

type envelopeData struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function envelopeFunction `json:"function"`
}

type envelopeFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// reply is the endpoint's answer.
type reply struct {
	Call *struct {
		ID     string `json:"id"`
		Status struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
		Data struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		} `json:"data"`
	} `json:"call"`
}

func (c *callback) execute(ctx context.Context, spec *runnel.ToolSpec, call Call) Result {
	ref := spec.CallRef
	if ref == "" {
		ref = spec.Name
	}
	args, err := outgoingArgs(call.Input, spec, c.runContext)
	if err != nil {
		return textResult(fmt.Sprintf("tool call %s failed: %v", ref, err), true)
	}
	body, err := json.Marshal(envelope{Data: envelopeData{
		ID: call.ID, Type: "function", Function: envelopeFunction{Name: ref, Arguments: args},
	}})
	if err != nil {
		return textResult(fmt.Sprintf("tool call %s failed: its arguments could not be encoded.", ref), true)
	}
	timeout := c.timeoutFor(spec)
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errToolTimeout)
	defer cancel()
	start := time.Now()
	raw, status, err := c.send(tctx, http.MethodPost, c.endpoint, body, call.ID)
	c.log.DebugContext(ctx, "tool callback", "tool", spec.Name, "ref", ref, "status", status, "duration", time.Since(start))
	switch {
	case err != nil && ctx.Err() != nil:
		return textResult(fmt.Sprintf("tool call %s was cancelled because the run ended.", ref), true)
	case err != nil && errors.Is(context.Cause(tctx), errToolTimeout):
		return textResult(fmt.Sprintf("tool call %s timed out after %s without an answer.", ref, timeout), true)
	case err != nil:
		return textResult(fmt.Sprintf("tool call %s failed: %v", ref, err), true)
	case status < 200 || status > 299:
		c.log.DebugContext(ctx, "tool callback error body", "ref", ref, "status", status, "body", string(raw[:min(len(raw), maxLoggedErrorBody)]))
		return textResult(fmt.Sprintf("tool call %s failed: HTTP %d", ref, status), true)
	}
	return readReply(ref, raw)
}

// timeoutFor is the spec's timeoutMs plus a grace for the answer to
// travel back, or the registry's default.
func (c *callback) timeoutFor(spec *runnel.ToolSpec) time.Duration {
	if spec.TimeoutMs > 0 {
		return time.Duration(spec.TimeoutMs)*time.Millisecond + timeoutGrace
	}
	return c.timeout
}

// send makes one request to the platform, with a JSON body unless body is
// nil, and reads at most maxResponseBytes of the answer. Errors are
// sentences without the URL, which may carry a credential.
//
// Idempotency-Key is the tool call id. runnel keeps no state between
// requests, so a resume sent twice runs an approved call twice; the key
// lets the platform refuse the repeat (docs/pause-resume.md).
func (c *callback) send(ctx context.Context, method, target string, body []byte, callID string) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, 0, errors.New("the tool endpoint URL is not valid")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if callID != "" {
		req.Header.Set("Idempotency-Key", callID)
	}
	if c.runKind != "" {
		req.Header.Set("X-Agenta-Run-Kind", c.runKind)
	}
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
	// The call's span (the run's trace) continues at the platform.
	telemetry.Inject(ctx, req.Header)
	resp, err := c.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, 0, fmt.Errorf("the tool endpoint could not be reached (%w)", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading the answer failed (%w)", err)
	}
	if len(raw) > maxResponseBytes {
		return nil, resp.StatusCode, errors.New("the answer is larger than 4 MiB")
	}
	return raw, resp.StatusCode, nil
}

// readReply turns the endpoint's answer into what the model reads.
func readReply(ref string, raw []byte) Result {
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil || r.Call == nil {
		return textResult(fmt.Sprintf(`tool call %s failed: the tool endpoint answered with something other than the expected JSON envelope {"call": {...}}.`, ref), true)
	}
	content := capContent(contentText(r.Call.Data.Content))
	switch r.Call.Status.Code {
	case "", "STATUS_CODE_OK", "STATUS_CODE_UNSET":
		return textResult(content, false)
	}
	msg := r.Call.Status.Message
	if msg == "" {
		msg = r.Call.Status.Code
	}
	return textResult(capContent(fmt.Sprintf("tool call %s failed: %s\n%s", ref, msg, content)), true)
}

// contentText reads content as the string it should be, tolerating a
// platform that sends structured JSON instead.
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// CapResult cuts a result from elsewhere (a browser's client-tool output)
// to the size any tool result is held to: output over 1 MB becomes its
// text, cut, with a note saying how much was left out.
func CapResult(r Result) Result {
	if len(r.Output) <= maxContentBytes {
		return r
	}
	b := runnel.Block{Output: r.Output}
	return textResult(capContent(b.OutputText()), r.IsError)
}

// capContent cuts s to maxContentBytes on a character boundary and says
// how much was left out.
func capContent(s string) string {
	if len(s) <= maxContentBytes {
		return s
	}
	cut := maxContentBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s [... %d bytes omitted]", s[:cut], len(s)-cut)
}
