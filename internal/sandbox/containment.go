package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// Mechanism names how a host keeps the processes a command starts from
// outliving it.
type Mechanism string

const (
	// MechanismCgroup runs each command in a cgroup v2 of its own and ends
	// it with cgroup.kill: nothing the command starts can leave it, in any
	// session, however it forks (short of privileges over cgroupfs).
	MechanismCgroup Mechanism = "cgroup"
	// MechanismSubreaper makes runnel the child subreaper of its
	// descendants, runs each command in a session of its own, and after
	// each command kills every process reparented to runnel that no
	// running command accounts for.
	MechanismSubreaper Mechanism = "subreaper"
	// MechanismProcessGroup kills the command's process group; a process
	// that moves to a session or group of its own escapes it.
	MechanismProcessGroup Mechanism = "process-group"
)

// endTimeout bounds how long ending a command waits for its processes to
// die and be reaped. SIGKILL is not refused; only a process stuck in the
// kernel (a hung network filesystem) takes longer, and then the command
// ends with an error rather than never.
const endTimeout = 10 * time.Second

// errStillRunning ends a wait for processes that will not die.
var errStillRunning = errors.New("processes still running after " + endTimeout.String())

// ContainmentOptions configures ProbeContainment. The zero value probes
// for the strongest mechanism the host allows.
type ContainmentOptions struct {
	// Prefer is the strongest mechanism to try: empty or MechanismCgroup
	// tries them all, MechanismSubreaper skips cgroups, and
	// MechanismProcessGroup changes nothing about the runnel process.
	Prefer Mechanism
	// CgroupParent is the cgroup v2 directory runnel creates its cgroups
	// under (a delegated subtree, say). Empty means runnel's own cgroup,
	// found through /proc/self/cgroup and /proc/self/mountinfo. When it is
	// set, a parent that does not work fails the probe instead of
	// falling back: an operator who named one expects it used.
	CgroupParent string
}

// Containment is how RunCommand makes sure that nothing a command starts
// outlives it. Probe it once at start-up with ProbeContainment, hand it to
// every workspace through WorkspaceOptions, and Close it at shutdown. A
// nil *Containment is the process-group mechanism. It is safe for
// concurrent use.
//
// One per process: in the subreaper mechanism a Containment kills every
// child of runnel in a session other than runnel's own that none of its
// running commands accounts for, so it must be the only code in runnel
// that starts processes with a session of their own.
type Containment struct {
	mech      Mechanism
	guarantee string
	detail    string

	// self is the runnel process as the probe found it, and pidNS its pid
	// namespace; both go into the names of runnel's cgroups.
	self  proc
	pidNS string

	// cgroupParent is where runnel-* cgroups live, "" when none was found;
	// cgroupDir is this process's own cgroup under it, in MechanismCgroup.
	cgroupParent string
	cgroupDir    string
	// cgroupPath is cgroupDir as /proc/<pid>/cgroup spells it.
	cgroupPath string
	// reaps is set when orphans come to runnel (it is a child
	// subreaper), so ending a command also reaps what it left as zombies.
	reaps bool
	seq   atomic.Uint64
	// controllers are the cgroup v2 controllers each command's cgroup has
	// ("pids", "memory"): what bounds it there.
	controllers []string

	// mu orders starting a command against a sweep, so that a sweep never
	// sees a command's new shell before it is in running; running holds
	// the pids of the shells started and not yet waited for, which are
	// also the ids of their sessions.
	mu      sync.Mutex
	running map[int]bool
	// closing makes sweeps end the running commands' processes too.
	closing bool

	closeOnce sync.Once
	closeErr  error
}

// ProbeContainment finds the strongest mechanism the host allows, at most
// opts.Prefer: a cgroup v2 where runnel can create one that has
// cgroup.kill and start a process straight into it; otherwise the child
// subreaper (Linux); otherwise the process group. The subreaper is an
// attribute of the whole runnel process, set here and never undone. It
// fails only when opts names a mechanism it does not know or a
// CgroupParent that does not work; main logs Detail and reports
// Guarantee.
func ProbeContainment(opts *ContainmentOptions) (*Containment, error) {
	var o ContainmentOptions
	if opts != nil {
		o = *opts
	}
	switch o.Prefer {
	case "", MechanismCgroup, MechanismSubreaper, MechanismProcessGroup:
	default:
		return nil, fmt.Errorf("unknown process containment %q (want cgroup, subreaper or process-group)", o.Prefer)
	}
	return probe(o)
}

// proc is what the containment needs of a process (/proc/<pid>/stat). A
// pid and its start time name one process for the life of the system: a
// pid may be handed out again, the pair is not.
type proc struct {
	pid       int
	state     byte // 'Z' for a zombie
	ppid      int
	session   int
	startTime uint64 // clock ticks after boot
}

// Guarantees, as /v1/capabilities reports them.
const (
	guaranteeCgroup       = "cgroup: every process a command starts is killed when the command ends, whatever session it moved to"
	guaranteeSubreaper    = "subreaper: every process a command starts is killed when the command ends, setsid and double forks included; processes left by a runnel that crashed are not"
	guaranteeProcessGroup = "process-group: processes a command starts are killed when it ends, except those that call setsid, which can outlive it"
)

// Mechanism is the mechanism in use.
func (c *Containment) Mechanism() Mechanism {
	if c == nil {
		return MechanismProcessGroup
	}
	return c.mech
}

// Guarantee is a one-line statement of what the mechanism guarantees,
// for /v1/capabilities.
func (c *Containment) Guarantee() string {
	if c == nil {
		return guaranteeProcessGroup
	}
	return c.guarantee
}

// Detail says what was probed and why a stronger mechanism was not
// available, for the start-up log.
func (c *Containment) Detail() string {
	if c == nil {
		return "process group (no containment was probed)"
	}
	return c.detail
}

// Close kills whatever is left of the commands' processes, those of
// commands still running included, and removes runnel's cgroup; a
// command started afterwards fails to start in MechanismCgroup. Call it
// at shutdown, once the runs have been cancelled. The subreaper attribute
// of the runnel process stays. Calling it again returns the first call's
// result.
func (c *Containment) Close() error {
	if c == nil {
		return nil
	}
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

// start starts cmd while no sweep runs, and records its shell as
// running, so that sweeps leave it and its session alone until end.
func (c *Containment) start(cmd *exec.Cmd) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if c.running == nil {
		c.running = make(map[int]bool)
	}
	c.running[cmd.Process.Pid] = true
	return nil
}

// waited forgets a shell that os/exec has reaped.
func (c *Containment) waited(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.running, pid)
}

// waitFor polls done, more and more slowly, until it reports true, fails,
// or endTimeout passes.
func waitFor(done func() (bool, error)) error {
	deadline := time.Now().Add(endTimeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errStillRunning
		}
		time.Sleep(pause)
	}
}
