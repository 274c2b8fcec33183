package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/sandbox"
)

// fakeLauncher starts the fake agent with a scenario, the way an agent
// recipe starts a real one: a command line, an environment of its own
// and a mode.
type fakeLauncher struct {
	scenario string
	log      string
	mode     string
	inConfig bool
	// endpoint is the runnel server Launch was given; cleaned says
	// Cleanup ran.
	mu       sync.Mutex
	endpoint Endpoint
	cleaned  bool
}

func (f *fakeLauncher) Launch(_ context.Context, server Endpoint) (*Launch, error) {
	f.mu.Lock()
	f.endpoint = server
	f.mu.Unlock()
	return &Launch{
		Name: "fake",
		Argv: []string{fakeAgentBin},
		Env: []string{"PATH=" + sandbox.DefaultPath, "HOME=" + os.TempDir(),
			"FAKE_ACP_SCENARIO_JSON=" + f.scenario, "FAKE_ACP_LOG=" + f.log},
		Mode:          f.mode,
		ToolsInConfig: f.inConfig,
		Cleanup: func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.cleaned = true
			return nil
		},
	}, nil
}

// testGate is a permission gate with a fixed policy per tool name:
// "allow" (the default), "deny" or "pause". Allowed calls of runnel's
// tools run and return "ran <name> <input>". It records what it was asked.
type testGate struct {
	policy map[string]string
	mu     sync.Mutex
	permit []harness.AgentCall
	calls  []harness.Call
}

func (g *testGate) Permit(_ context.Context, c harness.AgentCall) harness.Verdict {
	g.mu.Lock()
	g.permit = append(g.permit, c)
	g.mu.Unlock()
	switch g.policy[c.Name] {
	case "deny":
		return harness.Answer(harness.DeniedResult("Tool call execution denied by the test policy."))
	case "pause":
		return harness.Pause(runnel.Interaction{ID: "int_" + c.ID, Kind: runnel.InteractionApproval, ToolCallID: c.ID, ToolName: c.Name, Input: c.Input})
	}
	return harness.Allow()
}

func (g *testGate) Dispatch(_ context.Context, c harness.Call) harness.Verdict {
	g.mu.Lock()
	g.calls = append(g.calls, c)
	g.mu.Unlock()
	switch g.policy["dispatch:"+c.Name] {
	case "deny":
		return harness.Answer(harness.DeniedResult("Tool call execution denied by the test policy."))
	case "pause":
		return harness.Pause(runnel.Interaction{ID: "int_" + c.ID, Kind: runnel.InteractionClientTool, ToolCallID: c.ID, ToolName: c.Name, Input: c.Input})
	}
	return harness.Execute(func(ctx context.Context) harness.ToolResult {
		return harness.TextResult(fmt.Sprintf("ran %s %s", c.Name, c.Input), false)
	})
}

// events records what a turn emitted, safe for the session's goroutines.
type events struct {
	mu  sync.Mutex
	all []runnel.Event
}

func (e *events) Emit(ev runnel.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) ofType(t runnel.EventType) []runnel.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []runnel.Event
	for _, ev := range e.all {
		if ev.Type == t {
			out = append(out, ev)
		}
	}
	return out
}

// text is every message delta, joined.
func (e *events) text() string {
	var b strings.Builder
	for _, ev := range e.ofType(runnel.EventMessageDelta) {
		b.WriteString(ev.Delta)
	}
	return b.String()
}

// fakeRun is one turn on the fake agent and what came of it.
type fakeRun struct {
	out      *Outcome
	err      error
	events   *events
	gate     *testGate
	launcher *fakeLauncher
	logPath  string
}

// turnOpts vary a fake turn.
type turnOpts struct {
	tools    []Tool
	servers  []Server
	policy   map[string]string
	mode     string
	inConfig bool
	timeouts Timeouts
	maxOut   int64
	prompt   string
	ws       *sandbox.Workspace
}

var weatherTool = Tool{Name: "get_weather", Description: "weather of a city",
	Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

// runFake runs one turn of the fake agent with scenario.
func runFake(t *testing.T, scenario string, o turnOpts) *fakeRun {
	t.Helper()
	if o.ws == nil {
		ws, err := sandbox.NewWorkspace(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		o.ws = ws
	}
	if o.prompt == "" {
		o.prompt = "what is the weather in Paris?"
	}
	if o.timeouts.Initialize == 0 {
		o.timeouts.Initialize = 10 * time.Second
	}
	if o.timeouts.Idle == 0 {
		o.timeouts.Idle = 20 * time.Second
	}
	o.timeouts.ExitGrace = 500 * time.Millisecond
	r := &fakeRun{events: &events{}, gate: &testGate{policy: o.policy}, logPath: filepath.Join(t.TempDir(), "agent.log")}
	r.launcher = &fakeLauncher{scenario: scenario, log: r.logPath, mode: o.mode, inConfig: o.inConfig}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r.out, r.err = Run(ctx, &Turn{
		Agent: r.launcher, Workspace: o.ws,
		Prompt: []runnel.Block{{Type: runnel.BlockText, Text: o.prompt}},
		Tools:  o.tools, Servers: o.servers, Gate: r.gate,
		Timeouts: o.timeouts, MaxOutputBytes: o.maxOut,
	}, r.events)
	r.checkGone(t)
	return r
}

// checkGone checks what a turn must not leave: the agent's process, its
// home (Cleanup ran) and runnel's MCP server.
func (r *fakeRun) checkGone(t *testing.T) {
	t.Helper()
	r.launcher.mu.Lock()
	cleaned, url := r.launcher.cleaned, r.launcher.endpoint.URL
	r.launcher.mu.Unlock()
	if !cleaned {
		t.Error("the launch's Cleanup did not run")
	}
	if url != "" {
		host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
		if conn, err := dialTimeout(host); err == nil {
			conn.Close()
			t.Errorf("runnel's MCP server %s still accepts connections after the turn", host)
		}
	}
	for _, pid := range r.pids(t) {
		if processAlive(pid) {
			t.Errorf("process %d of the agent outlived the turn", pid)
		}
	}
}

// log reads the fake agent's log.
func (r *fakeRun) log(t *testing.T) []map[string]any {
	t.Helper()
	f, err := os.Open(r.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// notes are the log's notes of one name.
func (r *fakeRun) notes(t *testing.T, name string) []any {
	var out []any
	for _, e := range r.log(t) {
		if e["t"] == "note" && e["note"] == name {
			out = append(out, e["data"])
		}
	}
	return out
}

// received are the frames the fake agent received with method.
func (r *fakeRun) received(t *testing.T, method string) []map[string]any {
	var out []map[string]any
	for _, e := range r.log(t) {
		if e["t"] == "recv" && e["method"] == method {
			out = append(out, e)
		}
	}
	return out
}

// order is what the agent read of a pause, in order: "session/cancel"
// and "permission answer" (the response to its permission request).
func (r *fakeRun) order(t *testing.T) []string {
	var out []string
	var asked []any
	for _, e := range r.log(t) {
		switch {
		case e["t"] == "send" && e["method"] == "session/request_permission":
			asked = append(asked, e["id"])
		case e["t"] == "recv" && e["method"] == "session/cancel":
			out = append(out, "session/cancel")
		case e["t"] == "recv" && e["method"] == nil && slices.Contains(asked, e["id"]):
			out = append(out, "permission answer")
		}
	}
	return out
}

// pids are the agent's pid and those of the children it spawned.
func (r *fakeRun) pids(t *testing.T) []int {
	var out []int
	for _, name := range []string{"process", "spawn"} {
		for _, d := range r.notes(t, name) {
			if m, ok := d.(map[string]any); ok {
				if pid, ok := m["pid"].(float64); ok {
					out = append(out, int(pid))
				}
			}
		}
	}
	return out
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func dialTimeout(host string) (net.Conn, error) { return net.DialTimeout("tcp", host, time.Second) }

// processAlive reports whether pid is a live process (a zombie is dead:
// it only waits to be reaped).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
