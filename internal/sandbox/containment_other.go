//go:build !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

// probe settles for the process group: cgroups and the child subreaper
// are Linux's.
func probe(o ContainmentOptions) (*Containment, error) {
	return &Containment{
		mech:      MechanismProcessGroup,
		guarantee: guaranteeProcessGroup,
		detail:    "each command runs in a process group of its own (cgroups and the child subreaper are Linux-only)",
	}, nil
}

// SweepStaleCgroups does nothing: there are no cgroups here.
func (c *Containment) SweepStaleCgroups() (removed int, err error) { return 0, nil }

func (c *Containment) close() error { return nil }

// scope is one command's share of a Containment.
type scope struct {
	c   *Containment
	pid int
	v1  *v1Scope
}

func (c *Containment) newScope() (*scope, error) { return &scope{c: c}, nil }

func (s *scope) sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func (s *scope) start(cmd *exec.Cmd) error {
	var err error
	if s.c == nil {
		err = cmd.Start()
	} else {
		err = s.c.start(cmd)
	}
	if err != nil {
		return err
	}
	s.pid = cmd.Process.Pid
	return nil
}

func (s *scope) kill(pid int) error { return killGroup(pid) }

func (s *scope) discard() error { return nil }

func (s *scope) end() error {
	if s.c != nil {
		s.c.waited(s.pid)
	}
	return killGroup(s.pid)
}

// v1Scope bounds nothing: there are no cgroups here.
type v1Scope struct{}

func (s *scope) limit(lim Limits) (Limits, error) { return lim, nil }

func (s *v1Scope) args() []string { return nil }

// v1Limiter bounds nothing: there are no cgroups here.
type v1Limiter struct{}

func (l *v1Limiter) scope(Limits) (*v1Scope, error) { return nil, nil }

func (l *v1Limiter) close() error { return nil }

func (l *v1Limiter) enforces(string) bool { return false }
