package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// everythingServer is the reference server @modelcontextprotocol/server-everything
// (from npm) running in streamable-HTTP mode on a loopback port.
type everythingServer struct {
	url  string
	port string

	mu    sync.Mutex
	lines []string      // stdout, where it logs each request
	seen  chan struct{} // closed and replaced on every line
}

// startEverything starts the server whose entry script is named by
// RUNNEL_TEST_SERVER_EVERYTHING, and stops it when the test ends.
func startEverything(t *testing.T) *everythingServer {
	t.Helper()
	entry := os.Getenv("RUNNEL_TEST_SERVER_EVERYTHING")
	if entry == "" {
		t.Skip("RUNNEL_TEST_SERVER_EVERYTHING is not set: it names the dist/index.js of @modelcontextprotocol/server-everything, which .ci/run installs")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("RUNNEL_TEST_SERVER_EVERYTHING is set but node is not installed: %v", err)
	}
	// The server takes its port from PORT and cannot report one it picked
	// itself, so take a free loopback port and hand it over.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &everythingServer{url: "http://127.0.0.1:" + port + "/mcp", port: port, seen: make(chan struct{})}
	ready := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Go(func() { s.collect(stdout) })
	readers.Go(func() {
		sc := bufio.NewScanner(stderr)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- ""
			}
		}
		ready <- strings.Join(log, "\n") // the process ended
	})
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		readers.Wait()
	})
	select {
	case msg := <-ready:
		if msg != "" || cmd.ProcessState != nil {
			t.Fatalf("server-everything did not start:\n%s", msg)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything did not start within a minute")
	}
	return s
}

func (s *everythingServer) collect(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		close(s.seen)
		s.seen = make(chan struct{})
		s.mu.Unlock()
	}
}

// waitFor waits until the server has logged a line containing text.
func (s *everythingServer) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		seen := s.seen
		for _, l := range s.lines {
			if strings.Contains(l, text) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("server-everything never logged %q", text)
		}
	}
}

func TestServerEverything(t *testing.T) {
	s := startEverything(t)
	opts := &Options{Guard: GuardOptions{HostAllowlist: []string{"127.0.0.1:" + s.port}}}
	pool := Connect(t.Context(), []ServerSpec{httpSpec("everything", s.url)}, opts)
	defer pool.Close()
	if n := pool.Notices(); len(n) != 0 {
		t.Fatalf("notices: %q", n)
	}
	echo := toolNamed(t, pool, "echo")
	if echo.QualifiedName != "mcp__everything__echo" || echo.ReadOnly == nil || !*echo.ReadOnly {
		t.Errorf("echo = %+v", echo)
	}
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Properties["message"].Type != "string" {
		t.Errorf("echo schema = %s (%v)", echo.InputSchema, err)
	}

	tests := []struct{ tool, args, want string }{
		{"mcp__everything__echo", `{"message":"hello"}`, "Echo: hello"},
		{"mcp__everything__get-sum", `{"a":2,"b":3}`, "The sum of 2 and 3 is 5."},
		{"mcp__everything__get-tiny-image", `{}`, "Here's the image you requested:\n[image image/png, "},
	}
	for _, tt := range tests {
		res, err := pool.Call(t.Context(), tt.tool, json.RawMessage(tt.args))
		if err != nil || res.IsError || !strings.HasPrefix(res.Content, tt.want) {
			t.Errorf("%s = %+v, %v; want a result starting %q", tt.tool, res, err, tt.want)
		}
	}

	// A long operation cut short by its context: the call ends, and the
	// session still closes cleanly afterwards.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := pool.Call(ctx, "mcp__everything__trigger-long-running-operation", json.RawMessage(`{"duration":30,"steps":3}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("long operation: %v, want a deadline error", err)
	}

	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "Received session termination request")
}
