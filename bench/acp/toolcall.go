package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
)

// The tool every tool-call contestant calls, and what the callback
// server answers for it.
const (
	echoTool   = "echo"
	echoOutput = "ok"
	echoSchema = `{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`
	// The fake agent's turns, chosen by the prompt's text.
	callsPrompt  = "Make the calls."
	noCallPrompt = "Just answer."
	doneText     = "done"
)

// toolTurn is one timed tool-call turn.
type toolTurn struct {
	// Calls are the round trips of the turn's calls, as the calling side
	// saw each (the fake agent's CallTool; the relay's write-to-read).
	Calls []time.Duration `json:"callsNs"`
	// Wall is the whole turn, from request to result.
	Wall time.Duration `json:"wallNs"`
	// CPU: runnel's own (Self) and its reaped agent's (Children); the
	// relay process's own (Self).
	CPU benchkit.CPU `json:"cpu"`
}

// toolContestant runs a turn of calls sequential tool calls.
type toolContestant interface {
	name() string
	turn(ctx context.Context, calls int) (toolTurn, error)
}

// runToolCall runs the tool-call benchmark: runnel with the fake ACP
// agent (a turn of cfg.calls MCP calls, and a turn with none for the
// fixed cost of a turn) against the file relay, alternating.
func runToolCall(ctx context.Context, cfg config, tmp string) (*toolCallReport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	cb := &http.Server{Handler: benchkit.CallbackHandler(echoTool, echoOutput), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = cb.Serve(ln) // http.ErrServerClosed once closed
	}()
	defer func() {
		_ = cb.Close()
		<-served
	}()
	callback := "http://" + ln.Addr().String() + "/tools/call"

	mcp, err := startFakeAgentRunnel(ctx, cfg, tmp, callback)
	if err != nil {
		return nil, err
	}
	defer mcp.close()
	relay, err := startRelay(ctx, filepath.Join(tmp, "relay"), callback, cfg.poll)
	if err != nil {
		return nil, err
	}
	defer relay.close()

	fmt.Printf("\ntool call: %d sequential calls per turn; %d rounds after one untimed, alternating; relay poll %s\n",
		cfg.calls, cfg.toolRounds, cfg.poll)
	cs := []toolContestant{mcp.withCalls(), mcp.withoutCalls(), relay}
	res := map[string][]toolTurn{}
	for _, c := range cs {
		if _, err := c.turn(ctx, cfg.calls); err != nil {
			return nil, fmt.Errorf("%s, warm-up: %w", c.name(), err)
		}
	}
	for round := range cfg.toolRounds {
		for i := range cs {
			c := cs[(i+round)%len(cs)]
			t, err := c.turn(ctx, cfg.calls)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", c.name(), round+1, err)
			}
			res[c.name()] = append(res[c.name()], t)
		}
	}
	rep := newToolCallReport(cfg, res[cs[0].name()], res[cs[1].name()], res[cs[2].name()])
	rep.print(os.Stdout)
	return rep, nil
}

// fakeAgentRunnel is `runnel serve` whose "claude" is the fake ACP agent
// (RUNNEL_HARNESS_CLAUDE_COMMAND): runnel writes the real recipe's HOME and
// environment, and the agent does what its scenario says.
type fakeAgentRunnel struct {
	srv    *benchkit.Runnel
	client *http.Client
	log    *fakeLog
	cb     string
}

func startFakeAgentRunnel(ctx context.Context, cfg config, tmp, callback string) (*fakeAgentRunnel, error) {
	dir, err := os.MkdirTemp(tmp, "fakeagent-")
	if err != nil {
		return nil, err
	}
	scenario, logPath := filepath.Join(dir, "scenario.json"), filepath.Join(dir, "agent.log")
	raw, err := json.Marshal(callsScenario(cfg.calls))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(scenario, raw, 0o600); err != nil {
		return nil, err
	}
	for _, p := range []string{scenario, logPath, cfg.fakeAgentBin} {
		if strings.ContainsRune(p, '\'') {
			return nil, fmt.Errorf("%s: a path with a single quote cannot be passed in RUNNEL_HARNESS_CLAUDE_COMMAND", p)
		}
	}
	// runnel gives an agent only the environment its recipe grants; env(1)
	// carries the fake's own settings past it, as a wrapper script would.
	command := strings.Join([]string{"/usr/bin/env", quoteWord("FAKE_ACP_SCENARIO=" + scenario),
		quoteWord("FAKE_ACP_LOG=" + logPath), quoteWord(cfg.fakeAgentBin)}, " ")
	agentsDir := filepath.Join(dir, "agents") // empty: the command override is the agent
	if err := os.Mkdir(agentsDir, 0o700); err != nil {
		return nil, err
	}
	// The local sandbox: the fake agent logs to a file of this program's,
	// which an isolated one would not see.
	srv, err := startAgentRunnel(ctx, cfg.runnelBin, agentsDir, tmp, []string{"RUNNEL_HARNESS_CLAUDE_COMMAND=" + command, "RUNNEL_ALLOW_LOCAL_SANDBOX=true"}, false)
	if err != nil {
		return nil, err
	}
	return &fakeAgentRunnel{srv: srv, client: &http.Client{Transport: &http.Transport{}}, log: &fakeLog{path: logPath}, cb: callback}, nil
}

func (f *fakeAgentRunnel) close() {
	f.client.CloseIdleConnections()
	f.srv.Close()
}

// callsScenario is the fake agent's script: on callsPrompt, calls MCP
// calls of runnel's echo tool one after another, then the text "done";
// on any other prompt, only the text.
func callsScenario(calls int) map[string]any {
	steps := make([]map[string]any, 0, calls+1)
	for i := range calls {
		steps = append(steps, map[string]any{"mcpCall": map[string]any{
			"server": "runnel", "tool": echoTool, "arguments": map[string]int{"n": i},
		}})
	}
	steps = append(steps, map[string]any{"text": doneText})
	return map[string]any{"turns": []map[string]any{
		{"whenPromptContains": callsPrompt, "steps": steps},
		{"steps": []map[string]any{{"text": doneText}}},
	}}
}

// request is a run whose agent is the fake, with the echo callback tool,
// no builtins and every call allowed (no pause).
func (f *fakeAgentRunnel) request(prompt string) []byte {
	body, err := json.Marshal(&runnel.RunRequest{
		Sandbox:     "local",
		Harness:     "claude",
		Model:       "anthropic/claude-test",
		Secrets:     map[string]string{"ANTHROPIC_API_KEY": modelKey},
		Messages:    []runnel.Message{runnel.UserText(prompt)},
		Tools:       []string{},
		Permissions: json.RawMessage(`{"default":"allow"}`),
		CustomTools: []runnel.ToolSpec{{
			Name: echoTool, Description: "Echo n back.", CallRef: echoTool, InputSchema: json.RawMessage(echoSchema),
		}},
		ToolCallback: &runnel.ToolCallback{Endpoint: f.cb},
	})
	if err != nil {
		panic(err) // a RunRequest of strings, slices and valid raw JSON always encodes
	}
	return body
}

func (f *fakeAgentRunnel) withCalls() *mcpTurn {
	return &mcpTurn{f: f, body: f.request(callsPrompt), label: "runnel MCP server"}
}

func (f *fakeAgentRunnel) withoutCalls() *mcpTurn {
	return &mcpTurn{f: f, body: f.request(noCallPrompt), label: "runnel, turn with no call", noCalls: true}
}

// mcpTurn is one kind of turn on the fake agent through runnel.
type mcpTurn struct {
	f       *fakeAgentRunnel
	body    []byte
	label   string
	noCalls bool
}

func (m *mcpTurn) name() string { return m.label }

func (m *mcpTurn) turn(ctx context.Context, calls int) (toolTurn, error) {
	var t toolTurn
	if m.noCalls {
		calls = 0
	}
	cpu0, err := procCPU(m.f.srv.PID())
	if err != nil {
		return t, err
	}
	rs, err := postRun(ctx, m.f.client, m.f.srv.URL, m.body)
	if err != nil {
		return t, err
	}
	cpu1, err := procCPU(m.f.srv.PID())
	if err != nil {
		return t, err
	}
	t.Wall, t.CPU = rs.end, cpu1.Sub(cpu0)
	if r := rs.result; r.Status != runnel.StatusCompleted || r.Output != doneText || rs.toolResults != calls {
		return t, fmt.Errorf("%w: status %s, output %q, %d tool results (error: %s)", errUnexpected, r.Status, r.Output, rs.toolResults, r.Error)
	}
	// The agent is gone by the time runnel writes the result, so its log
	// is complete.
	if t.Calls, err = m.f.log.calls(); err != nil {
		return t, err
	}
	if len(t.Calls) != calls {
		return t, fmt.Errorf("%w: the agent logged %d calls, want %d", errUnexpected, len(t.Calls), calls)
	}
	return t, nil
}

// fakeLog reads the fake agent's log (FAKE_ACP_LOG), one turn at a time.
type fakeLog struct {
	path string
	off  int64
}

// calls are the round trips of the tool calls logged since the last
// read, from the "mcp tools/call result" notes' elapsedUs.
func (l *fakeLog) calls() ([]time.Duration, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("the fake agent's log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	l.off += int64(len(raw))
	var out []time.Duration
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e struct {
			T    string `json:"t"`
			Note string `json:"note"`
			Data struct {
				Tool      string `json:"tool"`
				Text      string `json:"text"`
				Error     string `json:"error"`
				ElapsedUS int64  `json:"elapsedUs"`
			} `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.T != "note" || e.Note != "mcp tools/call result" {
			continue
		}
		if e.Data.Tool != echoTool || e.Data.Text != echoOutput || e.Data.Error != "" || e.Data.ElapsedUS <= 0 {
			return nil, fmt.Errorf("%w: the agent logged the call result %s", errUnexpected, sc.Bytes())
		}
		out = append(out, time.Duration(e.Data.ElapsedUS)*time.Microsecond)
	}
	return out, sc.Err()
}

// procCPU is a process's own CPU time to the nanosecond (its threads'
// run time) and its reaped children's to the clock tick (all /proc has).
func procCPU(pid int) (benchkit.CPU, error) {
	self, err := benchkit.ReadThreadsCPU(pid)
	if err != nil {
		return benchkit.CPU{}, err
	}
	c, err := benchkit.ReadCPU(pid)
	if err != nil {
		return benchkit.CPU{}, err
	}
	return benchkit.CPU{Self: self, Children: c.Children}, nil
}

// quoteWord quotes s as one word of runnel's command-line settings
// (single quotes, which that split honours; s must hold none).
func quoteWord(s string) string { return "'" + s + "'" }
