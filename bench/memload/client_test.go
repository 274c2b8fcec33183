package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// ndjsonServer answers every POST /run with the records, flushed, and
// then, when hold is set, keeps the stream open until the client leaves.
func ndjsonServer(t *testing.T, hold bool, records ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, rec := range records {
			fmt.Fprintln(w, rec)
		}
		http.NewResponseController(w).Flush()
		if hold {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

const (
	messageStart = `{"kind":"event","event":{"type":"message_start","id":"msg_1"}}`
	errorEvent   = `{"kind":"event","event":{"type":"error","message":"openai chat completions: the request failed: connection refused","code":"provider_error"}}`
	doneError    = `{"kind":"event","event":{"type":"done","stopReason":"error"}}`
	failedResult = `{"kind":"result","result":{"ok":false,"status":"failed","error":"connection refused"}}`
)

// TestErrorFirstEventIsAFailure is the bug an outside re-measurement found:
// a run whose first record was an error event counted as an open stream.
func TestErrorFirstEventIsAFailure(t *testing.T) {
	srv := ndjsonServer(t, false, errorEvent, doneError, failedResult)
	c := newClient(srv.URL, "http://127.0.0.1:1", 3)
	defer c.close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wait, err := c.openStreams(ctx, 3)
	if err == nil || !strings.Contains(err.Error(), "3 of 3 runs failed") || !strings.Contains(err.Error(), "provider_error") {
		t.Errorf("openStreams = %v, want 3 of 3 runs failed with the error event's code", err)
	}
	cancel()
	_ = wait()
}

func TestHealthyStreamsCount(t *testing.T) {
	srv := ndjsonServer(t, true, messageStart)
	c := newClient(srv.URL, "http://127.0.0.1:1", 3)
	defer c.close()
	ctx, cancel := context.WithCancel(t.Context())
	wait, err := c.openStreams(ctx, 3)
	if err != nil {
		t.Fatalf("openStreams: %v", err)
	}
	cancel()
	if err := wait(); err != nil {
		t.Errorf("wait after cancelling healthy streams: %v", err)
	}
}

// TestRunEndedBeforeMeasurement: a run that started well but ended before
// the load was cancelled no longer holds its memory; wait reports it.
func TestRunEndedBeforeMeasurement(t *testing.T) {
	srv := ndjsonServer(t, false, messageStart, errorEvent, failedResult)
	c := newClient(srv.URL, "http://127.0.0.1:1", 2)
	defer c.close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wait, err := c.openStreams(ctx, 2)
	if err != nil {
		t.Fatalf("openStreams: %v", err)
	}
	// Cancelling at once could hide the error from wait; the streams here
	// end by themselves, so wait for them first.
	if err := wait(); err == nil || !strings.Contains(err.Error(), "2 of 2 runs failed or ended early") {
		t.Errorf("wait = %v, want both runs reported", err)
	}
}

func TestFirstRecord(t *testing.T) {
	for _, c := range []struct {
		line    string
		healthy bool
	}{
		{messageStart, true},
		{`{"kind":"event","event":{"type":"message_delta","id":"msg_1","delta":"lorem "}}`, true},
		{`{"kind":"event","event":{"type":"thought_start","id":"th_1"}}`, true},
		{errorEvent, false},
		{doneError, false},
		{failedResult, false},
		{`{"kind":"event","event":{"type":"notice","message":"no attachments URL"}}`, false},
		{`{"kind":"event","event":{"type":"usage","input":1}}`, false},
		{`not json`, false},
	} {
		err := firstRecord([]byte(c.line))
		if (err == nil) != c.healthy {
			t.Errorf("firstRecord(%s) = %v, want healthy %v", c.line, err, c.healthy)
		}
	}
	if err := firstRecord([]byte(failedResult)); !errors.Is(err, errEndedEarly) {
		t.Errorf("a result first = %v, want errEndedEarly", err)
	}
}
