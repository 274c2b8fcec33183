package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

// openStream posts hiRequest asking for NDJSON and returns the response
// with a line reader on its body.
func openStream(ctx context.Context, t *testing.T, url string, client *http.Client) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/run", strings.NewReader(hiRequest))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

func readRecord(t *testing.T, br *bufio.Reader) (Record, string) {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a record: %v (got %q)", err, line)
	}
	if line == "\n" {
		return Record{}, line
	}
	var rec Record
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("record %q: %v", line, err)
	}
	return rec, line
}

func TestNDJSONStreamsEventsAsTheyHappen(t *testing.T) {
	second := make(chan struct{})
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
		// The test has read the first event before the second exists; a
		// failed test cancels ctx (t.Context), so the handler never hangs.
		select {
		case <-second:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: "hi"})
		sink.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m1"})
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: "hi",
			Events: []runnel.Event{{Type: runnel.EventMessage, Text: "must not be repeated"}}}, nil
	}), nil)
	resp, br := openStream(t.Context(), t, ts.URL, ts.Client())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for h, want := range map[string]string{"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	_, first := readRecord(t, br)
	if want := `{"kind":"event","event":{"type":"message_start","id":"m1"}}` + "\n"; first != want {
		t.Fatalf("first line %q, want %q", first, want)
	}
	close(second)
	var got []string
	for {
		_, line := readRecord(t, br)
		if line == "\n" {
			continue
		}
		got = append(got, line)
		if strings.HasPrefix(line, `{"kind":"result"`) {
			break
		}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the result record: %q, %v", rest, err)
	}
	id := resp.Header.Get("X-Request-Id")
	want := []string{
		`{"kind":"event","event":{"type":"message_delta","id":"m1","delta":"hi"}}` + "\n",
		`{"kind":"event","event":{"type":"message_end","id":"m1"}}` + "\n",
		`{"kind":"result","result":{"ok":true,"status":"completed","output":"hi","messages":null,"usage":{"input":0,"output":0,"total":0,"cost":0},"interactions":null,"requestId":"` + id + `"}}` + "\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestNDJSONKeepAliveAfterSilence(t *testing.T) {
	sawBlank := make(chan struct{})
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventToolCall, ID: "c1", Name: "bash"})
		// A long tool call: silence until the client saw a keep-alive. A
		// failed test cancels ctx (t.Context), so the handler never hangs.
		select {
		case <-sawBlank:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sink.Emit(runnel.Event{Type: runnel.EventToolResult, ID: "c1", Output: json.RawMessage(`"ok"`)})
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted}, nil
	}), &Options{KeepAlive: time.Millisecond})
	_, br := openStream(t.Context(), t, ts.URL, ts.Client())
	// With so short an interval a keep-alive may also come before the
	// first event; what matters is that silence after it brings one.
	rec, line := readRecord(t, br)
	for line == "\n" {
		rec, line = readRecord(t, br)
	}
	if rec.Event == nil || rec.Event.Type != runnel.EventToolCall {
		t.Fatalf("first record %q, want the tool_call", line)
	}
	if _, line := readRecord(t, br); line != "\n" {
		t.Fatalf("after silence got %q, want a blank keep-alive line", line)
	}
	close(sawBlank)
	var kinds []string
	for {
		rec, line := readRecord(t, br)
		if line == "\n" {
			continue
		}
		kinds = append(kinds, rec.Kind)
		if rec.Kind == RecordResult {
			break
		}
	}
	if diff := cmp.Diff([]string{RecordEvent, RecordResult}, kinds); diff != "" {
		t.Errorf("records after the keep-alive (-want +got):\n%s", diff)
	}
}

func TestNDJSONStatusBeforeTheFirstByte(t *testing.T) {
	tests := []struct {
		name   string
		runner Runner
		status int
		ctype  string
		want   func(id string) string
	}{
		// A refusal is answered inside the stream: stream clients drop the
		// body of a 4xx, and the person would see only "HTTP 400".
		{"refusal", resultRunner(nil, runnel.Errorf(runnel.CodeRefused, "Filesystem sandbox policy is not enforceable")),
			200, "application/x-ndjson", func(id string) string {
				return `{"kind":"event","event":{"type":"error","message":"Filesystem sandbox policy is not enforceable","code":"refused"}}` + "\n" +
					`{"kind":"event","event":{"type":"done","stopReason":"error"}}` + "\n" +
					`{"kind":"result","result":{"ok":false,"status":"failed","output":"","messages":[],"usage":{"input":0,"output":0,"total":0,"cost":0},"stopReason":"error","interactions":[],"requestId":"` +
					id + `","error":"Filesystem sandbox policy is not enforceable","errorCode":"refused"}}` + "\n"
			}},
		{"internal failure before the run", resultRunner(nil, errors.New("workspace: disk full")),
			200, "application/x-ndjson", func(id string) string {
				return `{"kind":"event","event":{"type":"error","message":"internal error (request ` + id + `)","code":"internal"}}` + "\n" +
					`{"kind":"event","event":{"type":"done","stopReason":"error"}}` + "\n" +
					`{"kind":"result","result":{"ok":false,"status":"failed","output":"","messages":[],"usage":{"input":0,"output":0,"total":0,"cost":0},"stopReason":"error","interactions":[],"requestId":"` +
					id + `","error":"internal error (request ` + id + `)","errorCode":"internal"}}` + "\n"
			}},
		{"failed result without events", resultRunner(&runnel.Result{Status: runnel.StatusFailed, Error: "model said no", ErrorCode: runnel.CodeProviderError}, nil),
			500, "application/x-ndjson", func(id string) string {
				return `{"kind":"result","result":{"ok":false,"status":"failed","output":"","messages":null,"usage":{"input":0,"output":0,"total":0,"cost":0},"interactions":null,"requestId":"` +
					id + `","error":"model said no","errorCode":"provider_error"}}` + "\n"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, tt.runner, nil)
			resp, body := do(t, ts, http.MethodPost, "/run", hiRequest, "Accept", "application/x-ndjson")
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type %q, want %q", got, tt.ctype)
			}
			if diff := cmp.Diff(tt.want(resp.Header.Get("X-Request-Id")), string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNDJSONFailureAfterTheFirstByte(t *testing.T) {
	tests := []struct {
		name   string
		res    *runnel.Result
		err    error
		events []runnel.Event // after the first
		result *runnel.Result
	}{
		{name: "failed result", res: &runnel.Result{Status: runnel.StatusFailed, Error: "stream cut", ErrorCode: runnel.CodeProviderError},
			result: &runnel.Result{Status: runnel.StatusFailed, Error: "stream cut", ErrorCode: runnel.CodeProviderError}},
		{name: "late refusal", err: runnel.Errorf(runnel.CodeRefused, "no"),
			events: []runnel.Event{{Type: runnel.EventError, Message: "no", Code: runnel.CodeRefused}, {Type: runnel.EventDone, StopReason: runnel.StopError}},
			result: &runnel.Result{Status: runnel.StatusFailed, Messages: []runnel.Message{}, Interactions: []runnel.Interaction{},
				StopReason: runnel.StopError, Error: "no", ErrorCode: runnel.CodeRefused}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
				sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
				return tt.res, tt.err
			}), nil)
			resp, body := do(t, ts, http.MethodPost, "/run", hiRequest, "Accept", "application/json, application/x-ndjson;q=0.9")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200 once streaming: %s", resp.StatusCode, body)
			}
			var events []runnel.Event
			var results []*runnel.Result
			for line := range strings.Lines(string(body)) {
				var rec Record
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("record %q: %v", line, err)
				}
				if rec.Event != nil {
					events = append(events, *rec.Event)
				}
				if rec.Result != nil {
					results = append(results, rec.Result)
				}
			}
			wantEvents := append([]runnel.Event{{Type: runnel.EventMessageStart, ID: "m1"}}, tt.events...)
			if diff := cmp.Diff(wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			want := *tt.result
			want.RequestID = resp.Header.Get("X-Request-Id")
			if diff := cmp.Diff([]*runnel.Result{&want}, results); diff != "" {
				t.Errorf("result records (-want +got):\n%s", diff)
			}
		})
	}
}

// blockingRunner reports when it starts, waits for the run's context to
// end, and reports what ended it.
func blockingRunner(started chan<- struct{}, ended chan<- error) Runner {
	return runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return &runnel.Result{Status: runnel.StatusCancelled, ErrorCode: runnel.CodeCancelled, StopReason: runnel.StopCancelled}, nil
	})
}

func TestClientDisconnectCancelsTheRun(t *testing.T) {
	t.Run("one-shot, connection closed", func(t *testing.T) {
		started, ended := make(chan struct{}), make(chan error, 1)
		ts := newTestServer(t, blockingRunner(started, ended), nil)
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			len(hiRequest), hiRequest)
		recv(t, started, "the run to start")
		conn.Close()
		if err := recv(t, ended, "the run to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("the run ended with %v, want context.Canceled", err)
		}
	})
	t.Run("NDJSON, request cancelled mid-stream", func(t *testing.T) {
		started, ended := make(chan struct{}), make(chan error, 1)
		ts := newTestServer(t, blockingRunner(started, ended), nil)
		ctx, cancel := context.WithCancel(t.Context())
		_, br := openStream(ctx, t, ts.URL, ts.Client())
		if rec, _ := readRecord(t, br); rec.Kind != RecordEvent {
			t.Fatalf("first record %+v", rec)
		}
		recv(t, started, "the run to start")
		cancel()
		if err := recv(t, ended, "the run to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("the run ended with %v, want context.Canceled", err)
		}
	})
}

func TestNDJSONWriterDropsAfterTheResult(t *testing.T) {
	var b strings.Builder
	nw := NewNDJSONWriter(&b, nil)
	nw.Emit(runnel.Event{Type: runnel.EventDone, StopReason: "end_turn"})
	if err := nw.WriteResult(&runnel.Result{OK: true, Status: runnel.StatusCompleted,
		Events: []runnel.Event{{Type: runnel.EventDone}}}); err != nil {
		t.Fatal(err)
	}
	nw.Emit(runnel.Event{Type: runnel.EventDone, StopReason: "late"})
	want := `{"kind":"event","event":{"type":"done","stopReason":"end_turn"}}
{"kind":"result","result":{"ok":true,"status":"completed","output":"","messages":null,"usage":{"input":0,"output":0,"total":0,"cost":0},"interactions":null}}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

func TestNDJSONWriterSkipsAnUnencodableEvent(t *testing.T) {
	var b strings.Builder
	nw := NewNDJSONWriter(&b, nil)
	nw.Emit(runnel.Event{Type: "bogus"})
	nw.Emit(runnel.Event{Type: runnel.EventDone, StopReason: "end_turn"})
	if nw.Err() == nil {
		t.Error("no error for an event that cannot be encoded")
	}
	if want := `{"kind":"event","event":{"type":"done","stopReason":"end_turn"}}` + "\n"; b.String() != want {
		t.Errorf("stream %q, want %q", b.String(), want)
	}
}

func TestNDJSONWriterStopsAfterAWriteFailure(t *testing.T) {
	w := &failingWriter{}
	nw := NewNDJSONWriter(w, nil)
	nw.Emit(runnel.Event{Type: runnel.EventDone})
	nw.Emit(runnel.Event{Type: runnel.EventDone})
	if err := nw.WriteResult(&runnel.Result{}); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("WriteResult: %v, want the write failure", err)
	}
	if w.calls != 1 {
		t.Errorf("%d writes after the destination failed, want 1", w.calls)
	}
}

type failingWriter struct{ calls int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.calls++
	return 0, io.ErrClosedPipe
}

// TestNDJSONWriterLinesNeverInterleave runs events and keep-alives at once
// (under -race this also checks the locking).
func TestNDJSONWriterLinesNeverInterleave(t *testing.T) {
	var b lockedBuilder
	nw := NewNDJSONWriter(&b, nil)
	stop := nw.keepAlive(1, ndjsonBeat)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				nw.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: fmt.Sprint(i), Delta: strings.Repeat("x", j)})
			}
		})
	}
	wg.Wait()
	stop()
	n := 0
	for line := range strings.Lines(b.String()) {
		if line == "\n" {
			continue
		}
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		n++
	}
	if n != 200 {
		t.Errorf("%d records, want 200", n)
	}
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSlowBodyIsRefused(t *testing.T) {
	ts := newTestServer(t, helloRunner(), &Options{BodyTimeout: time.Nanosecond})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Ten of the announced hundred bytes: only the deadline can end the read.
	fmt.Fprintf(conn, "POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"model\":")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if got := decodeResult(t, body); resp.StatusCode != http.StatusBadRequest ||
		got.Error != "the request body did not arrive within 1ns; send the whole body at once" {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}

// slowClient sends one request on a raw connection with a tiny receive
// buffer and then reads nothing, as a client that stopped reading does.
// The connection is closed when the test ends.
func slowClient(t *testing.T, addr, accept string) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		accept, len(hiRequest), hiRequest)
}

// TestClientThatStopsReadingIsGone: every write has a deadline, so a
// client that stops reading its stream is treated as gone and its run is
// cancelled, instead of holding the run (and its deadline, which cannot
// fire while the sink blocks) for ever.
func TestClientThatStopsReadingIsGone(t *testing.T) {
	cause := make(chan error, 1)
	chunk := strings.Repeat("x", 64<<10)
	srv := New(runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m"})
		for ctx.Err() == nil {
			sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m", Delta: chunk})
		}
		cause <- context.Cause(ctx)
		return &runnel.Result{Status: runnel.StatusCancelled, ErrorCode: runnel.CodeCancelled}, nil
	}), &Options{WriteTimeout: 100 * time.Millisecond})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	slowClient(t, ts.Listener.Addr().String(), "application/x-ndjson")
	// Which cause wins depends on who notices first: the failed write
	// (errClientGone) or net/http closing the broken connection, which
	// cancels the request's context. Either way the run ends.
	if err := recv(t, cause, "the run to be cancelled"); !errors.Is(err, errClientGone) && !errors.Is(err, context.Canceled) {
		t.Errorf("the run ended because of %v, want the client gone", err)
	}
}

// TestOneShotAnswerToAClientThatDoesNotRead: the one JSON answer is
// written under the deadline too, so the handler ends.
func TestOneShotAnswerToAClientThatDoesNotRead(t *testing.T) {
	huge := strings.Repeat("y", 32<<20)
	srv := New(runnerFunc(func(context.Context, *runnel.RunRequest, runnel.Sink) (*runnel.Result, error) {
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: huge}, nil
	}), &Options{WriteTimeout: 100 * time.Millisecond})
	done := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	slowClient(t, ts.Listener.Addr().String(), "application/json")
	recv(t, done, "the handler to give up on the client")
}

// Emit assembles the event record around the event's own encoding; the
// bytes must be those json.Marshal writes for the whole record.
func TestEmitWritesWhatMarshalWould(t *testing.T) {
	odd := `<a href="x">&` + "\u2028 \xff \"q\"\n"
	for _, e := range []runnel.Event{
		{Type: runnel.EventMessageStart, ID: "m<1>"},
		{Type: runnel.EventMessageDelta, ID: "m1", Delta: odd},
		{Type: runnel.EventThoughtDelta, ID: "t1", Delta: ""},
		{Type: runnel.EventMessage, Text: odd},
		{Type: runnel.EventToolCall, ID: "c1", Name: "f&g", Input: json.RawMessage(`{"a": "<b>"}`)},
		{Type: runnel.EventToolResult, ID: "c1", Name: "f", Output: json.RawMessage(` "x" `), IsError: true},
		{Type: runnel.EventUsage, Usage: &runnel.Usage{Input: 1, Output: 2, Total: 3}},
		{Type: runnel.EventError, Message: odd, Code: runnel.CodeInternal},
		{Type: runnel.EventDone, StopReason: runnel.StopEndTurn, TraceID: "abc"},
		{Type: runnel.EventNotice, Text: "n"},
	} {
		var buf bytes.Buffer
		NewNDJSONWriter(&buf, nil).Emit(e)
		want, err := json.Marshal(Record{Kind: RecordEvent, Event: &e})
		if err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != string(want)+"\n" {
			t.Errorf("%s event:\n got %s\nwant %s", e.Type, got, want)
		}
	}
	var buf bytes.Buffer
	w := NewNDJSONWriter(&buf, nil)
	w.Emit(runnel.Event{Type: "future_type"})
	if buf.Len() != 0 || w.Err() == nil {
		t.Errorf("an event that cannot be encoded: wrote %q, Err %v", buf.String(), w.Err())
	}
}
