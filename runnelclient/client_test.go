package runnelclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/runnelclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "client-test-token-0123456789"

// runnerFunc is the hand-written fake runner behind the real handler.
type runnerFunc func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error)

func (f runnerFunc) Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	return f(ctx, req, sink)
}

// echo answers "echo: <last user text>" as a message, a usage and done.
func echo(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	text := "echo: " + req.Messages[len(req.Messages)-1].Text()
	sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
	sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: text})
	sink.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m1"})
	sink.Emit(runnel.Event{Type: runnel.EventUsage, Usage: &runnel.Usage{Input: 3, Output: 2, Total: 5}})
	sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: runnel.StopEndTurn})
	return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: text, StopReason: runnel.StopEndTurn,
		Usage: runnel.Usage{Input: 3, Output: 2, Total: 5}, SessionID: req.SessionID}, nil
}

// serve starts the real runnel handler on a loopback socket and returns a
// client of it with the token.
func serve(t *testing.T, r server.Runner, opts ...runnelclient.Option) (*httptest.Server, *runnelclient.Client) {
	t.Helper()
	ts := httptest.NewServer(server.New(r, &server.Options{Token: token, Version: "9.9.9",
		Harnesses: []string{"native"}, Features: []string{"ndjson", "kill"}}))
	t.Cleanup(ts.Close)
	opts = append([]runnelclient.Option{runnelclient.WithToken(token), runnelclient.WithHTTPClient(ts.Client())}, opts...)
	return ts, runnelclient.New(ts.URL+"/", opts...)
}

func hi(text string) *runnel.RunRequest {
	return &runnel.RunRequest{Model: "openai/gpt-test", SessionID: "s1", Messages: []runnel.Message{runnel.UserText(text)}}
}

func TestRunAndStream(t *testing.T) {
	_, c := serve(t, runnerFunc(echo))
	ctx := t.Context()

	res, err := c.Run(ctx, hi("ping"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Output != "echo: ping" || res.SessionID != "s1" || res.RequestID == "" {
		t.Errorf("Run: %+v", res)
	}
	wantEvents := []runnel.EventType{runnel.EventMessage, runnel.EventUsage, runnel.EventDone}
	if diff := cmp.Diff(wantEvents, types(res.Events)); diff != "" {
		t.Errorf("Run events (-want +got):\n%s", diff)
	}

	var got []runnel.Event
	res, err = c.Stream(ctx, hi("pong"), func(e runnel.Event) { got = append(got, e) })
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Output != "echo: pong" || len(res.Events) != 0 {
		t.Errorf("Stream result: %+v", res)
	}
	wantEvents = []runnel.EventType{runnel.EventMessageStart, runnel.EventMessageDelta, runnel.EventMessageEnd, runnel.EventUsage, runnel.EventDone}
	if diff := cmp.Diff(wantEvents, types(got)); diff != "" {
		t.Errorf("Stream events (-want +got):\n%s", diff)
	}
	if got[1].Delta != "echo: pong" || got[3].Usage == nil || got[3].Usage.Total != 5 {
		t.Errorf("Stream events: %+v", got)
	}
	// A nil callback drops the events.
	if res, err := c.Stream(ctx, hi("quiet"), nil); err != nil || res.Output != "echo: quiet" {
		t.Errorf("Stream without a callback: %+v, %v", res, err)
	}
}

func TestHealthCapabilitiesKill(t *testing.T) {
	started := make(chan struct{})
	hang := runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
		close(started)
		<-ctx.Done()
		return &runnel.Result{Status: runnel.StatusCancelled, StopReason: runnel.StopCancelled,
			ErrorCode: runnel.CodeCancelled, Error: "The run was cancelled before it finished."}, nil
	})
	_, c := serve(t, hang)
	ctx := t.Context()

	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&runnelclient.Health{Status: "ok", Runner: "9.9.9", Protocol: server.Protocol,
		Harnesses: []string{"native"}, Features: []string{"ndjson", "kill"}}, h); diff != "" {
		t.Errorf("Health (-want +got):\n%s", diff)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if caps.Runner != "9.9.9" || caps.Limits.MaxBodyBytes != server.DefaultMaxBodyBytes || caps.Limits.ConcurrencyLimit != server.DefaultConcurrencyLimit {
		t.Errorf("Capabilities: %+v", caps)
	}

	if n, err := c.Kill(ctx, "nobody", "p"); err != nil || n != 0 {
		t.Errorf("Kill of no session: %d, %v", n, err)
	}
	type streamed struct {
		res *runnel.Result
		err error
	}
	done := make(chan streamed, 1)
	go func() {
		req := hi("wait")
		req.ProjectID = "p"
		res, err := c.Stream(ctx, req, nil)
		done <- streamed{res, err}
	}()
	<-started
	if n, err := c.Kill(ctx, "s1", "p"); err != nil || n != 1 {
		t.Errorf("Kill: %d, %v; want 1 run killed", n, err)
	}
	got := <-done
	if got.err != nil || got.res.OK || got.res.Status != runnel.StatusCancelled || got.res.ErrorCode != runnel.CodeCancelled {
		t.Errorf("killed stream: %+v, %v", got.res, got.err)
	}
	var rerr *runnelclient.Error
	if _, err := c.Kill(ctx, "", "p"); !errors.As(err, &rerr) || rerr.StatusCode != http.StatusBadRequest || rerr.Code != runnel.CodeInvalidRequest {
		t.Errorf("Kill without a session: %v, want a 400 *Error", err)
	}
}

func TestErrorAnswers(t *testing.T) {
	refuse := runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		return nil, &runnel.Error{Code: runnel.CodeRefused, Message: "Code tools are not supported by the sidecar."}
	})
	ts, c := serve(t, refuse)
	ctx := t.Context()

	// A refusal of a one-shot run is an *Error with runnel's sentence.
	_, err := c.Run(ctx, hi("x"))
	var rerr *runnelclient.Error
	if !errors.As(err, &rerr) || rerr.StatusCode != http.StatusBadRequest || rerr.Code != runnel.CodeRefused ||
		rerr.Message != "Code tools are not supported by the sidecar." || rerr.RequestID == "" || rerr.Result == nil {
		t.Fatalf("Run refused: %#v", err)
	}
	if want := "runnel: HTTP 400: Code tools are not supported by the sidecar. (refused)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// On a stream runnel reports it inside the stream: a failed result.
	res, err := c.Stream(ctx, hi("x"), nil)
	if err != nil || res.OK || res.ErrorCode != runnel.CodeRefused {
		t.Errorf("Stream refused: %+v, %v", res, err)
	}

	// A wrong token: 401, and the token is nowhere in the error.
	bad := runnelclient.New(ts.URL, runnelclient.WithToken("wrong-"+token), runnelclient.WithHTTPClient(ts.Client()))
	for name, call := range map[string]func() error{
		"Run":          func() error { _, err := bad.Run(ctx, hi("x")); return err },
		"Stream":       func() error { _, err := bad.Stream(ctx, hi("x"), nil); return err },
		"Kill":         func() error { _, err := bad.Kill(ctx, "s", "p"); return err },
		"Capabilities": func() error { _, err := bad.Capabilities(ctx); return err },
	} {
		err := call()
		if !errors.As(err, &rerr) || rerr.StatusCode != http.StatusUnauthorized || rerr.Code != runnel.CodeUnauthorized {
			t.Errorf("%s with a wrong token: %v, want a 401 *Error", name, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the error carries the token", name)
		}
	}
	// /health needs none.
	if _, err := bad.Health(ctx); err != nil {
		t.Errorf("Health: %v", err)
	}
}

// brokenServer answers /run with handler; the client reads it as runnel.
func brokenServer(t *testing.T, handler http.HandlerFunc, opts ...runnelclient.Option) *runnelclient.Client {
	t.Helper()
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	return runnelclient.New(ts.URL, append([]runnelclient.Option{runnelclient.WithHTTPClient(ts.Client())}, opts...)...)
}

func ndjson(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	for _, l := range lines {
		io.WriteString(w, l+"\n")
		http.NewResponseController(w).Flush()
	}
}

const (
	eventLine  = `{"kind":"event","event":{"type":"message_start","id":"m1"}}`
	resultLine = `{"kind":"result","result":{"ok":true,"status":"completed","output":"hi","messages":[],"usage":{"input":0,"output":0,"total":0,"cost":0},"interactions":[]}}`
)

// TestStreamFromBrokenServers feeds the client streams runnel never
// writes: each must end the call with an error that says what went wrong,
// without hanging and without leaving a goroutine behind (TestMain).
func TestStreamFromBrokenServers(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		opts    []runnelclient.Option
		want    string
	}{
		{"garbage line", func(w http.ResponseWriter, r *http.Request) {
			ndjson(w, eventLine, "<html>proxy error</html>", resultLine)
		}, nil, "runnel: stream line 2 is not a record"},
		{"unknown record kind", func(w http.ResponseWriter, r *http.Request) {
			ndjson(w, `{"kind":"progress","progress":1}`, resultLine)
		}, nil, "runnel: stream line 1 is neither an event nor a result record"},
		{"a member twice", func(w http.ResponseWriter, r *http.Request) {
			ndjson(w, `{"kind":"event","kind":"result","event":{"type":"done","stopReason":"end_turn"}}`)
		}, nil, "runnel: stream line 1 is not a record"},
		{"record after the result", func(w http.ResponseWriter, r *http.Request) {
			ndjson(w, resultLine, eventLine)
		}, nil, "runnel: stream line 2: a record after the result"},
		{"huge line", func(w http.ResponseWriter, r *http.Request) {
			// A line that never ends: the client must give up at its
			// bound rather than buffer it all.
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, `{"kind":"event","event":{"type":"message_delta","id":"m1","delta":"`)
			chunk := strings.Repeat("x", 32<<10)
			for r.Context().Err() == nil {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		}, []runnelclient.Option{runnelclient.WithMaxRecordBytes(1 << 20)}, "runnel: a stream line is longer than 1048576 bytes"},
		{"connection cut", func(w http.ResponseWriter, r *http.Request) {
			ndjson(w, eventLine)
			panic(http.ErrAbortHandler) // the connection closes mid-body
		}, nil, "runnel: reading the stream: unexpected EOF"},
		{"no result", func(w http.ResponseWriter, r *http.Request) {
			ndjson(w, eventLine, "")
		}, nil, "runnel: the stream ended without its result record"},
		{"not NDJSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html></html>")
		}, nil, `runnel: /run answered "text/html", not application/x-ndjson`},
		{"a proxy's error page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		}, nil, "runnel: HTTP 502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := brokenServer(t, tt.handler, tt.opts...)
			var events int
			res, err := c.Stream(t.Context(), hi("x"), func(runnel.Event) { events++ })
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Stream: %+v, %v; want an error starting %q", res, err, tt.want)
			}
			if res != nil {
				t.Errorf("Stream returned a result with its error: %+v", res)
			}
		})
	}
}

// TestStreamSkipsKeepAlives reads blank lines as keep-alives and passes an
// event type it does not know on to the callback.
func TestStreamSkipsKeepAlives(t *testing.T) {
	c := brokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		ndjson(w, "", eventLine, "", "  ", `{"kind":"event","event":{"type":"hologram","id":"h1"}}`, resultLine, "")
	})
	var got []runnel.EventType
	res, err := c.Stream(t.Context(), hi("x"), func(e runnel.Event) { got = append(got, e.Type) })
	if err != nil || res.Output != "hi" {
		t.Fatalf("Stream: %+v, %v", res, err)
	}
	if diff := cmp.Diff([]runnel.EventType{runnel.EventMessageStart, "hologram"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestRunBoundsTheAnswer refuses a one-shot answer over the bound.
func TestRunBoundsTheAnswer(t *testing.T) {
	c := brokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"output":"`+strings.Repeat("x", 4096)+`"}`)
	}, runnelclient.WithMaxRecordBytes(1024))
	if _, err := c.Run(t.Context(), hi("x")); err == nil || !strings.Contains(err.Error(), "larger than 1024 bytes") {
		t.Errorf("Run: %v, want the answer refused as too large", err)
	}
}

func types(events []runnel.Event) []runnel.EventType {
	var out []runnel.EventType
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}
