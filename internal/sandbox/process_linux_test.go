package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A long-lived program talks over its pipes, and when it is ended,
// everything it started is gone however it tried to get away: the agent
// an ACP run starts must not outlive the run.
func TestProcessEndLeavesNothingBehind(t *testing.T) {
	forEachMechanism(t, func(t *testing.T, workspace func(*testing.T) *Workspace) {
		ws := workspace(t)
		script := `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim
			read line; echo "got $line"; exec cat >/dev/null`
		p, err := StartProcess(ws, []string{"/bin/sh", "-c", script}, &ProcessOptions{Env: []string{"PATH=" + DefaultPath}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintln(p.Stdin, "hello"); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(p.Stdout).ReadString('\n')
		if err != nil || line != "got hello\n" {
			t.Fatalf("read %q, %v", line, err)
		}
		victim := readProcStat(t, ws, "victim")
		t.Cleanup(func() { killSession(t, victim.pid) })
		if err := p.End(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		assertGone(t, victim)
		select {
		case <-p.Exited():
		default:
			t.Error("End returned before the program exited")
		}
		if _, err := p.Stdout.Read(make([]byte, 1)); err == nil {
			t.Errorf("stdout still readable after End: %v", err)
		}
	})
}

// A program that exits by itself when its input closes is given the
// grace to do so, and its exit status is kept.
func TestProcessEndsGracefully(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	p, err := StartProcess(ws, []string{"/bin/sh", "-c", "cat >/dev/null; exit 7"}, &ProcessOptions{Env: []string{"PATH=" + DefaultPath}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.End(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := p.ExitCode(); got != 7 {
		t.Errorf("exit code %d, want 7 (the program's own, not a kill)", got)
	}
}

// A program that keeps running after its input closes is asked to stop
// with SIGTERM before the grace runs out, so it can exit cleanly (and the
// run need not wait out the grace); it is not killed outright.
func TestProcessEndTerminatesAProgramThatIgnoresItsInput(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	script := `trap 'echo terminated > note; exit 3' TERM; echo ready; while :; do sleep 0.05; done`
	p, err := StartProcess(ws, []string{"/bin/sh", "-c", script}, &ProcessOptions{Env: []string{"PATH=" + DefaultPath}})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(p.Stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	if err := p.End(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := p.ExitCode(); got != 3 {
		t.Errorf("exit code %d, want 3 (its own, from its SIGTERM trap)", got)
	}
	if note, err := os.ReadFile(filepath.Join(ws.Dir(), "note")); err != nil || string(note) != "terminated\n" {
		t.Errorf("note %q, %v: the program was not asked to stop", note, err)
	}
}
