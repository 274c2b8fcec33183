// Package mcptest runs the MCP reference server,
// @modelcontextprotocol/server-everything from npm, for tests that need a
// real third-party MCP server over a real socket:
//
//	s := mcptest.StartEverything(t) // skips unless RUNNEL_TEST_SERVER_EVERYTHING is set
//	pool := mcp.Connect(ctx, []mcp.ServerSpec{{Name: "everything", URL: s.URL, …}}, opts)
//
// .ci/run installs the server and sets RUNNEL_TEST_SERVER_EVERYTHING to its
// dist/index.js, so in CI these tests always run.
package mcptest

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Everything is the reference server @modelcontextprotocol/server-everything
// (from npm) running in streamable-HTTP mode on a loopback port.
type Everything struct {
	URL  string
	Port string

	mu    sync.Mutex
	lines []string      // stdout, where it logs each request
	seen  chan struct{} // closed and replaced on every line
}

// StartEverything starts the server whose entry script is named by
// RUNNEL_TEST_SERVER_EVERYTHING, and stops it when the test ends.
func StartEverything(t testing.TB) *Everything {
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
	s := &Everything{URL: "http://127.0.0.1:" + port + "/mcp", Port: port, seen: make(chan struct{})}
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

func (s *Everything) collect(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		close(s.seen)
		s.seen = make(chan struct{})
		s.mu.Unlock()
	}
}

// WaitFor waits until the server has logged a line containing text.
func (s *Everything) WaitFor(t testing.TB, text string) {
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
