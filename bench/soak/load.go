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
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// apiKey is the model key every run sends: as long as a real one, so
// runnel's redaction of secrets does real work.
const apiKey = "sk-bench-0123456789abcdef0123456789abcdef"

// client starts runs on runnel serve and checks each one's stream. Safe
// for concurrent use.
type client struct {
	serveURL string
	fakes    *fakes
	kinds    []string // the tool kind of run seq is kinds[seq % len(kinds)]
	paces    int
	http     *http.Client
	timeout  time.Duration
	seq      atomic.Int64
	tally    *tally
}

func newClient(serveURL string, f *fakes, kinds []string, paces, n int, timeout time.Duration) *client {
	tr := &http.Transport{
		Proxy:               nil, // loopback only, whatever the environment says
		MaxIdleConns:        n + 10,
		MaxIdleConnsPerHost: n + 10, // one kept connection per run in flight
		IdleConnTimeout:     90 * time.Second,
	}
	return &client{serveURL: serveURL, fakes: f, kinds: kinds, paces: paces, timeout: timeout,
		http: &http.Client{Transport: tr}, tally: newTally()}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// plan is what one run is: its prompt (unique, so the fake model's
// generated tool call ids are unique too: they are a digest of the
// request) and the tool it offers.
type plan struct {
	seq  int64
	kind string
	pace int
}

func (c *client) next() plan {
	seq := c.seq.Add(1) - 1
	k := int64(len(c.kinds))
	return plan{seq: seq, kind: c.kinds[seq%k], pace: int(seq/k) % c.paces}
}

// request is the run request of p: the fake model, one tool, every tool
// allowed.
func (c *client) request(p plan) []byte {
	schema := func(prop, typ string) map[string]any {
		return map[string]any{"type": "object", "required": []string{prop},
			"properties": map[string]any{prop: map[string]string{"type": typ}}}
	}
	req := map[string]any{
		"model":       "openai/bench-model",
		"endpoint":    map[string]string{"baseUrl": c.fakes.modelURL},
		"secrets":     map[string]string{"OPENAI_API_KEY": apiKey},
		"tools":       []string{},
		"messages":    []map[string]string{{"role": "user", "content": fmt.Sprintf("Soak run %d %s: use the tool, then say what it said.", p.seq, paceTag(p.pace))}},
		"permissions": map[string]any{"default": "allow"},
	}
	switch p.kind {
	case kindCallback:
		req["customTools"] = []map[string]any{{"name": callbackTool, "description": "Look something up", "inputSchema": schema("query", "string")}}
		req["toolCallback"] = map[string]string{"endpoint": c.fakes.callbackURL}
	case kindDirect:
		req["customTools"] = []map[string]any{{"name": directTool, "description": "Fetch an item",
			"inputSchema": schema("item", "string"),
			"call":        map[string]string{"method": http.MethodPost, "path": "/api/items/{item}"}}}
		req["toolCallback"] = map[string]string{"endpoint": c.fakes.callbackURL}
	case kindMCP:
		req["mcpServers"] = []map[string]any{{"name": mcpServer,
			"connection": map[string]string{"type": "http", "url": c.fakes.mcpURL},
			"policy":     map[string]any{"required": true}}}
	}
	raw, err := json.Marshal(req)
	if err != nil {
		panic(err) // plain maps of strings always encode
	}
	return raw
}

// mcpAnswer finds the MCP tool's answer (mcpOutput) in a tool result.
var mcpAnswer = regexp.MustCompile(`mcp call [0-9]+`)

// runError is why a run failed: a short kind to count by, and the detail
// of the first few.
type runError struct {
	kind, detail string
}

func (e *runError) Error() string { return e.kind + ": " + e.detail }

func fail(kind, format string, args ...any) *runError {
	return &runError{kind: kind, detail: fmt.Sprintf(format, args...)}
}

// record is what the client reads of one NDJSON line.
type record struct {
	Kind  string `json:"kind"`
	Event *struct {
		Type       string          `json:"type"`
		ID         string          `json:"id"`
		Name       string          `json:"name"`
		Output     json.RawMessage `json:"output"`
		IsError    bool            `json:"isError"`
		Denied     bool            `json:"denied"`
		Message    string          `json:"message"`
		Code       string          `json:"code"`
		StopReason string          `json:"stopReason"`
	} `json:"event"`
	Result *struct {
		OK         bool   `json:"ok"`
		Status     string `json:"status"`
		Output     string `json:"output"`
		StopReason string `json:"stopReason"`
		Error      string `json:"error"`
		ErrorCode  string `json:"errorCode"`
	} `json:"result"`
}

// seen is what a run's stream showed, for check.
type seen struct {
	calls    []string // tool_call ids
	names    []string // tool_call names
	results  []string // tool_result outputs, as text
	resultOK bool     // every tool_result without isError or denied
	done     string   // the done event's stop reason
	doneN    int
	errors   []string // error events
	result   *record  // the result record
	afterRes int      // records after the result record
}

// run starts one run and reads its stream to the end.
func (c *client) run(parent context.Context, p plan) *runError {
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	// ended says why the run's context ended, if it did: the soak's end
	// (Ctrl-C, the hard deadline) is not the run's failure to finish.
	ended := func() *runError {
		switch {
		case parent.Err() != nil:
			return fail("cut short", "the soak ended with the run open: %v", context.Cause(parent))
		case ctx.Err() != nil:
			return fail("client timeout", "the run was still open after %s", c.timeout)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.serveURL+"/run", bytes.NewReader(c.request(p)))
	if err != nil {
		return fail("request", "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		if e := ended(); e != nil {
			return e
		}
		return fail("no response", "%s", unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fail(fmt.Sprintf("HTTP %d", resp.StatusCode), "%s", bytes.TrimSpace(msg))
	}
	var s seen
	s.resultOK = true
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := r.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if e := s.add(t); e != nil {
				return e
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if e := ended(); e != nil {
				return e
			}
			return fail("stream cut", "%s", unwrapURLError(err))
		}
	}
	return c.check(p, &s)
}

// add reads one record into s.
func (s *seen) add(line []byte) *runError {
	if s.result != nil {
		s.afterRes++
	}
	var rec record
	if err := json.Unmarshal(line, &rec); err != nil {
		return fail("bad record", "%v: %.200s", err, line)
	}
	switch {
	case rec.Kind == "result" && rec.Result != nil:
		if s.result == nil {
			s.result = &rec
		}
	case rec.Kind == "event" && rec.Event != nil:
		e := rec.Event
		switch e.Type {
		case "tool_call":
			s.calls, s.names = append(s.calls, e.ID), append(s.names, e.Name)
		case "tool_result":
			s.results = append(s.results, outputText(e.Output))
			s.resultOK = s.resultOK && !e.IsError && !e.Denied
		case "done":
			s.done, s.doneN = e.StopReason, s.doneN+1
		case "error":
			s.errors = append(s.errors, e.Code+": "+e.Message)
		}
	default:
		return fail("bad record", "%.200s", line)
	}
	return nil
}

// outputText is a tool result's output as text: a JSON string's value,
// anything else as written.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// check says whether the stream was a good run: one call of the run's
// tool, which the platform executed exactly once; no error event; a done
// event with end_turn; the completed result, last, whose output quotes
// the tool's answer to this very call.
func (c *client) check(p plan, s *seen) *runError {
	switch {
	case len(s.errors) > 0:
		return fail("error event", "%s", s.errors[0])
	case s.result == nil:
		return fail("no result", "the stream ended without a result record")
	case s.afterRes > 0:
		return fail("records after result", "%d records followed the result", s.afterRes)
	}
	res := s.result.Result
	if !res.OK || res.Status != "completed" {
		return fail("result "+res.Status, "%s: %s", res.ErrorCode, res.Error)
	}
	if s.doneN != 1 || s.done != "end_turn" {
		return fail("done event", "%d done events, stop reason %q", s.doneN, s.done)
	}
	if len(s.calls) != 1 || len(s.results) != 1 {
		return fail("tool calls", "%d tool calls and %d tool results, want 1 each", len(s.calls), len(s.results))
	}
	if !s.resultOK {
		return fail("tool failed", "%.200s", s.results[0])
	}
	id := s.calls[0]
	var want string
	switch p.kind {
	case kindCallback, kindDirect:
		if n := c.fakes.platform.take(id); n != 1 {
			return fail("tool executions", "%s call %s ran %d times, want once", p.kind, id, n)
		}
		want = callbackOutput(id)
		if p.kind == kindDirect {
			want = directOutput(id)
		}
		if !strings.Contains(s.results[0], want) {
			return fail("tool result", "tool_result %.200q does not hold %q", s.results[0], want)
		}
	case kindMCP:
		// The MCP server counts calls per session (platform.mcpWrong);
		// here the answer must be one it gave.
		want = mcpAnswer.FindString(s.results[0])
		if want == "" {
			return fail("tool result", "tool_result %.200q holds no MCP answer", s.results[0])
		}
	}
	if res.Output != answerPrefix+want {
		return fail("final text", "output %.200q, want %q", res.Output, answerPrefix+want)
	}
	return nil
}

// load keeps n runs in flight until stopAt: each finished run is replaced
// at once. The first n start spread over ramp, so they do not all reach
// the model at the same instant. It returns when every run has ended;
// a run still open when ctx ends is cut and counts as failed.
func (c *client) load(ctx context.Context, n int, ramp time.Duration, stopAt time.Time) {
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			if benchkit.Sleep(ctx, time.Duration(w)*ramp/time.Duration(n)) != nil {
				return
			}
			for ctx.Err() == nil && time.Now().Before(stopAt) {
				p := c.next()
				start := time.Now()
				err := c.run(ctx, p)
				c.tally.add(p.kind, time.Since(start), err)
			}
		})
	}
	wg.Wait()
}

// tally counts the runs' outcomes. Safe for concurrent use.
type tally struct {
	completed atomic.Int64
	failed    atomic.Int64
	mu        sync.Mutex
	byKind    map[string]int64 // failures by runError kind
	examples  []string         // the first few failures
	perTool   map[string]int64 // good runs by tool kind
	durations []time.Duration  // every run's, good or not
}

const maxExamples = 8

func newTally() *tally {
	return &tally{byKind: map[string]int64{}, perTool: map[string]int64{}}
}

func (t *tally) add(tool string, d time.Duration, err *runError) {
	t.completed.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.durations = append(t.durations, d)
	if err == nil {
		t.perTool[tool]++
		return
	}
	t.failed.Add(1)
	t.byKind[err.kind]++
	if len(t.examples) < maxExamples {
		t.examples = append(t.examples, fmt.Sprintf("%s run: %v", tool, err))
	}
}

// unwrapURLError drops net/http's "Post \"http://…\": " prefix, which
// would make the same failure on different ports look different.
func unwrapURLError(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err.Error()
	}
	return err.Error()
}
