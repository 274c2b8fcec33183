package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// probe tries cgroup v2, then the child subreaper, then settles for the
// process group.
func probe(o ContainmentOptions) (*Containment, error) {
	self, err := readProc(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("probing process containment: %w", err)
	}
	ns, err := pidNamespace()
	if err != nil {
		return nil, fmt.Errorf("probing process containment: %w", err)
	}
	c := &Containment{self: self, pidNS: ns}
	var notes []string
	if o.Prefer == "" || o.Prefer == MechanismCgroup {
		note, err := c.probeCgroup(o.CgroupParent)
		if err != nil {
			return nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if o.Prefer != MechanismProcessGroup {
		if err := becomeSubreaper(); err != nil {
			notes = append(notes, err.Error())
		} else {
			c.reaps = true
			if c.mech == "" {
				c.mech = MechanismSubreaper
			}
		}
	}
	if c.mech == "" {
		c.mech = MechanismProcessGroup
	}
	c.guarantee, c.detail = describe(c, notes)
	return c, nil
}

// probeCgroup sets c up for MechanismCgroup when the host allows it, or
// says why not. Only a parent the operator named makes a failure an error.
func (c *Containment) probeCgroup(parent string) (note string, err error) {
	named := parent != ""
	if !named {
		if parent, err = ownCgroupDir(); err != nil {
			return "cgroup v2: " + err.Error(), nil
		}
	}
	c.cgroupParent = parent
	dir, err := createCgroup(parent, c.pidNS, c.self)
	if err == nil {
		c.cgroupPath, err = cgroupPathOf(dir)
		if err != nil {
			err = errors.Join(err, removeCgroup(dir))
		}
	}
	switch {
	case err == nil:
		c.mech, c.cgroupDir = MechanismCgroup, dir
		c.controllers = enableControllers(dir)
		return "", nil
	case named:
		return "", fmt.Errorf("using the cgroup parent %s: %w", parent, err)
	}
	return fmt.Sprintf("cgroup v2 under %s: %v", parent, err), nil
}

func describe(c *Containment, notes []string) (guarantee, detail string) {
	why := ""
	if len(notes) > 0 {
		why = " (" + strings.Join(notes, "; ") + ")"
	}
	switch c.mech {
	case MechanismCgroup:
		detail = "each command runs in a cgroup v2 of its own under " + c.cgroupDir
		if c.reaps {
			detail += "; runnel is the child subreaper of what commands leave behind"
		}
		return guaranteeCgroup, detail + why
	case MechanismSubreaper:
		return guaranteeSubreaper, "runnel is a child subreaper and each command runs in a session of its own" + why
	}
	return guaranteeProcessGroup, "each command runs in a process group of its own" + why
}

// SweepStaleCgroups kills everything in the cgroups that runnel processes
// now gone (crashed, killed) left under the cgroup parent, and removes
// them. It never touches the cgroup of a live runnel, this one or another
// replica sharing the parent. Call it at start-up, before the first run.
func (c *Containment) SweepStaleCgroups() (removed int, err error) {
	if c == nil || c.cgroupParent == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(c.cgroupParent)
	if err != nil {
		return 0, fmt.Errorf("sweeping stale cgroups: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !staleOwner(e.Name(), c.pidNS) {
			continue
		}
		dir := filepath.Join(c.cgroupParent, e.Name())
		cgPath, err := cgroupPathOf(dir)
		if err == nil {
			err = c.endCgroup(dir, cgPath)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sweeping a stale cgroup: %w", err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

func (c *Containment) close() error {
	switch c.mech {
	case MechanismCgroup:
		return c.endCgroup(c.cgroupDir, c.cgroupPath)
	case MechanismSubreaper:
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		return c.sweep()
	}
	return nil
}

// scope is one command's share of a Containment.
type scope struct {
	c *Containment
	// cgroup is the command's own cgroup in MechanismCgroup, as a
	// directory and as /proc/<pid>/cgroup names it.
	cgroup, cgroupPath string
	fd                 int // the cgroup, open until the shell started; -1 otherwise
	pid                int
	// v1 are the command's cgroup v1 bounds, when the v2 cgroup above
	// cannot bound it (bound).
	v1 *v1Scope
}

// newScope prepares a command's containment: in MechanismCgroup, a fresh
// cgroup for the shell to start in.
func (c *Containment) newScope() (*scope, error) {
	s := &scope{c: c, fd: -1}
	if c.Mechanism() != MechanismCgroup {
		return s, nil
	}
	name := "cmd-" + strconv.FormatUint(c.seq.Add(1), 10)
	s.cgroup, s.cgroupPath = filepath.Join(c.cgroupDir, name), path.Join(c.cgroupPath, name)
	if err := os.Mkdir(s.cgroup, 0o755); err != nil {
		return nil, fmt.Errorf("creating the command's cgroup: %w", err)
	}
	fd, err := syscall.Open(s.cgroup, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("opening the command's cgroup: %w", err), removeCgroup(s.cgroup))
	}
	s.fd = fd
	return s, nil
}

// discard releases a scope whose command never started.
func (s *scope) discard() error {
	if s.fd >= 0 {
		_ = syscall.Close(s.fd)
		s.fd = -1
	}
	var err error
	if s.cgroup != "" {
		err = removeCgroup(s.cgroup)
	}
	return errors.Join(err, s.v1.remove())
}

// sysProcAttr starts the shell in a process group (MechanismProcessGroup)
// or a session of its own, which is also a process group; in
// MechanismCgroup, straight inside its cgroup (clone3 CLONE_INTO_CGROUP),
// so that it never runs a moment outside.
func (s *scope) sysProcAttr() *syscall.SysProcAttr {
	switch s.c.Mechanism() {
	case MechanismProcessGroup:
		return &syscall.SysProcAttr{Setpgid: true}
	case MechanismCgroup:
		return &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: s.fd}
	}
	return &syscall.SysProcAttr{Setsid: true}
}

func (s *scope) start(cmd *exec.Cmd) error {
	s.v1.prepare(cmd)
	var err error
	if s.c == nil {
		err = cmd.Start()
	} else {
		err = s.c.start(cmd)
	}
	if s.fd >= 0 {
		_ = syscall.Close(s.fd)
		s.fd = -1
	}
	if err != nil {
		if s.cgroup != "" {
			err = errors.Join(err, removeCgroup(s.cgroup))
		}
		return errors.Join(err, s.v1.remove())
	}
	s.pid = cmd.Process.Pid
	if err := s.v1.join(); err != nil {
		// Nothing of the command has run: bwrap holds it until joined.
		// It is killed, reaped and swept here, as a command that ran is
		// by its caller: a caller that sees this error has no command to
		// wait for, and a zombie, a pidfd and the cgroups would otherwise
		// stay for the life of the process.
		_ = s.kill(s.pid)
		_ = cmd.Wait()
		return errors.Join(fmt.Errorf("bounding the command: %w", err), s.end())
	}
	return nil
}

// kill is the command's Cancel: it kills the shell (pid) and, in
// MechanismCgroup, everything the command started, without waiting.
func (s *scope) kill(pid int) error {
	err := killGroup(pid)
	if s.cgroup != "" {
		err = errors.Join(err, killCgroup(s.cgroup))
	}
	return err
}

// end kills what the command left running once os/exec has reaped its
// shell, and returns when all of it is gone: dead, and reaped when it
// came to runnel.
func (s *scope) end() error {
	if s.c != nil {
		s.c.waited(s.pid)
	}
	err := killGroup(s.pid)
	switch s.c.Mechanism() {
	case MechanismCgroup:
		err = s.c.endCgroup(s.cgroup, s.cgroupPath)
	case MechanismSubreaper:
		err = s.c.sweep()
	}
	return errors.Join(err, s.v1.remove())
}

// endCgroup kills everything in the cgroup at dir (cgPath in
// /proc/<pid>/cgroup) and below, waits until it is all gone, reaping what
// came to runnel, and removes the cgroups.
func (c *Containment) endCgroup(dir, cgPath string) error {
	if err := killCgroup(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("ending the command's processes: %w", err)
	}
	err := waitFor(func() (bool, error) {
		empty, err := cgroupEmpty(dir)
		if err != nil || !empty || !c.reaps {
			return empty, err
		}
		return c.reapCgroup(cgPath)
	})
	if err != nil {
		return fmt.Errorf("ending the processes in %s: %w", dir, err)
	}
	return removeCgroup(dir)
}

// reapCgroup reaps the zombies runnel inherited from the cgroup cgPath
// and its descendants, and reports whether none of their processes is
// left anywhere below runnel: a process past cgroup.kill can still be on
// its way out, its children not yet handed to runnel.
func (c *Containment) reapCgroup(cgPath string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	procs, err := listProcs()
	if err != nil {
		return false, err
	}
	done := true
	for _, p := range descendants(c.self, childrenOf(procs))[1:] {
		if cg, err := cgroupOf(p.pid); err != nil || (cg != cgPath && !strings.HasPrefix(cg, cgPath+"/")) {
			continue
		}
		switch {
		case c.running[p.pid]:
			continue // os/exec reaps it
		case p.ppid == c.self.pid && p.state == 'Z':
			reap(p.pid)
			continue
		}
		done = false
	}
	return done, nil
}

// sweep kills and reaps, round after round, every process reparented to
// runnel that no running command accounts for, until there is none.
func (c *Containment) sweep() error {
	if err := waitFor(c.sweepRound); err != nil {
		return fmt.Errorf("ending the processes commands left behind: %w", err)
	}
	return nil
}

// sweepRound is one pass of sweep. A child of runnel in runnel's own
// session is runnel's business (nothing a command starts can join that
// session); a running shell and the processes of its session are their
// command's, ended with it, unless the Containment is closing. Anything
// else came from a command: one that ended, or one that left its
// command's session (setsid), which cannot be told apart from the first
// and goes the same way. Killing it reparents its children to runnel,
// for the next round. A running shell's zombie is left to os/exec.
func (c *Containment) sweepRound() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	procs, err := listProcs()
	if err != nil {
		return false, err
	}
	children := childrenOf(procs)
	done := true
	for _, p := range children[c.self.pid] {
		switch {
		case p.session == c.self.session:
			continue
		case p.state == 'Z':
			if !c.running[p.pid] {
				reap(p.pid)
			}
			continue
		case (c.running[p.pid] || c.running[p.session]) && !c.closing:
			continue
		}
		done = false
		for _, d := range descendants(p, children) {
			killExactly(d)
		}
	}
	return done, nil
}

// sysPidfdOpen and sysPidfdSendSignal are pidfd_open(2) and
// pidfd_send_signal(2), which the syscall package predates; numbers from
// 424 on are the same on every architecture.
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// killExactly sends SIGKILL to the process p was read from, and to no
// other that got its pid since: the pidfd pins the process, and the
// start time read after opening it says whether it is still the one.
func killExactly(p proc) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(p.pid), 0, 0)
	if errno != 0 {
		if errno != syscall.ESRCH {
			_ = syscall.Kill(p.pid, syscall.SIGKILL) // no pidfds (Linux < 5.3)
		}
		return
	}
	defer syscall.Close(int(fd))
	if now, err := readProc(p.pid); err != nil || now.startTime != p.startTime {
		return
	}
	_, _, _ = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
}
