package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRunCommand(t *testing.T) {
	t.Setenv("RUNNEL_TOKEN", "secret-token-value")
	ws := newTestWorkspace(t, nil)
	cases := []struct {
		name    string
		command string
		opts    *CommandOptions
		want    CommandResult
	}{
		{"stdout and stderr", "echo out; echo err >&2; echo out2", nil,
			CommandResult{Output: "out\nerr\nout2\n"}},
		{"exit code", "echo failing; exit 3", nil, CommandResult{ExitCode: 3, Output: "failing\n"}},
		{"killed by a signal", "kill -TERM $$", nil, CommandResult{ExitCode: 128 + int(syscall.SIGTERM)}},
		{"runs in the workspace", "pwd", nil, CommandResult{Output: ws.Dir() + "\n"}},
		{"scrubbed environment", `echo "token=[$RUNNEL_TOKEN] home=$HOME term=$TERM lang=$LANG path=$PATH"`, nil,
			CommandResult{Output: fmt.Sprintf("token=[] home=%s term=dumb lang=C.UTF-8 path=%s\n", ws.Dir(), DefaultPath)}},
		{"extra environment", `echo "$FOO $TERM"`, &CommandOptions{Env: []string{"FOO=bar", "TERM=xterm"}},
			CommandResult{Output: "bar xterm\n"}},
		{"no stdin", "cat", nil, CommandResult{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := RunCommand(t.Context(), ws, c.command, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			got.Duration, got.Timeout = 0, 0
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("RunCommand(%q) (-want +got):\n%s", c.command, diff)
			}
		})
	}
}

// Nothing of the runnel process's environment reaches the command, not
// only the variables a test thought to ask about.
func TestRunCommandEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("RUNNEL_TOKEN", "secret-token-value")
	ws := newTestWorkspace(t, nil)
	res, err := RunCommand(t.Context(), ws, "env", nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		name, _, _ := strings.Cut(line, "=")
		names = append(names, name)
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TERM": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for _, n := range names {
		if !allowed[n] {
			t.Errorf("the command sees %s from outside", n)
		}
	}
	if strings.Contains(res.Output, "secret-token-value") {
		t.Error("the command sees the token's value")
	}
}

func TestRunCommandOutputCapped(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	// 50,000 bytes: "a" × 25,000 then "b" × 25,000.
	cmd := `i=0; while [ $i -lt 250 ]; do printf '%0100d' 0 | tr 0 a; i=$((i+1)); done; i=0; while [ $i -lt 250 ]; do printf '%0100d' 0 | tr 0 b; i=$((i+1)); done`
	res, err := RunCommand(t.Context(), ws, cmd, &CommandOptions{MaxOutput: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("a", 500) + " [... 49000 bytes omitted] " + strings.Repeat("b", 500)
	if res.Output != want {
		t.Errorf("Output = %.80q…, want %.80q…", res.Output, want)
	}
	if res.Omitted != 49000 {
		t.Errorf("Omitted = %d, want 49000", res.Omitted)
	}
}

// The timeout kills the shell and everything it started in its group,
// a background grandchild included.
func TestRunCommandTimeoutKillsTheGroup(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	res, err := RunCommand(t.Context(), ws, "echo started; sleep 300 & echo $! > pid; sleep 300",
		&CommandOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Errorf("TimedOut = false, want true (result %+v)", res)
	}
	if res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("ExitCode = %d, want %d", res.ExitCode, 128+int(syscall.SIGKILL))
	}
	if res.Output != "started\n" {
		t.Errorf("Output = %q, want the output printed before the timeout", res.Output)
	}
	assertDead(t, readPid(t, ws, "pid"))
}

// A cancelled run kills the group too, and the error says so.
func TestRunCommandCancelKillsTheGroup(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	fifo := filepath.Join(ws.Dir(), "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := RunCommand(ctx, ws, "sleep 300 & echo $! > pid; echo ready > ready; sleep 300", nil)
		done <- err
	}()
	// Opening the FIFO blocks until the command writes to it: by then the
	// grandchild's pid is on disk.
	if _, err := os.ReadFile(fifo); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RunCommand error = %v, want context.Canceled", err)
	}
	assertDead(t, readPid(t, ws, "pid"))
}

// A command that leaves a background process behind returns when the
// shell exits, and the process dies with the group.
func TestRunCommandBackgroundDiesAtExit(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	res, err := RunCommand(t.Context(), ws, "sleep 300 & echo $! > pid; echo done", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "done\n" || res.ExitCode != 0 || res.TimedOut {
		t.Errorf("result = %+v, want done, exit 0", res)
	}
	assertDead(t, readPid(t, ws, "pid"))
}

// A process that leaves the group (setsid) survives the kill and holds
// the output pipe open; the call still returns.
func TestRunCommandEscapedProcessCannotHang(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	ws := newTestWorkspace(t, nil)
	res, err := RunCommand(t.Context(), ws, "setsid sleep 300 & echo $! > pid; echo done", nil)
	pid := readPid(t, ws, "pid")
	t.Cleanup(func() { killEscapee(t, pid) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "done\n" {
		t.Errorf("Output = %q, want done", res.Output)
	}
}

func TestRunCommandCannotStart(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	if err := os.Remove(ws.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := RunCommand(t.Context(), ws, "true", nil); err == nil {
		t.Error("RunCommand in a missing directory succeeded")
	}
}

func TestCommandTimeout(t *testing.T) {
	cases := []struct {
		opts CommandOptions
		want time.Duration
	}{
		{CommandOptions{}, DefaultCommandTimeout},
		{CommandOptions{Timeout: time.Second}, time.Second},
		{CommandOptions{Timeout: time.Hour}, DefaultMaxCommandTimeout},
		{CommandOptions{Timeout: time.Hour, MaxTimeout: 20 * time.Minute}, 20 * time.Minute},
		{CommandOptions{MaxTimeout: time.Minute}, time.Minute},
	}
	for _, c := range cases {
		if got := commandTimeout(c.opts); got != c.want {
			t.Errorf("commandTimeout(%+v) = %v, want %v", c.opts, got, c.want)
		}
	}
}

// capture keeps the same head and tail whatever sizes the writes come in.
func TestCapture(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 9, 10, 11, 25, 1000} {
		data := make([]byte, size)
		for i := range data {
			data[i] = 'a' + byte(i%26)
		}
		want := string(data)
		if size > 10 {
			want = fmt.Sprintf("%s [... %d bytes omitted] %s", data[:5], size-10, data[size-5:])
		}
		for range 20 {
			c := newCapture(10)
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(13))
				c.Write(rest[:n])
				rest = rest[n:]
			}
			if got, _ := c.result(); got != want {
				t.Errorf("size %d: result = %q, want %q", size, got, want)
				break
			}
		}
	}
}

// The cut never splits a character.
func TestCaptureUTF8(t *testing.T) {
	c := newCapture(10)
	c.Write([]byte(strings.Repeat("é", 20))) // 40 bytes
	got, omitted := c.result()
	want := "éé [... 32 bytes omitted] éé"
	if got != want || omitted != 32 {
		t.Errorf("result = %q, %d; want %q, 32", got, omitted, want)
	}
}

func readPid(t *testing.T, ws *Workspace, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws.Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
