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
	"strings"
	"sync"
	"time"
)

// firstEventDeadline bounds the wait for every stream's first event.
const firstEventDeadline = 60 * time.Second

// client is the load client: one HTTP/1.1 connection per open stream.
type client struct {
	url    string
	llmURL string
	http   *http.Client
	// history is replayed before the prompt of every run (-history-kb).
	history []map[string]string
}

func newClient(serveURL, llmURL string, n int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = n + 10
	tr.MaxIdleConnsPerHost = n + 10
	tr.MaxConnsPerHost = 0 // one connection per concurrent stream
	return &client{url: serveURL, llmURL: llmURL, http: &http.Client{Transport: tr}}
}

func (c *client) closeIdle() { c.http.CloseIdleConnections() }
func (c *client) close()     { c.http.CloseIdleConnections() }

// body is a run request against the fake model; prompt picks its rule.
func (c *client) body(prompt string) []byte {
	raw, err := json.Marshal(map[string]any{
		"model":    "openai/bench-model",
		"endpoint": map[string]string{"baseUrl": c.llmURL + "/v1"},
		"secrets":  map[string]string{"OPENAI_API_KEY": "sk-bench-0123456789abcdef0123456789abcdef"},
		"tools":    []string{},
		"messages": append(c.history[:len(c.history):len(c.history)], map[string]string{"role": "user", "content": prompt}),
	})
	if err != nil {
		panic(err) // literal strings always encode
	}
	return raw
}

func (c *client) post(ctx context.Context, prompt string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/run", bytes.NewReader(c.body(prompt)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		resp.Body.Close()
		return nil, fmt.Errorf("POST /run: HTTP %d: %s", resp.StatusCode, msg)
	}
	return resp, nil
}

// quickRun is one short streaming run, read to its end.
func (c *client) quickRun(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.post(ctx, "warm up")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if !bytes.Contains(all, []byte(`"kind":"result"`)) || !bytes.Contains(all, []byte(`"status":"completed"`)) {
		return fmt.Errorf("warm-up run did not complete: %s", all)
	}
	return nil
}

// openStreams opens n streaming runs at once and returns when every one has
// received a healthy first record (firstRecord), or with an error that
// counts the runs that failed when any did: a run that failed holds no
// memory of an open run, and a figure measured over failures would be
// wrong. The streams stay open, read to the end, until ctx is cancelled;
// wait waits for them to be gone and reports a run that ended or failed
// before then.
func (c *client) openStreams(ctx context.Context, n int) (wait func() error, err error) {
	first := make(chan error, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			errs <- c.stream(ctx, first)
		})
	}
	wait = func() error {
		wg.Wait()
		close(errs)
		var all []error
		for err := range errs {
			if err != nil && !errors.Is(err, context.Canceled) {
				all = append(all, err)
			}
		}
		if len(all) > 0 {
			return fmt.Errorf("%d of %d runs failed or ended early; the first: %w", len(all), n, all[0])
		}
		return nil
	}
	deadline := time.NewTimer(firstEventDeadline)
	defer deadline.Stop()
	failed, ok := 0, 0
	var firstFailure error
	for failed+ok < n {
		select {
		case err := <-first:
			if err == nil {
				ok++
				continue
			}
			if failed++; firstFailure == nil {
				firstFailure = err
			}
		case <-deadline.C:
			return wait, fmt.Errorf("after %s, %d of %d runs had a healthy first event, %d had failed (%v)",
				firstEventDeadline, ok, n, failed, firstFailure)
		case <-ctx.Done():
			return wait, ctx.Err()
		}
	}
	if failed > 0 {
		return wait, fmt.Errorf("%d of %d runs failed instead of streaming; the first: %w", failed, n, firstFailure)
	}
	return wait, nil
}

// errEndedEarly is a run that ended before the load was cancelled: the
// measurement assumes every run is still open.
var errEndedEarly = errors.New("the run ended before the measurement")

// stream runs one streaming request: it reports on first whether its first
// record is a healthy one (or the request's failure), then reads until ctx
// is cancelled. A run whose stream ends, or that reports an error, before
// then is a failure.
func (c *client) stream(ctx context.Context, first chan<- error) error {
	resp, err := c.post(ctx, "stream slowly")
	if err != nil {
		first <- err
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	reported := false
	for {
		line, err := r.ReadBytes('\n')
		if ctx.Err() != nil {
			return nil // the load is over: whatever came last does not count
		}
		if err != nil {
			err = fmt.Errorf("%w: the stream ended: %w", errEndedEarly, err)
			if !reported {
				first <- err
			}
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // keep-alive
		}
		if !reported {
			reported = true
			err := firstRecord(line)
			first <- err
			if err != nil {
				return err
			}
			continue
		}
		if err := laterRecord(line); err != nil {
			return err
		}
	}
}

// The events that show a run's model answer has begun to stream: the only
// first records that count. The benchmark's runs have no tools, no files
// and a model that answers text at once, so a healthy run's first record
// is message_start (thought_* if a model reasoned first).
var healthyFirst = map[string]bool{
	"message_start": true, "message_delta": true,
	"thought_start": true, "thought_delta": true,
}

// ndjsonRecord is what the load client reads of one NDJSON record.
type ndjsonRecord struct {
	Kind  string `json:"kind"`
	Event struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"event"`
	Result *struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"result"`
}

// firstRecord says whether line, a run's first NDJSON record, is a healthy
// first event: a record of kind "event" whose type is in healthyFirst.
// Anything else fails the run: an error event, a done event, a notice, a
// result record, a line that is not a record.
func firstRecord(line []byte) error {
	var rec ndjsonRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return fmt.Errorf("first record is not JSON: %w: %.200s", err, line)
	}
	if rec.Kind == "event" && healthyFirst[rec.Event.Type] {
		return nil
	}
	if err := laterRecord(line); err != nil {
		return err
	}
	return fmt.Errorf("first record is not the start of an answer: %.200s", line)
}

// laterRecord fails the run on a record that shows it failed or ended: an
// error event, or the result record.
func laterRecord(line []byte) error {
	if !bytes.Contains(line, []byte(`"type":"error"`)) && !bytes.Contains(line, []byte(`"kind":"result"`)) {
		return nil // the common case, a delta, without decoding it
	}
	var rec ndjsonRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return fmt.Errorf("record is not JSON: %w: %.200s", err, line)
	}
	switch {
	case rec.Kind == "event" && rec.Event.Type == "error":
		return fmt.Errorf("the run reported an error: %s (%s)", rec.Event.Message, rec.Event.Code)
	case rec.Kind == "result" && rec.Result != nil:
		return fmt.Errorf("%w: result %s %s", errEndedEarly, rec.Result.Status, rec.Result.Error)
	}
	return nil
}

// withHistory makes every run replay about kb KiB of earlier exchanges,
// a question and an answer each, the same every time.
func (c *client) withHistory(kb int) {
	c.history = nil
	for size, k := 0, 0; size < kb<<10; k++ {
		q := fmt.Sprintf("Earlier question %d: %s", k, strings.Repeat("how does the build read its \"configuration\"?\n", 20))
		a := fmt.Sprintf("Answer %d: %s", k, strings.Repeat("the service reads the file, then waits for the next call.\n", 50))
		c.history = append(c.history, map[string]string{"role": "user", "content": q}, map[string]string{"role": "assistant", "content": a})
		size += len(q) + len(a) + 64
	}
}
