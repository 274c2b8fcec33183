package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// slowText is what the fake model streams: 120 pieces, one a second, so a
// run stays open for two minutes unless the client leaves first (it does,
// once the measurement is taken).
func slowScript() []byte {
	script := map[string]any{"rules": []map[string]any{
		{
			"name":  "warm-up",
			"when":  map[string]any{"lastUserContains": "warm up"},
			"reply": map[string]any{"text": "warm"},
		},
		{
			"name": "slow",
			"reply": map[string]any{
				"text":         strings.Repeat("lorem ", 120),
				"chunkSize":    6,
				"tokenDelayMs": 1000,
			},
		},
	}}
	raw, err := json.Marshal(script)
	if err != nil {
		panic(err) // a literal map of strings and numbers always encodes
	}
	return raw
}

// proc is a runnel subprocess listening on a loopback port.
type proc struct {
	url string
	cmd *exec.Cmd
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// close sends SIGTERM and waits up to 10 s before killing.
func (p *proc) close() { benchkit.StopProcess(p.cmd, syscall.SIGTERM, 10*time.Second) }

// upstreamTLS is what an HTTPS fake model serves with and what runnel
// and the probe trust; nil means plain HTTP/1.1.
type upstreamTLS struct {
	cert, key string
	client    func() *http.Client
}

// startMockLLM starts `runnel mockllm --script FILE --addr 127.0.0.1:PORT`,
// serving HTTPS and HTTP/2 with tls set.
func startMockLLM(ctx context.Context, bin, script string, tls *upstreamTLS) (*proc, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"mockllm", "--script", script, "--addr", addr}
	scheme, probe := "http://", &http.Client{Transport: &http.Transport{}}
	if tls != nil {
		args = append(args, "--tls-cert", tls.cert, "--tls-key", tls.key)
		scheme, probe = "https://", tls.client()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	p, err := startWith(ctx, cmd, probe, scheme+addr, "/v1/models")
	if err != nil {
		return nil, fmt.Errorf("runnel mockllm: %w", err)
	}
	return p, nil
}

// startServe starts `runnel serve` on a loopback port with its concurrency
// limit raised to limit, trusting the fake model's certificate if it has one.
func startServe(ctx context.Context, bin string, limit int, tls *upstreamTLS) (*proc, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = append(os.Environ(),
		"RUNNEL_HOST=127.0.0.1",
		"RUNNEL_PORT="+strconv.Itoa(port),
		"RUNNEL_CONCURRENCY_LIMIT="+strconv.Itoa(limit),
		"RUNNEL_TOKEN=", "RUNNEL_TOKEN_FILE=", // empty counts as unset: no 401s from the caller's environment
	)
	if tls != nil {
		cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+tls.cert) // Go's roots on Linux come from it
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	p, err := start(ctx, cmd, fmt.Sprintf("http://127.0.0.1:%d", port), "/health")
	if err != nil {
		return nil, fmt.Errorf("runnel serve: %w", err)
	}
	return p, nil
}

// start runs cmd and waits until GET url+probe answers 200.
func start(ctx context.Context, cmd *exec.Cmd, url, probe string) (*proc, error) {
	return startWith(ctx, cmd, &http.Client{Transport: &http.Transport{}}, url, probe)
}

// startWith is start probing with client.
func startWith(ctx context.Context, cmd *exec.Cmd, client *http.Client, url, probe string) (*proc, error) {
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{url: url, cmd: cmd}
	if err := benchkit.WaitHealthyWith(ctx, client, url+probe, 15*time.Second); err != nil {
		p.close()
		return nil, fmt.Errorf("not answering GET %s: %w", probe, err)
	}
	return p, nil
}
