package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// The peer of runnel's MCP server in the tool-call benchmark: Agenta's
// tool relay (services/agent/src/tools/relay.ts and relay-client.ts in
// Agenta-AI/agenta), which carries a tool call out of a sandbox through
// files. The extension in the sandbox writes <id>.req.json and then
// checks for <id>.res.json every RELAY_POLL_MS (300 ms); the runner lists
// the directory every RELAY_POLL_MS, and for each new request reads it,
// POSTs the tool callback and writes the response file. Both sides run
// here, in one process of their own (relayProc), against the same
// callback server as runnel. The emulation favours the relay: its runner
// lists the directory with one getdents (Agenta runs `ls -1` as a process
// through the sandbox's daemon API) and reads and writes local files
// (Agenta goes through that API for each).
const (
	relayReqSuffix = ".req.json"
	relayResSuffix = ".res.json"
	// relayTimeout is RELAY_TIMEOUT_MS.
	relayTimeout = 60 * time.Second
)

// relayRequest and relayResponse are the files' contents.
type relayRequest struct {
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId"`
	Args       json.RawMessage `json:"args"`
}

type relayResponse struct {
	OK    bool   `json:"ok"`
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

// relayCall is the sandbox side (relayToolCall): write the request, then
// poll for the response, removing both files once it is read.
func relayCall(ctx context.Context, dir, tool, id string, args json.RawMessage, poll time.Duration) (string, error) {
	reqPath := filepath.Join(dir, id+relayReqSuffix)
	resPath := filepath.Join(dir, id+relayResSuffix)
	raw, err := json.Marshal(relayRequest{ToolName: tool, ToolCallID: id, Args: args})
	if err != nil {
		return "", err
	}
	if err := writeWhole(reqPath, raw); err != nil {
		return "", fmt.Errorf("write the relay request: %w", err)
	}
	deadline := time.Now().Add(relayTimeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(resPath); err == nil {
			raw, err := os.ReadFile(resPath)
			if err != nil {
				return "", fmt.Errorf("read the relay response: %w", err)
			}
			var res relayResponse
			if err := json.Unmarshal(raw, &res); err != nil {
				return "", fmt.Errorf("relay response %q: %w", raw, err)
			}
			_ = os.Remove(reqPath)
			_ = os.Remove(resPath)
			if !res.OK {
				return "", fmt.Errorf("tool relay failed for %s: %s", tool, res.Error)
			}
			return res.Text, nil
		}
		if err := benchkit.Sleep(ctx, poll); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("tool relay timed out for %s", tool)
}

// relayRunner is the runner side (startToolRelay): a loop that lists the
// directory every poll interval and handles each request file it has not
// seen, each on a goroutine of its own, until stop.
type relayRunner struct {
	dir, callback string
	client        *http.Client
	poll          time.Duration

	active   atomic.Bool
	inflight sync.WaitGroup
	done     chan struct{}
}

func startRelayRunner(dir, callback string, client *http.Client, poll time.Duration) *relayRunner {
	r := &relayRunner{dir: dir, callback: callback, client: client, poll: poll, done: make(chan struct{})}
	r.active.Store(true)
	go r.loop()
	return r
}

func (r *relayRunner) loop() {
	defer close(r.done)
	seen := map[string]bool{}
	for r.active.Load() {
		// A listing that fails (the directory not made yet) is retried at
		// the next tick, as Agenta's loop does.
		if entries, err := os.ReadDir(r.dir); err == nil {
			for _, e := range entries {
				name := e.Name()
				if !strings.HasSuffix(name, relayReqSuffix) || seen[name] {
					continue
				}
				seen[name] = true
				r.inflight.Add(1)
				go func() {
					defer r.inflight.Done()
					r.handle(name)
				}()
			}
		}
		// Agenta's loop sleeps the full interval, even when stop was
		// asked: so does this one.
		time.Sleep(r.poll)
	}
	r.inflight.Wait()
}

// stop ends the loop after its current sleep and waits for the calls in
// flight, as Agenta's stop() does once the prompt resolves.
func (r *relayRunner) stop() {
	r.active.Store(false)
	<-r.done
}

func (r *relayRunner) handle(reqName string) {
	id := strings.TrimSuffix(reqName, relayReqSuffix)
	res := relayResponse{OK: true}
	text, err := r.call(reqName, id)
	if err != nil {
		res = relayResponse{Error: err.Error()}
	}
	res.Text = text
	raw, err := json.Marshal(res)
	if err == nil {
		// A failed write leaves the sandbox side to time out, as in Agenta.
		_ = writeWhole(filepath.Join(r.dir, id+relayResSuffix), raw)
	}
}

// writeWhole writes a relay file so that the other side, polling, never
// reads it half written: under another name first, then renamed. A plain
// write let the runner read an empty request now and then ("unexpected end
// of JSON input"), which failed the call.
func writeWhole(path string, raw []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// call reads one request file and POSTs runnel's (and Agenta's) callback
// envelope; the answer's call.data.content is the tool's text.
func (r *relayRunner) call(reqName, id string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(r.dir, reqName))
	if err != nil {
		return "", err
	}
	var req relayRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return "", err
	}
	if req.ToolCallID == "" {
		req.ToolCallID = id
	}
	body, err := json.Marshal(map[string]any{"data": map[string]any{
		"id": req.ToolCallID, "type": "function",
		"function": map[string]any{"name": req.ToolName, "arguments": req.Args},
	}})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // TOOL_CALL_TIMEOUT_MS
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, r.callback, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(hr)
	if err != nil {
		return "", fmt.Errorf("tool call %s failed: %w", req.ToolName, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("tool call %s returned HTTP %d: %s", req.ToolName, resp.StatusCode, out)
	}
	var env struct {
		Call struct {
			Data struct {
				Content json.RawMessage `json:"content"`
			} `json:"data"`
		} `json:"call"`
	}
	if json.Unmarshal(out, &env) != nil || env.Call.Data.Content == nil {
		return string(out), nil
	}
	var s string
	if json.Unmarshal(env.Call.Data.Content, &s) == nil {
		return s, nil
	}
	return string(env.Call.Data.Content), nil
}

// relayTurnCmd is what the driver asks the relay process for, one line
// each: Calls sequential calls, numbered in turn Turn.
type relayTurnCmd struct {
	Turn  int `json:"turn"`
	Calls int `json:"calls"`
}

// relayTurnResult is its answer: each call's round trip, as the sandbox
// side saw it, in microseconds.
type relayTurnResult struct {
	CallsUS []int64 `json:"callsUs"`
	Error   string  `json:"error,omitempty"`
}

// serveRelay is the -relay-serve role. For each command line on in it
// starts the runner loop, makes the calls from the sandbox side one after
// another, stops the loop (as Agenta does when the prompt resolves), and
// answers one line on out. It returns when in ends.
func serveRelay(ctx context.Context, dir, callback string, poll time.Duration, in io.Reader, out io.Writer) error {
	if dir == "" || callback == "" {
		return errors.New("-relay-serve needs -relay-dir and -callback")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var cmd relayTurnCmd
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return fmt.Errorf("command %q: %w", sc.Bytes(), err)
		}
		if err := enc.Encode(relayTurn(ctx, dir, callback, client, poll, cmd)); err != nil {
			return err
		}
	}
	return sc.Err()
}

func relayTurn(ctx context.Context, dir, callback string, client *http.Client, poll time.Duration, cmd relayTurnCmd) relayTurnResult {
	runner := startRelayRunner(dir, callback, client, poll)
	defer runner.stop()
	res := relayTurnResult{CallsUS: make([]int64, 0, cmd.Calls)}
	for i := range cmd.Calls {
		// In a real turn the model works between two calls, so a call
		// lands at a random point of the runner's poll cycle. Called back
		// to back, the two loops (started together, same period) would
		// stay in lock-step, the runner listing the directory just before
		// each request appears and most calls taking two periods: unfair
		// to the relay. This wait stands for the model's time and is not
		// in the call's time.
		if err := benchkit.Sleep(ctx, rand.N(poll)); err != nil {
			res.Error = err.Error()
			return res
		}
		start := time.Now()
		text, err := relayCall(ctx, dir, echoTool, fmt.Sprintf("call_%d_%d", cmd.Turn, i), json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), poll)
		elapsed := time.Since(start)
		if err == nil && text != echoOutput {
			err = fmt.Errorf("%w: the tool answered %q", errUnexpected, text)
		}
		if err != nil {
			res.Error = err.Error()
			return res
		}
		res.CallsUS = append(res.CallsUS, elapsed.Microseconds())
	}
	return res
}

// relayProc is the relay emulation in its own process (this program in
// its -relay-serve role), so that its CPU time is its own.
type relayProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Reader
	turns int
	once  sync.Once
}

func startRelay(ctx context.Context, dir, callback string, poll time.Duration) (*relayProc, error) {
	cmd, stdin, lines, err := benchkit.StartSelf(ctx, "-relay-serve", "-relay-dir", dir, "-callback", callback, "-poll", poll.String())
	if err != nil {
		return nil, fmt.Errorf("start the relay: %w", err)
	}
	return &relayProc{cmd: cmd, stdin: stdin, lines: lines}, nil
}

func (p *relayProc) name() string { return "file relay" }

func (p *relayProc) turn(ctx context.Context, calls int) (toolTurn, error) {
	var t toolTurn
	p.turns++
	line, err := json.Marshal(relayTurnCmd{Turn: p.turns, Calls: calls})
	if err != nil {
		return t, err
	}
	cpu0, err := procCPU(p.cmd.Process.Pid)
	if err != nil {
		return t, err
	}
	start := time.Now()
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		return t, fmt.Errorf("write to the relay: %w", err)
	}
	answer, err := readLine(ctx, p.lines, p.close)
	if err != nil {
		return t, fmt.Errorf("the relay did not answer (see its stderr above): %w", err)
	}
	t.Wall = time.Since(start)
	cpu1, err := procCPU(p.cmd.Process.Pid)
	if err != nil {
		return t, err
	}
	t.CPU = cpu1.Sub(cpu0)
	var res relayTurnResult
	if err := json.Unmarshal(answer, &res); err != nil {
		return t, fmt.Errorf("relay answer %q: %w", answer, err)
	}
	if res.Error != "" {
		return t, errors.New(res.Error)
	}
	for _, us := range res.CallsUS {
		t.Calls = append(t.Calls, time.Duration(us)*time.Microsecond)
	}
	return t, nil
}

// close ends the process: closing stdin ends its command loop. It may be
// called more than once.
func (p *relayProc) close() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		benchkit.StopProcess(p.cmd, nil, 5*time.Second)
	})
}

// readLine reads one line. When ctx ends first it calls kill, which must
// make the read return (by ending the process that writes), and waits for
// the read.
func readLine(ctx context.Context, r *bufio.Reader, kill func()) ([]byte, error) {
	type answer struct {
		line []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		l, err := r.ReadBytes('\n')
		got <- answer{l, err}
	}()
	select {
	case a := <-got:
		return a.line, a.err
	case <-ctx.Done():
		kill()
		<-got
		return nil, ctx.Err()
	}
}
