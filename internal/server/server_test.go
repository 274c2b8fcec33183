package server

import (
	stdcmp "cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runnerFunc is the hand-written fake Runner: each test scripts what the
// run emits and returns.
type runnerFunc func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error)

func (f runnerFunc) Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	return f(ctx, req, sink)
}

// helloRunner streams "Hello!" and completes.
func helloRunner() Runner {
	return runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
		sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: "Hel"})
		sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: "lo!"})
		sink.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m1"})
		sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: runnel.StopEndTurn})
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: "Hello!", StopReason: runnel.StopEndTurn}, nil
	})
}

func resultRunner(res *runnel.Result, err error) Runner {
	return runnerFunc(func(context.Context, *runnel.RunRequest, runnel.Sink) (*runnel.Result, error) {
		return res, err
	})
}

func newTestServer(t testing.TB, r Runner, opts *Options) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(New(r, opts))
	t.Cleanup(ts.Close)
	return ts
}

const hiRequest = `{"model":"openai/gpt-5","messages":[{"role":"user","content":"hi"}]}`

// do sends one request and returns the response with its whole body.
func do(t *testing.T, ts *httptest.Server, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func decodeResult(t *testing.T, body []byte) *runnel.Result {
	t.Helper()
	var res runnel.Result
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("body is not a result: %v\n%s", err, body)
	}
	return &res
}

// errorResult is the Result-shaped body every error answer has.
func errorResult(code runnel.ErrorCode, msg, requestID string) *runnel.Result {
	return &runnel.Result{Status: runnel.StatusFailed, Messages: []runnel.Message{}, Interactions: []runnel.Interaction{},
		Error: msg, ErrorCode: code, RequestID: requestID}
}

// recv waits for ch; the bound only turns a hang into a readable failure.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

func TestHealthIsOpen(t *testing.T) {
	ts := newTestServer(t, helloRunner(), &Options{Token: "s3cret-token", Version: "1.2.3",
		Harnesses: []string{"native"}, Features: []string{"ndjson"}})
	resp, body := do(t, ts, http.MethodGet, "/health", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"status": "ok", "runner": "1.2.3", "protocol": 1.0,
		"harnesses": []any{"native"}, "features": []any{"ndjson"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
}

func TestCapabilitiesNeedToken(t *testing.T) {
	ts := newTestServer(t, helloRunner(), &Options{Token: "s3cret-token", Version: "1.2.3", MaxBodyBytes: 1024,
		ConcurrencyLimit: 3, Harnesses: []string{"native"},
		Capabilities: &Capabilities{Limits: Limits{MaxSteps: 7}}})
	resp, body := do(t, ts, http.MethodGet, "/v1/capabilities", "")
	if resp.StatusCode != http.StatusUnauthorized || decodeResult(t, body).ErrorCode != runnel.CodeUnauthorized {
		t.Fatalf("without a token: status %d, want 401: %s", resp.StatusCode, body)
	}
	resp, body = do(t, ts, http.MethodGet, "/v1/capabilities", "", "Authorization", "Bearer s3cret-token")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: status %d, want 200: %s", resp.StatusCode, body)
	}
	var got Capabilities
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := Capabilities{Runner: "1.2.3", Protocol: 1, Harnesses: []string{"native"}, Features: []string{},
		Limits: Limits{MaxBodyBytes: 1024, ConcurrencyLimit: 3, MaxSteps: 7}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
}

func TestAuth(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name   string
		header []string
		want   int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"token prefix", []string{"Authorization", "Bearer " + token[:10]}, http.StatusUnauthorized},
		{"basic scheme", []string{"Authorization", "Basic " + token}, http.StatusUnauthorized},
		{"bare authorization", []string{"Authorization", token}, http.StatusUnauthorized},
		{"empty runnel header", []string{"X-Runnel-Token", " "}, http.StatusUnauthorized},
		{"a bearer of Unicode spaces", []string{"Authorization", "Bearer \u00a0\u2003"}, http.StatusUnauthorized},
		{"bearer", []string{"Authorization", "Bearer " + token}, http.StatusOK},
		{"bearer lower case", []string{"Authorization", "bearer " + token}, http.StatusOK},
		{"x-runnel-token", []string{"X-Runnel-Token", token}, http.StatusOK},
		{"x-agenta-runner-token", []string{"X-Agenta-Runner-Token", token}, http.StatusOK},
		{"one good of two", []string{"Authorization", "Bearer nope", "X-Runnel-Token", token}, http.StatusOK},
	}
	var logs testlog.Buffer
	ts := newTestServer(t, helloRunner(), &Options{Token: token, Logger: logs.Logger()})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, ts, http.MethodPost, "/run", hiRequest, tt.header...)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, body)
			}
			if tt.want != http.StatusUnauthorized {
				return
			}
			got := decodeResult(t, body)
			if diff := cmp.Diff(errorResult(runnel.CodeUnauthorized, "Unauthorized", resp.Header.Get("X-Request-Id")), got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// A server given a blank token fails closed: a blank presented token
	// trims to nothing and is never compared, so nothing matches.
	blank := newTestServer(t, helloRunner(), &Options{Token: "\u00a0"})
	for _, h := range [][]string{{"Authorization", "Bearer \u00a0"}, {"X-Runnel-Token", "\u00a0"}, {"Authorization", "Bearer "}} {
		if resp, _ := do(t, blank, http.MethodPost, "/run", hiRequest, h...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("blank token, %q: status %d, want 401", h, resp.StatusCode)
		}
	}
	if strings.Contains(logs.String(), token[:10]) {
		t.Error("the token appears in the logs")
	}
}

func TestNoTokenMeansNoAuth(t *testing.T) {
	ts := newTestServer(t, helloRunner(), nil)
	if resp, body := do(t, ts, http.MethodPost, "/run", hiRequest); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
	}
}

func TestErrorAnswers(t *testing.T) {
	internal := runnel.Errorf(runnel.CodeInternal, "db exploded: %w", io.ErrUnexpectedEOF)
	tests := []struct {
		name     string
		runner   Runner
		method   string
		path     string
		body     string
		status   int
		code     runnel.ErrorCode
		msg      string // the whole error sentence, or its start when it ends in "…"
		internal bool
	}{
		{name: "too large", body: `{"model":"` + strings.Repeat("x", 100) + `"}`, status: 413, code: runnel.CodeTooLarge,
			msg: "request body is larger than the 80 bytes limit; send a smaller request, or raise RUNNEL_MAX_BODY_BYTES on the server"},
		{name: "invalid JSON", body: `{"model":`, status: 400, code: runnel.CodeInvalidRequest,
			msg: "invalid JSON: unexpected end of input (at byte 9)"},
		{name: "wrong type", body: `{"messages":"hi"}`, status: 400, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "messages" must be an array, not a string`},
		{name: "not an object", body: `[1]`, status: 400, code: runnel.CodeInvalidRequest,
			msg: "invalid JSON: the request must be an object, not an array"},
		{name: "empty body", body: " \n", status: 400, code: runnel.CodeInvalidRequest, msg: "request body is empty; …"},
		{name: "refused", runner: resultRunner(nil, runnel.Errorf(runnel.CodeRefused, "Network sandbox policy is not enforceable")),
			body: hiRequest, status: 400, code: runnel.CodeRefused, msg: "Network sandbox policy is not enforceable"},
		{name: "invalid request", runner: resultRunner(nil, runnel.Errorf(runnel.CodeInvalidRequest, "No user message to send (prompt/messages empty).")),
			body: hiRequest, status: 400, code: runnel.CodeInvalidRequest, msg: "No user message to send (prompt/messages empty)."},
		{name: "internal", runner: resultRunner(nil, internal), body: hiRequest, status: 500, code: runnel.CodeInternal,
			msg: "internal error (request …", internal: true},
		{name: "plain error is internal", runner: resultRunner(nil, io.ErrClosedPipe), body: hiRequest, status: 500,
			code: runnel.CodeInternal, msg: "internal error (request …", internal: true},
		{name: "neither result nor error", runner: resultRunner(nil, nil), body: hiRequest, status: 500,
			code: runnel.CodeInternal, msg: "internal error (request …", internal: true},
		{name: "wrong method", method: http.MethodGet, status: 405, code: codeMethodNotAllowed, msg: "GET is not allowed on /run; use POST"},
		{name: "wrong method on health", method: http.MethodDelete, path: "/health", status: 405, code: codeMethodNotAllowed,
			msg: "DELETE is not allowed on /health; use GET"},
		{name: "no such route", method: http.MethodGet, path: "/nope", status: 404, code: codeNotFound, msg: "no route /nope; …"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testlog.Buffer
			r := tt.runner
			if r == nil {
				r = helloRunner()
			}
			ts := newTestServer(t, r, &Options{MaxBodyBytes: 80, Logger: logs.Logger()})
			method, path := stdcmp.Or(tt.method, http.MethodPost), stdcmp.Or(tt.path, "/run")
			resp, body := do(t, ts, method, path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			got := decodeResult(t, body)
			id := resp.Header.Get("X-Request-Id")
			want := errorResult(tt.code, tt.msg, id)
			if prefix, ok := strings.CutSuffix(tt.msg, "…"); ok && strings.HasPrefix(got.Error, prefix) {
				want.Error = got.Error
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if !tt.internal {
				return
			}
			if got.Error != "internal error (request "+id+")" {
				t.Errorf("error %q does not name request %q", got.Error, id)
			}
			if !strings.Contains(logs.String(), `"requestId":"`+id+`"`) || (tt.runner != nil && !strings.Contains(logs.String(), `"level":"ERROR"`)) {
				t.Errorf("internal error not logged with its request id:\n%s", logs.String())
			}
		})
	}
}

func TestInternalDetailsStayInTheLog(t *testing.T) {
	var logs testlog.Buffer
	ts := newTestServer(t, resultRunner(nil, runnel.Errorf(runnel.CodeInternal, "db at 10.0.0.7 exploded")),
		&Options{Logger: logs.Logger()})
	_, body := do(t, ts, http.MethodPost, "/run", hiRequest)
	if strings.Contains(string(body), "10.0.0.7") {
		t.Errorf("the caller sees internals: %s", body)
	}
	if !strings.Contains(logs.String(), "10.0.0.7") {
		t.Errorf("the log lacks the cause:\n%s", logs.String())
	}
}

func TestOneShotResults(t *testing.T) {
	tests := []struct {
		name   string
		res    *runnel.Result
		status int
	}{
		{"completed", &runnel.Result{OK: true, Status: runnel.StatusCompleted}, 200},
		{"paused", &runnel.Result{OK: true, Status: runnel.StatusPaused, StopReason: runnel.StopPaused}, 200},
		{"provider failure", &runnel.Result{Status: runnel.StatusFailed, Error: "the model API said no", ErrorCode: runnel.CodeProviderError}, 500},
		{"timeout", &runnel.Result{Status: runnel.StatusFailed, Error: "run took longer than 10m", ErrorCode: runnel.CodeTimeout}, 500},
		{"failure without code", &runnel.Result{Status: runnel.StatusFailed, Error: "it broke"}, 500},
		{"cancelled", &runnel.Result{Status: runnel.StatusCancelled, ErrorCode: runnel.CodeCancelled, StopReason: runnel.StopCancelled}, 503},
		{"cancelled without code", &runnel.Result{Status: runnel.StatusCancelled}, 503},
		{"refused late", &runnel.Result{Status: runnel.StatusFailed, ErrorCode: runnel.CodeRefused, Error: "no"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, runnerFunc(func(_ context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
				sink.Emit(runnel.Event{Type: runnel.EventThoughtDelta, ID: "t", Delta: "hmm"})
				sink.Emit(runnel.Event{Type: runnel.EventToolCall, ID: "c1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)})
				res := *tt.res
				return &res, nil
			}), nil)
			resp, body := do(t, ts, http.MethodPost, "/run", hiRequest)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			want := *tt.res
			want.RequestID = resp.Header.Get("X-Request-Id")
			want.Events = []runnel.Event{{Type: runnel.EventThought, Text: "hmm"},
				{Type: runnel.EventToolCall, ID: "c1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)}}
			if diff := cmp.Diff(&want, decodeResult(t, body)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOneShotInternalFailurePointsAtTheLog(t *testing.T) {
	ts := newTestServer(t, resultRunner(&runnel.Result{Status: runnel.StatusFailed, Error: "internal error", ErrorCode: runnel.CodeInternal}, nil), nil)
	resp, body := do(t, ts, http.MethodPost, "/run", hiRequest, "X-Request-Id", "req-42")
	got := decodeResult(t, body)
	if resp.StatusCode != 500 || got.Error != "internal error (request req-42)" || got.RequestID != "req-42" {
		t.Errorf("status %d, error %q, requestId %q", resp.StatusCode, got.Error, got.RequestID)
	}
}

func TestOneShotCoalescesText(t *testing.T) {
	ts := newTestServer(t, helloRunner(), nil)
	resp, body := do(t, ts, http.MethodPost, "/stream", hiRequest)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: "Hello!", StopReason: runnel.StopEndTurn,
		RequestID: resp.Header.Get("X-Request-Id"),
		Events:    []runnel.Event{{Type: runnel.EventMessage, Text: "Hello!"}, {Type: runnel.EventDone, StopReason: runnel.StopEndTurn}}}
	if diff := cmp.Diff(want, decodeResult(t, body)); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestRequestID(t *testing.T) {
	ts := newTestServer(t, helloRunner(), nil)
	resp, _ := do(t, ts, http.MethodGet, "/health", "", "X-Request-Id", "trace-abc_1")
	if got := resp.Header.Get("X-Request-Id"); got != "trace-abc_1" {
		t.Errorf("a sane caller id was replaced: %q", got)
	}
	resp, _ = do(t, ts, http.MethodGet, "/health", "", "X-Request-Id", "bad id\"<script>")
	if got := resp.Header.Get("X-Request-Id"); got == "" || strings.ContainsAny(got, " \"<") {
		t.Errorf("an unsafe caller id was kept: %q", got)
	}
}

func TestAtCapacity(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, _ runnel.Sink) (*runnel.Result, error) {
		close(started)
		select { // a failed test cancels ctx (t.Context), so the handler never hangs
		case <-release:
		case <-ctx.Done():
		}
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted}, nil
	}), &Options{ConcurrencyLimit: 1})
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/run", strings.NewReader(hiRequest))
		resp, err := ts.Client().Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	recv(t, started, "the first run to start")
	resp, body := do(t, ts, http.MethodPost, "/run", hiRequest)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second run: status %d, want 429: %s", resp.StatusCode, body)
	}
	if got := decodeResult(t, body); got.ErrorCode != runnel.CodeAtCapacity ||
		got.Error != "runnel is running its limit of 1 concurrent runs; retry shortly, or raise RUNNEL_CONCURRENCY_LIMIT on the server" {
		t.Errorf("429 body: %s", body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	close(release)
	if got := recv(t, first, "the first run"); got != http.StatusOK {
		t.Errorf("first run: status %d, want 200", got)
	}
}

// TestSlowUploadHoldsNoRunSlot: a client that sends its body slowly holds
// no run slot, so with one slot another client still runs.
func TestSlowUploadHoldsNoRunSlot(t *testing.T) {
	ts := newTestServer(t, helloRunner(), &Options{ConcurrencyLimit: 1})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and half a body; the rest never comes (until the test ends).
	fmt.Fprintf(conn, "POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(hiRequest), hiRequest[:len(hiRequest)/2])
	// The server reads the headers before the handler runs; wait until
	// this request is in flight, so the next one comes after it.
	for srv := ts.Config.Handler.(*Server); srv.inflight.count() == 0; {
		runtime.Gosched()
	}
	resp, body := do(t, ts, http.MethodPost, "/run", hiRequest)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d while another client uploads slowly, want 200: %s", resp.StatusCode, body)
	}
}
