package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Some tests need a second runnel process: one that holds a workspace
// open, one that crashes in the middle of a command, one without root's
// privileges. The test binary re-executes itself with helperEnv naming
// the helper to run instead of the tests.
const (
	helperEnv    = "RUNNEL_SANDBOX_TEST_HELPER"
	helperArgEnv = "RUNNEL_SANDBOX_TEST_HELPER_ARG"
)

// runHelper runs the named helper and returns the process's exit code.
func runHelper(name, arg string) int {
	helpers := map[string]func(string) error{
		"hold-workspace":    helperHoldWorkspace,
		"close-workspace":   closeUnwritableWorkspace,
		"contained-command": helperContainedCommand,
	}
	h, ok := helpers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
		return 2
	}
	if err := h(arg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperHoldWorkspace opens a workspace under root, prints its directory,
// and closes it when its stdin closes.
func helperHoldWorkspace(root string) error {
	ws, err := NewWorkspace(root, nil)
	if err != nil {
		return err
	}
	fmt.Println(ws.Dir())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return ws.Close()
}

// helperContainedCommand probes for cgroup containment, opens a workspace
// under root, and runs a command in it that starts a process in a
// session of its own (its /proc stat in the file victim) and waits. Once
// the command is under way it prints its cgroup and workspace
// directories; when stdin closes it cancels the command and closes all.
func helperContainedCommand(root string) error {
	c, err := ProbeContainment(nil)
	if err != nil {
		return err
	}
	if c.Mechanism() != MechanismCgroup {
		return fmt.Errorf("no cgroup containment: %s", c.Detail())
	}
	ws, err := NewWorkspace(root, &WorkspaceOptions{Containment: c})
	if err != nil {
		return errors.Join(err, c.Close())
	}
	if err := syscall.Mkfifo(filepath.Join(ws.Dir(), "ready"), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunCommand(ctx, ws, `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim; echo > ready; exec sleep 1000`, nil)
		done <- err
	}()
	if _, err := os.ReadFile(filepath.Join(ws.Dir(), "ready")); err != nil {
		return err
	}
	fmt.Println(c.cgroupDir)
	fmt.Println(ws.Dir())
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	<-done
	return errors.Join(ws.Close(), c.Close())
}

// closeUnwritableWorkspace checks that Close removes what a careless
// command leaves behind: a directory nobody may write to, holding more.
// It fails when permission bits do not bind the process (root), since
// then it would prove nothing.
func closeUnwritableWorkspace(root string) error {
	ws, err := NewWorkspace(root, nil)
	if err != nil {
		return err
	}
	locked := filepath.Join(ws.Dir(), "locked")
	for _, d := range []string{filepath.Join(locked, "deep"), filepath.Join(locked, "empty")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(locked, "deep", "f"), []byte("x"), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(locked, 0o500); err != nil {
		return err
	}
	if err := syscall.Rmdir(filepath.Join(locked, "empty")); !errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("removing a directory from an unwritable one: %v, want EACCES: permission bits do not bind this process", err)
	}
	if err := ws.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	if _, err := os.Stat(ws.Dir()); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("after Close, Stat(workspace) = %v, want not exist", err)
	}
	return nil
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startHelper starts the named helper; it is killed, if still running,
// when the test ends.
func startHelper(t *testing.T, name, arg string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+name, helperArgEnv+"="+arg)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

// line reads the next line the helper prints.
func (h *helper) line(t *testing.T) string {
	t.Helper()
	if !h.out.Scan() {
		t.Fatalf("the helper printed nothing: %v", h.out.Err())
	}
	return strings.TrimSpace(h.out.Text())
}

// crash kills the helper as a crash would: no deferred cleanup runs.
func (h *helper) crash(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
}

// finish closes the helper's stdin and waits for it to exit cleanly.
func (h *helper) finish(t *testing.T) {
	t.Helper()
	_ = h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
}
