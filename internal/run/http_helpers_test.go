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
// as the platform decodes it, and the result is the closing record; a
// refusal (a 4xx before the stream) comes back as the *runnel.Error its
// body describes.
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
		case rec.Kind == server.RecordEvent && rec.Event != nil && sink != nil:
			sink.Emit(*rec.Event)
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
	return res, nil
}
