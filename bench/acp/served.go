package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
)

// errUnexpected marks a turn that did not do what its script says.
var errUnexpected = errors.New("unexpected turn")

// servedTurn is a turn as a platform runs it: one streaming POST /run to
// `runnel serve`, read as NDJSON until the result record.
type servedTurn struct {
	srv    *benchkit.Runnel
	client *http.Client
	body   []byte
	// cpu reads runnel's CPU time and its agents'; procCPU unless set.
	cpu func() (benchkit.CPU, error)
}

func newServedTurn(srv *benchkit.Runnel, req *runnel.RunRequest) *servedTurn {
	body, err := json.Marshal(req)
	if err != nil {
		panic(err) // a RunRequest of strings and slices always encodes
	}
	return &servedTurn{srv: srv, client: &http.Client{Transport: &http.Transport{}}, body: body,
		cpu: func() (benchkit.CPU, error) { return procCPU(srv.PID()) }}
}

func (s *servedTurn) name() string { return "through runnel" }

func (s *servedTurn) turn(ctx context.Context) (turnTimes, error) {
	var t turnTimes
	cpu0, err := s.cpu()
	if err != nil {
		return t, err
	}
	rs, err := postRun(ctx, s.client, s.srv.URL, s.body)
	if err != nil {
		return t, err
	}
	// runnel writes the result once the agent is gone and reaped, so its
	// CPU is in runnel's cutime+cstime by now.
	cpu1, err := s.cpu()
	if err != nil {
		return t, err
	}
	t.FirstText, t.End, t.CPU = rs.firstText, rs.end, cpu1.Sub(cpu0)
	if r := rs.result; r.Status != runnel.StatusCompleted || r.Output != helloText || t.FirstText == 0 {
		return t, fmt.Errorf("%w: status %s, output %q (error: %s)", errUnexpected, r.Status, r.Output, r.Error)
	}
	return t, nil
}

// runStream is what the caller read of one POST /run.
type runStream struct {
	// firstText is when the first message_delta event arrived (0: none);
	// end when the result record did, both from just before the request.
	firstText, end time.Duration
	toolResults    int
	result         *runnel.Result
}

// postRun sends body as a streaming POST /run and reads every NDJSON
// record until the result.
func postRun(ctx context.Context, client *http.Client, url string, body []byte) (runStream, error) {
	var rs runStream
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/run", bytes.NewReader(body))
	if err != nil {
		return rs, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return rs, fmt.Errorf("POST /run: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return rs, fmt.Errorf("POST /run: HTTP %d: %s", resp.StatusCode, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue // keep-alive
		}
		var rec struct {
			Kind   string         `json:"kind"`
			Event  *runnel.Event  `json:"event"`
			Result *runnel.Result `json:"result"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return rs, fmt.Errorf("NDJSON line %q: %w", line, err)
		}
		switch {
		case rec.Event != nil && rec.Event.Type == runnel.EventMessageDelta && rs.firstText == 0:
			rs.firstText = time.Since(start)
		case rec.Event != nil && rec.Event.Type == runnel.EventToolResult:
			rs.toolResults++
		case rec.Kind == "result" && rec.Result != nil:
			rs.end, rs.result = time.Since(start), rec.Result
			return rs, nil
		}
	}
	if err := sc.Err(); err != nil {
		return rs, fmt.Errorf("reading the run's stream: %w", err)
	}
	return rs, fmt.Errorf("%w: the stream ended without a result record", errUnexpected)
}
