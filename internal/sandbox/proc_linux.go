package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// parseProcStat parses a /proc/<pid>/stat line. The command name is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseProcStat(b []byte) (proc, error) {
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return proc{}, errors.New("malformed /proc stat line")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return proc{}, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 of proc(5), the state
	if len(f) < 20 || len(f[0]) != 1 {
		return proc{}, errors.New("short /proc stat line")
	}
	ppid, err1 := strconv.Atoi(f[1])
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return proc{}, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	return proc{pid: pid, state: f[0][0], ppid: ppid, session: sid, startTime: start}, nil
}

// readProc reads one process; an error wrapping fs.ErrNotExist means it
// is gone (reaped).
func readProc(pid int) (proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			err = fs.ErrNotExist // reaped between the open and the read
		}
		return proc{}, err
	}
	return parseProcStat(b)
}

// listProcs reads every process of the pid namespace. Processes come and
// go while it reads; one that went is simply not listed.
func listProcs() ([]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	procs := make([]proc, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(pid)
		if err != nil {
			continue
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// childrenOf indexes procs by parent.
func childrenOf(procs []proc) map[int][]proc {
	m := make(map[int][]proc)
	for _, p := range procs {
		m[p.ppid] = append(m[p.ppid], p)
	}
	return m
}

// descendants lists p and everything below it in the tree, parents first.
func descendants(p proc, children map[int][]proc) []proc {
	out := []proc{p}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}

// reap collects the exit status of one zombie child, and only that one:
// wait4(-1) would steal the status of a process os/exec is waiting for.
func reap(pid int) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// becomeSubreaper makes the runnel process the reaper of every orphan
// among its descendants, so that a process a command leaves behind
// (setsid, double fork) is reparented to runnel rather than to init and
// stays where runnel can find it. It is an attribute of the whole
// process, not of a thread, and is never undone.
func becomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}

// pidNamespace names the pid namespace of the runnel process, so that a
// pid recorded in a cgroup's name is only ever looked up in the namespace
// it belongs to.
func pidNamespace() (string, error) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", fmt.Errorf("reading the pid namespace: %w", err)
	}
	// "pid:[4026531836]"
	ns := strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	if _, err := strconv.ParseUint(ns, 10, 64); err != nil {
		return "", fmt.Errorf("reading the pid namespace: unexpected %q", link)
	}
	return ns, nil
}
