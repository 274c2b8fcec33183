package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
)

// runner is what the end-to-end tests drive: a *Manager, or the same
// manager behind runnel's HTTP front door (overHTTP).
type runner interface {
	Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error)
}

// httpRunner runs requests the way a platform does: JSON posted to
// /run over a real socket, NDJSON read back. Every event reaches the sink
// as the platform decodes it, and the result is the closing record. A
// refusal comes back as the *runnel.Error it describes, as Manager.Run
// returns it, so the two runners are interchangeable in tests: a 4xx
// before the stream, or a stream that is only the refusal (an error event,
// done, and a failed result whose code is invalid_request or refused),
// whose two events then do not reach the sink.
type httpRunner struct {
	url    string
	client *http.Client
}

// overHTTP serves m through internal/server on a loopback socket for the
// duration of the test.
func overHTTP(t *testing.T, m *Manager) *httpRunner {
	t.Helper()
	hs := httptest.NewServer(server.New(m, nil))
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &httpRunner{url: hs.URL + "/run", client: &http.Client{Transport: tr}}
}

func (h *httpRunner) Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/x-ndjson")
	resp, err := h.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		// A refusal comes before the stream starts, as a whole Result.
		var res runnel.Result
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return nil, fmt.Errorf("HTTP %d with a body that is not a result: %w", resp.StatusCode, err)
		}
		return nil, &runnel.Error{Code: res.ErrorCode, Message: res.Error}
	}
	var res *runnel.Result
	// The first two events are held until they cannot be a refusal's.
	var held []runnel.Event
	holding := true
	emit := func(e runnel.Event) {
		if sink != nil {
			sink.Emit(e)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue // a keep-alive
		}
		var rec server.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("a line that is not a record: %q: %w", sc.Text(), err)
		}
		switch {
		case rec.Kind == server.RecordEvent && rec.Event != nil && holding && len(held) < 2:
			held = append(held, *rec.Event)
		case rec.Kind == server.RecordEvent && rec.Event != nil:
			for _, e := range held {
				emit(e)
			}
			held, holding = nil, false
			emit(*rec.Event)
		case rec.Kind == server.RecordResult && rec.Result != nil:
			res = rec.Result
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("HTTP %d without a result record", resp.StatusCode)
	}
	if refusal(held, res) {
		return nil, &runnel.Error{Code: res.ErrorCode, Message: res.Error}
	}
	for _, e := range held {
		emit(e)
	}
	return res, nil
}

// refusal reports whether a stream was only a refusal: error, done and a
// failed result with a refusal's code.
func refusal(events []runnel.Event, res *runnel.Result) bool {
	return !res.OK && (res.ErrorCode == runnel.CodeInvalidRequest || res.ErrorCode == runnel.CodeRefused) &&
		len(events) == 2 && events[0].Type == runnel.EventError && events[1].Type == runnel.EventDone
}
