package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/harness/acp"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/tools"
)

// alone is an agent with nothing between it and the caller: this program
// starts it with runnel's own launch recipe (the HOME, environment and
// command line runnel would use) and speaks ACP to it, doing what runnel
// does for a turn with no tools — initialize, session/new, session/set_mode
// when the recipe names a mode the agent is not in, one session/prompt —
// and ends it as runnel does. What runnel adds on top (HTTP, the run's
// plan, its workspace, its MCP server, containment, events) is the
// difference between the two contestants.
type alone struct {
	h      harnessCase
	reg    *agents.Registry
	llm    string
	tmp    string
	reaper *reaper
}

func (a *alone) name() string { return "alone" }

func (a *alone) turn(ctx context.Context) (turnTimes, error) {
	var t turnTimes
	ag, err := a.reg.Resolve(a.h.name)
	if err != nil {
		return t, err
	}
	ws, err := os.MkdirTemp(a.tmp, "alone-ws-")
	if err != nil {
		return t, err
	}
	defer os.RemoveAll(ws)
	launcher, err := ag.Launcher(agents.Run{Model: a.h.model(a.llm), Workspace: ws, Builtins: tools.DefaultBuiltins()})
	if err != nil {
		return t, err
	}
	setup := time.Now()
	// The turn has no tools of runnel's, so no agent ever calls runnel's
	// MCP server, and none runs here. The endpoint is still well formed,
	// as runnel's is: Pi's extension refuses a config without a URL and
	// would then leave Pi without its builtins.
	launch, err := launcher.Launch(ctx, acp.Endpoint{
		URL:     "http://127.0.0.1:9/mcp",
		Headers: map[string]string{"Authorization": "Bearer never-used-0123456789"},
		Tools:   []acp.Tool{},
	})
	if err != nil {
		return t, err
	}
	t.Setup = time.Since(setup)
	defer func() {
		if launch.Cleanup != nil {
			_ = launch.Cleanup()
		}
	}()

	cpu0, err := childrenCPU()
	if err != nil {
		return t, err
	}
	start := time.Now()
	p, err := a.reaper.start(launch.Argv, launch.Env, ws)
	if err != nil {
		return t, err
	}
	c := &aloneClient{start: start}
	conn := acpsdk.NewConnection(c.handle, p.stdin, p.stdout)
	// Agents send notification kinds the SDK has no type for; the handler
	// ignores them, and the SDK would log each one.
	conn.SetLogger(slog.New(slog.DiscardHandler))
	turnErr := c.run(ctx, conn, launch, ws)
	t.End = time.Since(start)
	if err := p.end(acp.DefaultExitGrace); err != nil && turnErr == nil {
		turnErr = err
	}
	t.Gone = time.Since(start)
	<-conn.Done()
	cpu1, err := childrenCPU()
	if err != nil {
		return t, err
	}
	t.CPU = benchkit.CPU{Children: cpu1 - cpu0}
	if turnErr != nil {
		return t, fmt.Errorf("%w%s", turnErr, p.stderr.sentence())
	}
	t.FirstText = time.Duration(c.firstText.Load())
	if t.FirstText == 0 || c.text() != helloText {
		return t, fmt.Errorf("%w: the agent said %q", errUnexpected, c.text())
	}
	return t, nil
}

// aloneClient is the client side of one ACP session.
type aloneClient struct {
	start     time.Time
	firstText atomic.Int64 // nanoseconds after start, 0 until the first text

	mu   sync.Mutex
	said strings.Builder
}

// run is the turn as runnel's harness (internal/harness/acp, session.go)
// takes it, with the same parameters and no tools.
func (c *aloneClient) run(ctx context.Context, conn *acpsdk.Connection, launch *acp.Launch, ws string) error {
	if _, err := acpsdk.SendRequest[acpsdk.InitializeResponse](conn, ctx, acpsdk.AgentMethodInitialize, map[string]any{
		"protocolVersion":    acpsdk.ProtocolVersionNumber,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "bench-acp", "version": "1"},
	}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	sess, err := acpsdk.SendRequest[acpsdk.NewSessionResponse](conn, ctx, acpsdk.AgentMethodSessionNew, map[string]any{
		"cwd": ws, "mcpServers": []any{},
	})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	if launch.Mode != "" && sess.Modes != nil && string(sess.Modes.CurrentModeId) != launch.Mode {
		if err := conn.SendRequestNoResult(ctx, acpsdk.AgentMethodSessionSetMode, map[string]string{
			"sessionId": string(sess.SessionId), "modeId": launch.Mode,
		}); err != nil {
			return fmt.Errorf("session/set_mode: %w", err)
		}
	}
	if _, err := acpsdk.SendRequest[acpsdk.PromptResponse](conn, ctx, acpsdk.AgentMethodSessionPrompt, map[string]any{
		"sessionId": sess.SessionId, "prompt": []map[string]string{{"type": "text", "text": helloPrompt}},
	}); err != nil {
		return fmt.Errorf("session/prompt: %w", err)
	}
	return nil
}

// handle reads session/update raw, as runnel does: agents send update
// kinds the SDK's typed client cannot decode. Every request is answered
// method-not-found (a "Say hello" turn asks nothing of the client), and
// other notifications are ignored.
func (c *aloneClient) handle(_ context.Context, method string, params json.RawMessage) (any, *acpsdk.RequestError) {
	if method != acpsdk.ClientMethodSessionUpdate {
		return nil, acpsdk.NewMethodNotFound(method)
	}
	var n struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil || n.Update.SessionUpdate != "agent_message_chunk" ||
		n.Update.Content.Type != "text" || n.Update.Content.Text == "" {
		return nil, nil
	}
	// runnel emits message_delta for exactly these chunks.
	c.firstText.CompareAndSwap(0, int64(time.Since(c.start)))
	c.mu.Lock()
	c.said.WriteString(n.Update.Content.Text)
	c.mu.Unlock()
	return nil, nil
}

func (c *aloneClient) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.said.String()
}

// reaper starts agents and collects their whole process trees, so that
// RUSAGE_CHILDREN counts every process an agent started: this program is
// the child subreaper of its descendants, so a process whose parent died
// (killed with its group, or left behind by setsid) becomes its child and
// is waited for here instead of by init. keep names the long-lived
// children (runnel serve) that are not to be touched.
type reaper struct {
	mu   sync.Mutex
	kept map[int]bool
}

func newReaper() (*reaper, error) {
	if err := setChildSubreaper(); err != nil {
		return nil, err
	}
	return &reaper{kept: map[int]bool{}}, nil
}

func (r *reaper) keep(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept[pid] = true
}

func (r *reaper) isKept(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kept[pid]
}

// agentProc is one started agent.
type agentProc struct {
	r      *reaper
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *tail
	exited chan struct{}
}

// start starts argv in its own process group, in dir, with exactly env.
func (r *reaper) start(argv, env []string, dir string) (*agentProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &agentProc{r: r, cmd: cmd, stderr: &tail{max: 8 << 10}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = time.Second
	// Pipes of our own, not cmd.StdinPipe/StdoutPipe: Wait would close
	// those while the ACP connection may still read the last lines.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, inR.Close(), inW.Close())
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start %s: %w", argv[0], err), inW.Close(), outR.Close())
	}
	p.stdin, p.stdout = inW, outR
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// end ends the agent as runnel's sandbox.Process.End does: its input
// closes, sandbox.AwaitExit gives it grace to exit (SIGTERM after
// sandbox.TermAfter), then its group is killed; and it returns once
// every process of its tree has been reaped.
func (p *agentProc) end(grace time.Duration) error {
	p.stdin.Close()
	sandbox.AwaitExit(p.exited, func() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }, grace)
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
	err := p.r.reapOrphans(5 * time.Second)
	p.stdout.Close()
	return err
}

// reapOrphans kills and waits for every child of this process that it
// did not start on purpose: the agent's descendants, reparented here
// once their parents died. It returns once none is left.
func (r *reaper) reapOrphans(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	self := os.Getpid()
	for {
		orphans, err := childrenOf(self)
		if err != nil {
			return err
		}
		var left []int
		for _, pid := range orphans {
			if !r.isKept(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v outlived their agent", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			// Only this pid: wait4(-1) would steal the status of a
			// process os/exec is waiting for.
			for {
				if _, err := syscall.Wait4(pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
					break
				}
			}
		}
	}
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it exited and was reaped meanwhile
		}
		i := strings.LastIndexByte(string(raw), ')')
		if i < 0 {
			continue
		}
		// After the command name: state, then the parent's pid.
		f := strings.Fields(string(raw[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out, nil
}

// childrenCPU is the user+system time of every child this process has
// waited for, and of theirs (getrusage RUSAGE_CHILDREN).
func childrenCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// tail keeps the last max bytes written to it: the end of an agent's
// stderr, to explain a failure.
type tail struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

// sentence is the tail as the end of an error message, or "".
func (t *tail) sentence() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.buf)); s != "" {
		return " (its stderr ends: " + s + ")"
	}
	return ""
}
