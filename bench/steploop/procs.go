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

// defaultMaxBody is runnel serve's default RUNNEL_MAX_BODY_BYTES.
const defaultMaxBody = 8 << 20

// startRunnel starts bin as `runnel serve` on 127.0.0.1 with the caller's
// environment, its step limit raised to the turn's steps+1 model calls
// (RUNNEL_MAX_STEPS, 50 by default, would end a turn of 50 tool steps or
// more early) and its body limit to twice the request when the default is
// too small. An empty variable counts as unset: a token in the caller's
// environment must not turn every benchmark request into a 401.
func startRunnel(ctx context.Context, bin string, steps, bodyBytes int) (*benchkit.Runnel, error) {
	return benchkit.StartRunnel(ctx, bin, append(os.Environ(), "RUNNEL_TOKEN=", "RUNNEL_TOKEN_FILE=",
		"RUNNEL_MAX_STEPS="+strconv.Itoa(steps+1),
		"RUNNEL_MAX_BODY_BYTES="+strconv.Itoa(max(defaultMaxBody, 2*bodyBytes))))
}

// nodeProc is bench/aisdk/steploop.mjs running under Node.
type nodeProc struct {
	version string // "ai@7.0.173 on Node v22.23.3"
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   *bufio.Reader
	once    sync.Once
	// histFile is the replayed history handed to the script, removed by
	// close; "" for none.
	histFile string
}

// startNode starts the AI SDK side. dir is bench/aisdk (with its
// node_modules installed); node is the Node binary; hist (nil for none) is
// written to a file the script reads once.
func startNode(ctx context.Context, node, dir string, u fakeURLs, steps int, hist *history) (p *nodeProc, err error) {
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
	args := []string{"steploop.mjs", "--model", u.Model, "--callback", u.Callback, "--steps", strconv.Itoa(steps), "--key", apiKey}
	var histFile string
	if hist != nil {
		if histFile, err = writeHistory(hist); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = os.Remove(histFile)
			}
		}()
		args = append(args, "--history", histFile)
	}
	cmd := exec.CommandContext(ctx, node, args...)
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
		cmd:     cmd, stdin: stdin, lines: bufio.NewReader(stdout), histFile: histFile,
	}, nil
}

// writeHistory writes the history in both of the script's forms, Chat
// Completions messages (its floor's) and ModelMessages (the SDK's), to a
// temporary file.
func writeHistory(hist *history) (string, error) {
	f, err := os.CreateTemp("", "steploop-history-*.json")
	if err != nil {
		return "", err
	}
	err = json.NewEncoder(f).Encode(map[string]any{"chat": hist.chat, "model": hist.modelMessages})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write the history for node: %w", err)
	}
	return f.Name(), nil
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
		if p.histFile != "" {
			_ = os.Remove(p.histFile)
		}
	})
}
