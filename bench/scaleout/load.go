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
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
)

// runTimeout bounds one run seen from the client: far above a run's few
// seconds, so it only ever ends a stuck request.
const runTimeout = 60 * time.Second

// client sends runs to the balancer (or straight to a replica) and reads
// their NDJSON streams. Safe for concurrent use.
type client struct {
	token string
	fakes *fakes
	http  *http.Client
}

func newClient(token string, f *fakes) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1000
	tr.MaxIdleConnsPerHost = 1000 // one connection per concurrent stream, kept
	return &client{token: token, fakes: f, http: &http.Client{Transport: tr}}
}

// outcome is what one request looked like from the client.
type outcome struct {
	start, firstEvent, end time.Time
	// replica is X-Served-By (the balancer's name for the replica that
	// answered, on its own error pages too), or the replica a direct
	// request was sent to; empty when no response came at all.
	replica string
	records int    // NDJSON lines read
	err     string // empty for a good run
}

func (o outcome) ok() bool { return o.err == "" }

// inFlightAt reports whether the request was open at t.
func (o outcome) inFlightAt(t time.Time) bool { return o.start.Before(t) && o.end.After(t) }

// request is a run request as a platform sends it: the fake model, the two
// callback tools, delete_item under "ask", everything else allowed.
func (c *client) request(messages []runnel.Message) []byte {
	schema := func(prop string) map[string]any {
		return map[string]any{"type": "object", "required": []string{prop},
			"properties": map[string]any{prop: map[string]string{"type": "string"}}}
	}
	raw, err := json.Marshal(map[string]any{
		"model":    "openai/bench-model",
		"endpoint": map[string]string{"baseUrl": c.fakes.modelURL},
		"secrets":  map[string]string{"OPENAI_API_KEY": apiKey},
		"tools":    []string{},
		"messages": messages,
		"customTools": []map[string]any{
			{"name": lookupTool, "description": "Look something up", "inputSchema": schema("query")},
			{"name": deleteTool, "description": "Delete a file", "inputSchema": schema("item")},
		},
		"toolCallback": map[string]string{"endpoint": c.fakes.callbackURL},
		"permissions": map[string]any{"default": "allow",
			"rules": []map[string]string{{"pattern": deleteTool, "permission": "ask"}}},
	})
	if err != nil {
		panic(err) // plain maps of strings always encode
	}
	return raw
}

// run posts body to base+"/run" asking for NDJSON and reads the stream to
// its result record. The outcome says what the client saw; res is the
// result when one came.
func (c *client) run(ctx context.Context, base, replica string, body []byte) (res *runnel.Result, o outcome) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	o = outcome{start: time.Now(), replica: replica}
	defer func() { o.end = time.Now() }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/run", bytes.NewReader(body))
	if err != nil {
		o.err = err.Error()
		return nil, o
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		o.err = "no response: " + unwrapURLError(err)
		return nil, o
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("X-Served-By"); s != "" {
		o.replica = s
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		o.err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, firstLine(msg))
		return nil, o
	}
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if o.records++; o.records == 1 {
				o.firstEvent = time.Now()
			}
			if bytes.HasPrefix(line, []byte(`{"kind":"result"`)) {
				var rec struct{ Result *runnel.Result }
				if err := json.Unmarshal(line, &rec); err != nil || rec.Result == nil {
					o.err = fmt.Sprintf("undecodable result record: %v", err)
					return nil, o
				}
				return rec.Result, o
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("EOF (the stream ended cleanly)")
			}
			o.err = "stream cut before the result record: " + unwrapURLError(err)
			return nil, o
		}
	}
}

// loadRun is one run of the load: lookup, its result, a streamed answer.
func (c *client) loadRun(ctx context.Context, base string) outcome {
	res, o := c.run(ctx, base, "", c.request([]runnel.Message{runnel.UserText("Look up how runnel scales out.")}))
	if res != nil {
		if err := checkCompleted(res, "Done: "+lookupOutput); err != nil {
			o.err = err.Error()
		}
	}
	return o
}

// checkCompleted reports a result that is not a completed run whose output
// starts with want.
func checkCompleted(res *runnel.Result, want string) error {
	if !res.OK || res.Status != runnel.StatusCompleted {
		return fmt.Errorf("result %s (%s): %s", res.Status, res.ErrorCode, res.Error)
	}
	if !strings.HasPrefix(res.Output, want) {
		return fmt.Errorf("completed with output %.60q, want it to start with %q", res.Output, want)
	}
	return nil
}

// load keeps workers runs in flight through base until window has passed
// since it started (no run starts after that; the last ones finish), and
// returns every run's outcome. The workers' first runs start spread evenly
// over spread (about one run's length), so that at any moment the runs in
// flight are at every stage, not in lockstep.
func (c *client) load(ctx context.Context, base string, workers int, window, spread time.Duration) []outcome {
	start := time.Now()
	deadline := start.Add(window)
	per := make([][]outcome, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if benchkit.Sleep(ctx, time.Duration(w)*spread/time.Duration(workers)) != nil {
				return
			}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				per[w] = append(per[w], c.loadRun(ctx, base))
			}
		})
	}
	wg.Wait()
	var all []outcome
	for _, p := range per {
		all = append(all, p...)
	}
	return all
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// unwrapURLError drops net/http's "Post \"http://…\": " prefix, which
// would make the same failure on different ports look different.
func unwrapURLError(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err.Error()
	}
	return err.Error()
}
