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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runnelProc is a `runnel serve` subprocess on a loopback port.
type runnelProc struct {
	url string
	cmd *exec.Cmd
}

// startRunnel starts bin as `runnel serve` on 127.0.0.1 and waits for
// GET /health. Configuration goes through the documented RUNNEL_*
// variables; extraEnv adds or overrides some.
func startRunnel(ctx context.Context, bin string, extraEnv ...string) (*runnelProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "serve")
	// An empty variable counts as unset: a token in the caller's
	// environment must not turn every benchmark request into a 401.
	cmd.Env = append(os.Environ(), "RUNNEL_HOST=127.0.0.1", "RUNNEL_PORT="+strconv.Itoa(port),
		"RUNNEL_TOKEN=", "RUNNEL_TOKEN_FILE=")
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout = io.Discard
	cmd.Stderr = io.Discard // one log line per run would cost the same on every run; keep the terminal clean
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	p := &runnelProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	if err := waitHealthy(ctx, p.url+"/health", 15*time.Second); err != nil {
		p.close()
		return nil, fmt.Errorf("runnel serve did not become healthy: %w", err)
	}
	return p, nil
}

func (p *runnelProc) pid() int { return p.cmd.Process.Pid }

// cpu is the user+system time the process has used, from /proc/PID/stat
// (clock ticks, normally 100 per second).
func (p *runnelProc) cpu() time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	rest := raw[bytes.LastIndexByte(raw, ')')+2:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // sysconf(_SC_CLK_TCK) on Linux
	return time.Duration(ut+st) * time.Second / ticksPerSecond
}

// close asks runnel to drain (SIGTERM), then kills it if it lingers.
func (p *runnelProc) close() { stopProcess(p.cmd, syscall.SIGTERM, 10*time.Second) }

// stopProcess sends sig (when not nil) and waits up to grace for the
// process to exit, then kills it. It is the one place that calls cmd.Wait.
func stopProcess(cmd *exec.Cmd, sig os.Signal, grace time.Duration) {
	if sig != nil {
		_ = cmd.Process.Signal(sig)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitHealthy(ctx context.Context, url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", url, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// nodeProc is bench/aisdk/steploop.mjs running under Node.
type nodeProc struct {
	version string // "ai@7.0.173 on Node v22.23.3"
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   *bufio.Reader
	once    sync.Once
}

// startNode starts the AI SDK side. dir is bench/aisdk (with its
// node_modules installed); node is the Node binary.
func startNode(ctx context.Context, node, dir string, u fakeURLs, steps int) (*nodeProc, error) {
	ver, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", node, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", "ai", "package.json"))
	if err == nil {
		err = json.Unmarshal(raw, &pkg)
	}
	if err != nil {
		return nil, fmt.Errorf("the AI SDK is not installed in %s (run npm ci there): %w", dir, err)
	}
	cmd := exec.CommandContext(ctx, node, "steploop.mjs", "--model", u.Model, "--callback", u.Callback,
		"--steps", strconv.Itoa(steps), "--key", apiKey)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	return &nodeProc{
		version: fmt.Sprintf("ai@%s on Node %s", pkg.Version, strings.TrimSpace(string(ver))),
		cmd:     cmd, stdin: stdin, lines: bufio.NewReader(stdout),
	}, nil
}

// call sends one command line and decodes the one answer line.
func (p *nodeProc) call(ctx context.Context, in, out any) error {
	line, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write to node: %w", err)
	}
	type answer struct {
		line []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		l, err := p.lines.ReadBytes('\n')
		got <- answer{l, err}
	}()
	select {
	case a := <-got:
		if a.err != nil {
			return fmt.Errorf("node exited or failed (see its stderr above): %w", a.err)
		}
		return json.Unmarshal(a.line, out)
	case <-ctx.Done():
		p.close() // unblocks the reader
		<-got
		return ctx.Err()
	}
}

// close ends the process: closing stdin ends its command loop.
func (p *nodeProc) close() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		stopProcess(p.cmd, nil, 5*time.Second)
	})
}
