package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/sandbox"
)

func TestBash(t *testing.T) {
	t.Setenv("RUNNEL_TOKEN", "x-secret-token")
	e := newBuiltinEnv(t, &BuiltinOptions{Command: &sandbox.CommandOptions{MaxTimeout: time.Minute}})
	e.file(t, "data.txt", "42\n")
	e.run(t, "bash", []toolCase{
		{"output", args{"command": "cat data.txt; echo err >&2"}, "42\nerr\n", false},
		{"no output", args{"command": "true"}, "(no output)", false},
		{"non-zero exit", args{"command": "echo failing; exit 3"}, "failing\n\nExit code: 3", true},
		{"non-zero exit, no output", args{"command": "exit 1"}, "Exit code: 1", true},
		{"token does not leak", args{"command": `echo "[$RUNNEL_TOKEN]"`}, "[]\n", false},
		{"timeout", args{"command": "echo begun; sleep 300", "timeout_ms": 300},
			"begun\n\nThe command timed out after 300ms and was killed, with every process it started. Give a longer timeout_ms (at most 1m0s) or split the work into shorter commands.", true},
		{"timeout as a string", args{"command": "sleep 300", "timeout_ms": "300"},
			"The command timed out after 300ms and was killed, with every process it started. Give a longer timeout_ms (at most 1m0s) or split the work into shorter commands.", true},
		{"blank command", args{"command": "  "}, "Tool 'bash' missing required argument(s): command. Retry the tool call with those argument fields populated.", true},
	})
	if !strings.Contains(e.tools["bash"].Description, "The timeout is 2m0s unless timeout_ms says otherwise (at most 1m0s)") &&
		!strings.Contains(e.tools["bash"].Description, "The timeout is 1m0s unless timeout_ms says otherwise (at most 1m0s)") {
		t.Errorf("bash description does not state its timeouts: %q", e.tools["bash"].Description)
	}
}

// A bash call whose run is cancelled kills what it started and says so.
func TestBashCancelled(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	fifo := filepath.Join(e.ws.Dir(), "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	type out struct {
		text  string
		isErr bool
	}
	done := make(chan out, 1)
	go func() {
		text, isErr := e.callCtx(t, ctx, "bash", args{"command": "echo ready > ready; sleep 300"})
		done <- out{text, isErr}
	}()
	if _, err := os.ReadFile(fifo); err != nil { // returns once the command has started
		t.Fatal(err)
	}
	cancel()
	got := <-done
	if want := "The command was cancelled because the run ended; everything it started was killed."; got.text != want || !got.isErr {
		t.Errorf("cancelled bash = %q (isError %v), want %q", got.text, got.isErr, want)
	}
}

func TestBashWritesInTheWorkspace(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	if _, isErr := e.call(t, "bash", args{"command": "mkdir -p out && echo made > out/f && pwd"}); isErr {
		t.Fatal("bash failed")
	}
	if got := e.content(t, "out/f"); got != "made\n" {
		t.Errorf("out/f = %q", got)
	}
	got, _ := e.call(t, "read", args{"path": "out/f"})
	if got != "     1\tmade\n" {
		t.Errorf("read after bash = %q", got)
	}
}
