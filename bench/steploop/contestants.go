package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/run"
)

// batch is what one contestant measured for a number of runs in a row.
type batch struct {
	runs []time.Duration
	// cpu is the CPU time the contestant's agent process spent on the
	// batch (0 when unknown).
	cpu time.Duration
}

// contestant runs benchmark turns, one after another.
type contestant interface {
	name() string
	batch(ctx context.Context, runs int) (batch, error)
	close()
}

// timeRuns times runs calls of one, and the CPU time of this process.
func timeRuns(ctx context.Context, runs int, one func(context.Context) error) (batch, error) {
	b := batch{runs: make([]time.Duration, 0, runs)}
	cpu0 := selfCPU()
	for range runs {
		t0 := time.Now()
		if err := one(ctx); err != nil {
			return b, err
		}
		b.runs = append(b.runs, time.Since(t0))
	}
	b.cpu = selfCPU() - cpu0
	return b, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRequest is the run every runnel contestant sends: the echo callback
// tool, no builtins, everything allowed, the fake model as an
// OpenAI-compatible endpoint, the replayed history (if any) then the prompt.
func benchRequest(u fakeURLs, hist *history) *runnel.RunRequest {
	var msgs []runnel.Message
	if hist != nil {
		msgs = append(msgs, hist.runnel...)
	}
	return &runnel.RunRequest{
		Model:       "openai/" + modelName,
		Endpoint:    &runnel.Endpoint{BaseURL: u.Model},
		Secrets:     map[string]string{"OPENAI_API_KEY": apiKey},
		Messages:    append(msgs, runnel.UserText(prompt)),
		Tools:       []string{},
		Permissions: json.RawMessage(`{"default":"allow"}`),
		CustomTools: []runnel.ToolSpec{{
			Name: toolName, Description: toolDesc, CallRef: toolName,
			InputSchema: json.RawMessage(toolSchema),
		}},
		ToolCallback: &runnel.ToolCallback{Endpoint: u.Callback},
	}
}

// countingSink is the cheapest consumer of a run's events: it counts tool
// results, which the check after the run needs anyway.
type countingSink struct{ toolResults atomic.Int64 }

func (s *countingSink) Emit(e runnel.Event) {
	if e.Type == runnel.EventToolResult {
		s.toolResults.Add(1)
	}
}

// checkResult verifies a runnel run did the scripted turn.
func checkResult(res *runnel.Result, toolResults, steps int) error {
	if res.Status != runnel.StatusCompleted || res.Output != finalText || toolResults != steps {
		return fmt.Errorf("%w: status %s, output %q, %d tool results (error: %s)",
			errUnexpected, res.Status, res.Output, toolResults, res.Error)
	}
	return nil
}

// native is runnel's loop in this process, through run.Manager.Run: the
// code path behind POST /run, without HTTP and JSON encoding of events.
type native struct {
	mgr    *run.Manager
	client *http.Client
	urls   fakeURLs
	hist   *history
	steps  int
}

func newNative(u fakeURLs, steps int, hist *history) *native {
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	return &native{
		mgr:    run.NewManager(&run.Options{HTTPClient: client, MaxSteps: steps + 1}),
		client: client, urls: u, hist: hist, steps: steps,
	}
}

func (n *native) name() string { return "runnel (in-process)" }

func (n *native) one(ctx context.Context) error {
	var sink countingSink
	// A request a turn, as a server decodes one: the run may keep what it
	// is given.
	res, err := n.mgr.Run(ctx, benchRequest(n.urls, n.hist), &sink)
	if err != nil {
		return fmt.Errorf("runnel refused the run: %w", err)
	}
	return checkResult(res, int(sink.toolResults.Load()), n.steps)
}

func (n *native) batch(ctx context.Context, runs int) (batch, error) {
	return timeRuns(ctx, runs, n.one)
}

func (n *native) close() { n.client.CloseIdleConnections() }

// floor is the same traffic with no agent: a bare loop that sends the
// growing chat request, reads the streamed reply, POSTs the callback
// envelope and appends the result, with hand-built JSON. The time it takes
// is what the fakes and loopback HTTP cost; what a contestant takes beyond
// it is the contestant's own overhead.
type floor struct {
	client *http.Client
	urls   fakeURLs
	steps  int
	// head is the request body up to the end of the first turn's
	// messages (the history and the prompt), without the closing "]}".
	head []byte
}

func newFloor(u fakeURLs, steps int, hist *history) *floor {
	head := []byte(floorHead)
	if hist != nil {
		for _, m := range hist.chat {
			head = append(append(head, m...), ',')
		}
	}
	head = append(head, floorPrompt...)
	return &floor{client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, urls: u, steps: steps, head: head}
}

func (f *floor) name() string { return "floor (bare Go loop)" }

func (f *floor) batch(ctx context.Context, runs int) (batch, error) {
	return timeRuns(ctx, runs, f.one)
}

func (f *floor) close() { f.client.CloseIdleConnections() }

const (
	floorHead = `{"model":"` + modelName + `","stream":true,"stream_options":{"include_usage":true},` +
		`"tools":[{"type":"function","function":{"name":"` + toolName + `","description":"` + toolDesc +
		`","parameters":` + toolSchema + `}}],"messages":[`
	floorPrompt = `{"role":"user","content":"` + prompt + `"}`
	callIDMark  = `"id":"call_`
)

func (f *floor) one(ctx context.Context) error {
	msgs := slices.Clip(f.head) // appending copies: head stays as it is
	for step := 0; ; step++ {
		reply, err := f.post(ctx, f.urls.Model+"/chat/completions", append(msgs, "]}"...))
		if err != nil {
			return err
		}
		i := bytes.Index(reply, []byte(callIDMark))
		if i < 0 {
			if step != f.steps || !bytes.Contains(reply, []byte(`"finish_reason":"stop"`)) {
				return fmt.Errorf("%w: floor ended after %d steps", errUnexpected, step)
			}
			return nil
		}
		id := reply[i+len(`"id":"`):]
		id = id[:bytes.IndexByte(id, '"')]
		msgs = fmt.Appendf(msgs, `,{"role":"assistant","content":null,"tool_calls":[{"id":"%s","type":"function","function":{"name":"%s","arguments":%q}}]}`,
			id, toolName, toolArgs)
		out, err := f.post(ctx, f.urls.Callback,
			fmt.Appendf(nil, `{"data":{"id":"%s","type":"function","function":{"name":"%s","arguments":%s}}}`, id, toolName, toolArgs))
		if err != nil {
			return err
		}
		if !bytes.Contains(out, []byte(`"content":"`+toolOutput+`"`)) {
			return fmt.Errorf("%w: callback answered %s", errUnexpected, out)
		}
		msgs = fmt.Appendf(msgs, `,{"role":"tool","tool_call_id":"%s","content":"%s"}`, id, toolOutput)
	}
}

func (f *floor) post(ctx context.Context, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, out)
	}
	return out, err
}

// served is runnel as a user runs it: `runnel serve` in its own process,
// one streaming POST /run per turn, the NDJSON stream read to its result.
type served struct {
	proc   *benchkit.Runnel // set once started: the body sizes its limit
	client *http.Client
	body   []byte
	steps  int
}

func newServed(u fakeURLs, steps int, hist *history) (*served, error) {
	body, err := json.Marshal(benchRequest(u, hist))
	if err != nil {
		return nil, err
	}
	return &served{client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, body: body, steps: steps}, nil
}

func (s *served) name() string { return "runnel serve (HTTP, NDJSON)" }

func (s *served) batch(ctx context.Context, runs int) (batch, error) {
	cpu0, err := s.proc.CPU()
	if err != nil {
		return batch{}, err
	}
	b, err := timeRuns(ctx, runs, s.one)
	if cpu1, cerr := s.proc.CPU(); cerr == nil {
		b.cpu = cpu1.Sub(cpu0).Self
	}
	return b, err
}

func (s *served) close() { s.client.CloseIdleConnections() }

func (s *served) one(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.proc.URL+"/run", bytes.NewReader(s.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST /run: HTTP %d: %s", resp.StatusCode, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	toolResults := 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue // keep-alive
		}
		var rec struct {
			Kind   string          `json:"kind"`
			Event  json.RawMessage `json:"event"`
			Result *runnel.Result  `json:"result"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("NDJSON line %q: %w", line, err)
		}
		switch {
		case rec.Kind == "event" && bytes.Contains(rec.Event, []byte(`"type":"tool_result"`)):
			toolResults++
		case rec.Kind == "result" && rec.Result != nil:
			return checkResult(rec.Result, toolResults, s.steps)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: the stream ended without a result record", errUnexpected)
}

// modeNodeFloor is the Node script's bare fetch loop: Node's own cost for
// the same traffic, no SDK.
const modeNodeFloor = "floor"

// aisdk is bench/aisdk/steploop.mjs, driven over its stdin and stdout.
// mode is the AI SDK function a turn calls (fnStreamText, fnGenerateText)
// or modeNodeFloor. Every mode shares one Node process.
type aisdk struct {
	proc *nodeProc
	mode string
}

func (a *aisdk) name() string {
	if a.mode == modeNodeFloor {
		return "Node floor (bare fetch loop)"
	}
	return "AI SDK " + a.mode + " " + a.proc.version
}

func (a *aisdk) batch(ctx context.Context, runs int) (batch, error) {
	var out struct {
		MS        []float64 `json:"ms"`
		CPUMS     float64   `json:"cpuMs"`
		Steps     int       `json:"steps"`
		ToolCalls int       `json:"toolCalls"`
	}
	if err := a.proc.call(ctx, map[string]any{"runs": runs, "mode": a.mode}, &out); err != nil {
		return batch{}, err
	}
	b := batch{cpu: time.Duration(out.CPUMS * float64(time.Millisecond))}
	for _, ms := range out.MS {
		b.runs = append(b.runs, time.Duration(ms*float64(time.Millisecond)))
	}
	return b, nil
}

func (a *aisdk) close() { a.proc.close() } // closing twice is harmless
