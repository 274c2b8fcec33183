package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// containedMechanisms are the mechanisms that promise that nothing a
// command starts outlives it.
var containedMechanisms = []Mechanism{MechanismCgroup, MechanismSubreaper}

// probeForTest probes for mechanism m, skips the test when the host does
// not give it, and closes it when the test ends, checking that Close
// leaves no cgroup behind.
func probeForTest(t *testing.T, m Mechanism) *Containment {
	t.Helper()
	c, err := ProbeContainment(&ContainmentOptions{Prefer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if c.cgroupDir != "" {
			if _, err := os.Stat(c.cgroupDir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Close left the cgroup %s (%v)", c.cgroupDir, err)
			}
		}
	})
	if got := c.Mechanism(); got != m {
		t.Skipf("this host gives %s, not %s: %s", got, m, c.Detail())
	}
	return c
}

// forEachMechanism runs f once per contained mechanism; f's workspace
// function gives a fresh workspace using it. The commands of these tests
// escape with setsid(1).
func forEachMechanism(t *testing.T, f func(t *testing.T, workspace func(*testing.T) *Workspace)) {
	requireSetsid(t)
	for _, m := range containedMechanisms {
		t.Run(string(m), func(t *testing.T) {
			c := probeForTest(t, m)
			f(t, func(t *testing.T) *Workspace {
				return newTestWorkspace(t, &WorkspaceOptions{Containment: c})
			})
		})
	}
}

// requireSetsid skips a test whose commands escape with setsid(1) where
// it is not installed.
func requireSetsid(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
}

// A command's processes are all gone, not even zombies, when RunCommand
// returns, however they tried to get away.
func TestRunCommandLeavesNothingBehind(t *testing.T) {
	attacks := []struct {
		name    string
		command string
	}{
		{"setsid", `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim`},
		{"setsid --fork", `setsid -f sh -c 'cat /proc/$$/stat > victim.tmp; mv victim.tmp victim; exec sleep 1000' >/dev/null 2>&1
			while [ ! -e victim ]; do sleep 0.01; done`},
		{"double fork", `(sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim) & wait`},
		{"nohup", `nohup sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim`},
	}
	forEachMechanism(t, func(t *testing.T, workspace func(*testing.T) *Workspace) {
		for _, a := range attacks {
			t.Run(a.name, func(t *testing.T) {
				ws := workspace(t)
				res, err := RunCommand(t.Context(), ws, a.command, nil)
				victim := readProcStat(t, ws, "victim")
				t.Cleanup(func() { killSession(t, victim.pid) })
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("RunCommand = %+v, %v", res, err)
				}
				assertGone(t, victim)
			})
		}
	})
}

// A process forking in a loop in a session of its own is ended with every
// child it managed to start.
func TestRunCommandEndsAForkLoop(t *testing.T) {
	forEachMechanism(t, func(t *testing.T, workspace func(*testing.T) *Workspace) {
		ws := workspace(t)
		cmd := `setsid sh -c 'while :; do sleep 1000 & echo > forked; sleep 0.01; done' >/dev/null 2>&1 &
			cat /proc/$!/stat > victim
			while [ ! -e forked ]; do sleep 0.01; done`
		_, err := RunCommand(t.Context(), ws, cmd, nil)
		victim := readProcStat(t, ws, "victim")
		t.Cleanup(func() { killSession(t, victim.pid) })
		if err != nil {
			t.Fatal(err)
		}
		assertGone(t, victim)
		if left := sessionMembers(victim.pid); len(left) > 0 {
			t.Errorf("processes %v of the fork loop's session outlived the command", left)
		}
	})
}

// A process that moved to a session of its own to write into the
// workspace once the command has returned never gets to: it is gone, and
// nothing is left reading the FIFO that would release it.
func TestRunCommandEscapeeCannotWriteLater(t *testing.T) {
	forEachMechanism(t, func(t *testing.T, workspace func(*testing.T) *Workspace) {
		ws := workspace(t)
		cmd := `mkfifo release; setsid sh -c 'read x < release; echo pwned > late' >/dev/null 2>&1 &
			cat /proc/$!/stat > victim`
		_, err := RunCommand(t.Context(), ws, cmd, nil)
		victim := readProcStat(t, ws, "victim")
		t.Cleanup(func() { killSession(t, victim.pid) })
		if err != nil {
			t.Fatal(err)
		}
		assertGone(t, victim)
		fd, err := syscall.Open(filepath.Join(ws.Dir(), "release"), syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fd)
			t.Error("a process of the finished command is still waiting to write into the workspace")
		} else if !errors.Is(err, syscall.ENXIO) {
			t.Fatalf("opening the FIFO: %v", err)
		}
	})
}

// A timeout and a cancelled run end the escaped processes too, not only
// the shell.
func TestRunCommandTimeoutAndCancelEndEscapees(t *testing.T) {
	forEachMechanism(t, func(t *testing.T, workspace func(*testing.T) *Workspace) {
		t.Run("timeout", func(t *testing.T) {
			ws := workspace(t)
			res, err := RunCommand(t.Context(), ws, `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim; sleep 1000`,
				&CommandOptions{Timeout: 300 * time.Millisecond})
			victim := readProcStat(t, ws, "victim")
			t.Cleanup(func() { killSession(t, victim.pid) })
			if err != nil || !res.TimedOut {
				t.Fatalf("RunCommand = %+v, %v; want a timeout", res, err)
			}
			assertGone(t, victim)
		})
		t.Run("cancel", func(t *testing.T) {
			ws := workspace(t)
			fifo := filepath.Join(ws.Dir(), "ready")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := RunCommand(ctx, ws, `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim; echo > ready; sleep 1000`, nil)
				done <- err
			}()
			if _, err := os.ReadFile(fifo); err != nil {
				t.Fatal(err)
			}
			victim := readProcStat(t, ws, "victim")
			t.Cleanup(func() { killSession(t, victim.pid) })
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("RunCommand error = %v, want context.Canceled", err)
			}
			assertGone(t, victim)
		})
	})
}

// Ending one command leaves a concurrent command's processes alone,
// those in its own session included, and the concurrent command still
// gets its exit status.
func TestRunCommandSparesConcurrentCommands(t *testing.T) {
	forEachMechanism(t, func(t *testing.T, workspace func(*testing.T) *Workspace) {
		ws := workspace(t)
		for _, name := range []string{"ready", "go"} {
			if err := syscall.Mkfifo(filepath.Join(ws.Dir(), name), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		type result struct {
			res CommandResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			// A background job, orphaned once its subshell exits, in the
			// command's session: it must live until the command ends.
			res, err := RunCommand(t.Context(), ws, `(sleep 1000 & cat /proc/$!/stat > bystander) & wait; echo > ready
				read x < go; cat /proc/$(cut -d' ' -f1 bystander)/stat > /dev/null && echo alive; exit 7`, nil)
			done <- result{res, err}
		}()
		if _, err := os.ReadFile(filepath.Join(ws.Dir(), "ready")); err != nil {
			t.Fatal(err)
		}
		bystander := readProcStat(t, ws, "bystander")
		t.Cleanup(func() { killSession(t, bystander.pid) })

		if _, err := RunCommand(t.Context(), ws, `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > other`, nil); err != nil {
			t.Fatal(err)
		}
		other := readProcStat(t, ws, "other")
		t.Cleanup(func() { killSession(t, other.pid) })
		assertGone(t, other)
		if now, ok := currentProcStat(bystander.pid); !ok || now.startTime != bystander.startTime || now.state == 'Z' {
			t.Error("ending one command killed a process of a command still running")
		}

		if err := os.WriteFile(filepath.Join(ws.Dir(), "go"), []byte("x\n"), 0); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.res.ExitCode != 7 || r.res.Output != "alive\n" {
			t.Errorf("concurrent command = %+v, %v; want alive, exit 7", r.res, r.err)
		}
		assertGone(t, bystander)
	})
}

// Close, at shutdown, ends the commands still running and everything
// they started.
func TestContainmentCloseEndsRunningCommands(t *testing.T) {
	requireSetsid(t)
	for _, m := range containedMechanisms {
		t.Run(string(m), func(t *testing.T) {
			c := probeForTest(t, m)
			ws := newTestWorkspace(t, &WorkspaceOptions{Containment: c})
			if err := syscall.Mkfifo(filepath.Join(ws.Dir(), "ready"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan CommandResult, 1)
			go func() {
				res, _ := RunCommand(ctx, ws, `setsid sleep 1000 >/dev/null 2>&1 & cat /proc/$!/stat > victim; echo > ready; sleep 1000`, nil)
				done <- res
			}()
			if _, err := os.ReadFile(filepath.Join(ws.Dir(), "ready")); err != nil {
				t.Fatal(err)
			}
			victim := readProcStat(t, ws, "victim")
			t.Cleanup(func() { killSession(t, victim.pid) })
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			assertGone(t, victim)
			if t.Failed() {
				cancel() // rather than wait for ever for a command Close missed
			}
			if res := <-done; res.ExitCode != 128+int(syscall.SIGKILL) {
				t.Errorf("the running command ended with %+v, want it killed", res)
			}
		})
	}
}

func TestProbeContainment(t *testing.T) {
	pg := probeForTest(t, MechanismProcessGroup)
	if !strings.HasPrefix(pg.Guarantee(), "process-group: ") {
		t.Errorf("process group Guarantee = %q", pg.Guarantee())
	}
	var none *Containment
	if none.Mechanism() != MechanismProcessGroup || none.Guarantee() != pg.Guarantee() || none.Close() != nil {
		t.Error("a nil Containment is not the process group")
	}
	for _, m := range containedMechanisms {
		t.Run(string(m), func(t *testing.T) {
			c := probeForTest(t, m)
			if !strings.HasPrefix(c.Guarantee(), string(m)+": ") || c.Detail() == "" {
				t.Errorf("Guarantee = %q, Detail = %q", c.Guarantee(), c.Detail())
			}
		})
	}
	if _, err := ProbeContainment(&ContainmentOptions{Prefer: "jail"}); err == nil {
		t.Error("an unknown mechanism was accepted")
	}
	missing := filepath.Join(t.TempDir(), "no-such-cgroup")
	if _, err := ProbeContainment(&ContainmentOptions{CgroupParent: missing}); err == nil {
		t.Error("a cgroup parent that does not work was accepted")
	}
}

// The start-up sweep ends what a runnel that crashed left running in its
// cgroups and removes them, and leaves the cgroups of live runnel
// processes alone: another one's and its own.
func TestSweepStaleCgroups(t *testing.T) {
	requireSetsid(t)
	c := probeForTest(t, MechanismCgroup)
	dead := startHelper(t, "contained-command", t.TempDir())
	deadCgroup, deadWorkspace := dead.line(t), dead.line(t)
	live := startHelper(t, "contained-command", t.TempDir())
	liveCgroup, _ := live.line(t), live.line(t)
	victim := readProcStatFile(t, filepath.Join(deadWorkspace, "victim"))
	t.Cleanup(func() {
		// What a failing sweep left: the crashed helper's cgroup and
		// everything in it.
		if err := c.endCgroup(deadCgroup, mustCgroupPath(t, deadCgroup)); err != nil {
			t.Error(err)
		}
	})
	dead.crash(t)

	removed, err := c.SweepStaleCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if removed < 1 {
		t.Errorf("SweepStaleCgroups removed %d cgroups, want at least the crashed helper's", removed)
	}
	if _, err := os.Stat(deadCgroup); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the crashed helper's cgroup is still there (%v)", err)
	}
	assertGone(t, victim)
	for _, dir := range []string{liveCgroup, c.cgroupDir} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the sweep removed the live cgroup %s: %v", dir, err)
		}
	}
	live.finish(t)
	if _, err := os.Stat(liveCgroup); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the live helper's cgroup survived its Close (%v)", err)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	got, err := parseProcStat([]byte(line))
	want := proc{pid: 4242, state: 'S', ppid: 1, session: 4242, startTime: 987654}
	if err != nil || got != want {
		t.Errorf("parseProcStat = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}

func mustCgroupPath(t *testing.T, dir string) string {
	t.Helper()
	p, err := cgroupPathOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func currentProcStat(pid int) (proc, bool) {
	p, err := readProc(pid)
	return p, err == nil
}

func readProcStat(t *testing.T, ws *Workspace, name string) proc {
	t.Helper()
	return readProcStatFile(t, filepath.Join(ws.Dir(), name))
}

func readProcStatFile(t *testing.T, file string) proc {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseProcStat(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return p
}

// assertGone fails unless the process is gone, reaped included: a zombie
// still holds its pid. The start time tells a pid handed out again from
// the process the command started.
func assertGone(t *testing.T, p proc) {
	t.Helper()
	if now, ok := currentProcStat(p.pid); ok && now.startTime == p.startTime {
		t.Errorf("process %d outlived the command (state %c, parent %d)", p.pid, now.state, now.ppid)
	}
}

// sessionMembers lists the processes, zombies included, of session sid.
func sessionMembers(sid int) []int {
	procs, _ := listProcs()
	var pids []int
	for _, p := range procs {
		if p.session == sid {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// killSession kills what a failing test left running: every process of
// the session sid (a setsid'd victim leads its own), and the victim
// itself when it stayed in another session. A child of the test process
// is reaped, so that not even a zombie stays.
func killSession(t *testing.T, sid int) {
	t.Helper()
	for range 500 {
		pids := sessionMembers(sid)
		if p, ok := currentProcStat(sid); ok && p.session != sid {
			pids = append(pids, sid)
		}
		live := 0
		for _, pid := range pids {
			p, ok := currentProcStat(pid)
			switch {
			case !ok:
			case p.state != 'Z':
				live++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			case p.ppid == os.Getpid():
				reap(pid)
			}
		}
		if live == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("could not kill what session %d left behind", sid)
}
