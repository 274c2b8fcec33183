package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// startRunnel starts bin as `runnel serve` on 127.0.0.1 with the caller's
// environment. An empty variable counts as unset: a token in the caller's
// environment must not turn every benchmark request into a 401.
func startRunnel(ctx context.Context, bin string) (*benchkit.Runnel, error) {
	return benchkit.StartRunnel(ctx, bin, append(os.Environ(), "RUNNEL_TOKEN=", "RUNNEL_TOKEN_FILE="))
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
		benchkit.StopProcess(p.cmd, nil, 5*time.Second)
	})
}
