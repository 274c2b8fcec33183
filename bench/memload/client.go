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
		"messages": []map[string]string{{"role": "user", "content": prompt}},
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
// received its first NDJSON record. The streams stay open, read to the
// end, until ctx is cancelled; wait waits for them to be gone.
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
		return errors.Join(all...)
	}
	deadline := time.NewTimer(firstEventDeadline)
	defer deadline.Stop()
	for got := 0; got < n; got++ {
		select {
		case err := <-first:
			if err != nil {
				return wait, fmt.Errorf("stream %d of %d: %w", got+1, n, err)
			}
		case <-deadline.C:
			return wait, fmt.Errorf("only %d of %d streams had their first event after %s", got, n, firstEventDeadline)
		case <-ctx.Done():
			return wait, ctx.Err()
		}
	}
	return wait, nil
}

// stream runs one streaming request: it reports its first record (or its
// failure) on first, then reads until the stream ends or ctx is cancelled.
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
		if err != nil {
			if !reported {
				first <- fmt.Errorf("stream ended before its first event: %w", err)
			}
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if reported || len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		reported = true
		if !bytes.Contains(line, []byte(`"kind":"event"`)) {
			err := fmt.Errorf("first record is not an event: %s", line)
			first <- err
			return err
		}
		first <- nil
	}
}
