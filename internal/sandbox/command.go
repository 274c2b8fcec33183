package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

const (
	// DefaultCommandTimeout bounds a command whose caller sets no timeout.
	DefaultCommandTimeout = 2 * time.Minute
	// DefaultMaxCommandTimeout is the longest timeout a caller may ask for
	// when CommandOptions.MaxTimeout is zero.
	DefaultMaxCommandTimeout = 10 * time.Minute
	// DefaultMaxOutput is how many bytes of output a result keeps.
	DefaultMaxOutput = 30_000
	// DefaultPath is the PATH of a command when the caller sets none.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	// pipeGrace is how long output is still read once the process group
	// is dead: a process that left the group (setsid) may hold the pipe
	// open for ever, and the call must not wait for it.
	pipeGrace = 2 * time.Second
)

// errCommandTimeout marks a command that ran out of time, as opposed to
// one whose run was cancelled.
var errCommandTimeout = errors.New("command timed out")

// ErrNotEnded is wrapped by the error of a command that ran, but some of
// whose processes could not be ended (one stuck in the kernel, or a
// setuid one runnel may not signal). The result is still filled in.
var ErrNotEnded = errors.New("processes the command started could not all be ended")

// CommandOptions configures RunCommand. A zero field means the default.
type CommandOptions struct {
	// Timeout is the command's wall-clock budget (default
	// DefaultCommandTimeout), cut to MaxTimeout.
	Timeout time.Duration
	// MaxTimeout is the longest Timeout honoured (default
	// DefaultMaxCommandTimeout).
	MaxTimeout time.Duration
	// MaxOutput is how many bytes of combined output are kept (default
	// DefaultMaxOutput): the head and the tail, with a marker saying how
	// much was left out between them.
	MaxOutput int
	// Env adds or overrides variables ("NAME=value") of the command's
	// environment, which otherwise holds only PATH (DefaultPath),
	// HOME (the workspace), LANG (C.UTF-8) and TERM (dumb). The runnel
	// process's own environment is never passed on: it may hold tokens.
	Env []string
}

// CommandResult is what a command did.
type CommandResult struct {
	// ExitCode is the shell's exit status; a process killed by signal n
	// reports 128+n, as shells do.
	ExitCode int
	// Output is stdout and stderr interleaved, capped at MaxOutput.
	Output string
	// Omitted counts the output bytes left out of Output.
	Omitted int64
	// TimedOut reports that the timeout killed the command.
	TimedOut bool
	// Timeout is the budget the command ran under, after defaults and
	// MaxTimeout.
	Timeout time.Duration
	// Duration is how long the command ran.
	Duration time.Duration
}

// RunCommand runs /bin/sh -c command in the workspace. When the shell
// exits, times out, or ctx is done, everything it started is killed, as
// far as the workspace's Containment reaches: with cgroup or subreaper,
// every process, and the call returns once they are all gone; with the
// process group (a nil Containment), the group, which a process that
// calls setsid leaves. A timeout is a result with TimedOut; the error is
// for a command that could not start, whose ctx ended, or whose processes
// could not all be ended, and then comes with what the command printed
// so far.
func RunCommand(ctx context.Context, ws *Workspace, command string, opts *CommandOptions) (CommandResult, error) {
	var o CommandOptions
	if opts != nil {
		o = *opts
	}
	timeout := commandTimeout(o)
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errCommandTimeout)
	defer cancel()

	// The output pipe is an *os.File, so exec hands it to the child as is
	// and Wait returns as soon as the shell exits, instead of waiting for
	// every background process holding the pipe to close it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return CommandResult{}, fmt.Errorf("starting the command: %w", err)
	}
	defer pr.Close()
	sc, err := ws.containment.newScope()
	if err != nil {
		pw.Close()
		return CommandResult{}, fmt.Errorf("starting the command: %w", err)
	}
	argv, env, err := ws.isolated(ws.Dir(), []string{"/bin/sh", "-c", command}, ws.Env(o.Env), nil, sc)
	if err != nil {
		pw.Close()
		return CommandResult{}, errors.Join(fmt.Errorf("starting the command: %w", err), sc.discard())
	}
	cmd := exec.CommandContext(tctx, argv[0], argv[1:]...)
	cmd.Dir = ws.Dir()
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = sc.sysProcAttr()
	cmd.Cancel = func() error { return sc.kill(cmd.Process.Pid) }
	cmd.WaitDelay = pipeGrace // backs up a Cancel that failed to kill the shell

	start := time.Now()
	err = sc.start(cmd)
	pw.Close() // the child has its copy; EOF comes when every holder exits
	if err != nil {
		return CommandResult{}, fmt.Errorf("starting the command: %w", err)
	}
	out := newCapture(maxOutput(o))
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()

	waitErr := cmd.Wait()
	// Whatever the shell left running dies with it: its process group, or
	// with a Containment everything it started (see end).
	endErr := sc.end()
	grace := time.NewTimer(pipeGrace)
	select {
	case <-copied:
	case <-grace.C:
		_ = pr.SetReadDeadline(time.Now())
		<-copied
	}
	grace.Stop()

	res := CommandResult{
		ExitCode: exitCode(cmd.ProcessState),
		Timeout:  timeout,
		Duration: time.Since(start),
	}
	res.Output, res.Omitted = out.result()
	switch {
	case endErr != nil:
		return res, fmt.Errorf("%w: %w", ErrNotEnded, endErr)
	case ctx.Err() != nil:
		return res, fmt.Errorf("command cancelled: %w", context.Cause(ctx))
	case errors.Is(context.Cause(tctx), errCommandTimeout):
		res.TimedOut = true
	case waitErr != nil && cmd.ProcessState == nil:
		return res, fmt.Errorf("waiting for the command: %w", waitErr)
	}
	return res, nil
}

func commandTimeout(o CommandOptions) time.Duration {
	maxT := o.MaxTimeout
	if maxT <= 0 {
		maxT = DefaultMaxCommandTimeout
	}
	t := o.Timeout
	if t <= 0 {
		t = min(DefaultCommandTimeout, maxT)
	}
	return min(t, maxT)
}

func maxOutput(o CommandOptions) int {
	if o.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return o.MaxOutput
}

// Env is the scrubbed environment of the workspace's commands: PATH,
// HOME (the workspace), LANG and TERM, then extra ("NAME=value"); exec
// keeps the last value of a repeated name.
func (w *Workspace) Env(extra []string) []string {
	env := []string{"PATH=" + DefaultPath, "HOME=" + w.Dir(), "LANG=C.UTF-8", "TERM=dumb"}
	return append(env, extra...)
}

// isolated returns argv and env as they run in ws: unchanged on the
// local sandbox; through bwrap and Init on the isolated one, with the
// proxy's variables, and with extra (a program's own mounts) added to
// the workspace's isolation.
func (w *Workspace) isolated(dir string, argv, env []string, extra *Isolation, sc *scope) ([]string, []string, error) {
	if w.isolation == nil {
		return argv, env, nil
	}
	is := *w.isolation
	if extra != nil {
		is.ReadOnly = slices.Concat(is.ReadOnly, extra.ReadOnly)
		is.Writable = slices.Concat(is.Writable, extra.Writable)
		is.Forwards = slices.Concat(is.Forwards, extra.Forwards)
		is.Sockets = slices.Concat(is.Sockets, extra.Sockets)
		if err := is.check(); err != nil {
			return nil, nil, err
		}
	}
	// The command's own cgroup v2 bounds what it can; cgroup v1 what is
	// left, on a hybrid host.
	rest, err := sc.limit(is.Limits)
	if err != nil {
		return nil, nil, err
	}
	if sc.v1, err = is.Isolator.limiter.scope(rest); err != nil {
		return nil, nil, err
	}
	return is.wrap(w.Dir(), dir, argv, sc.v1.args()...), append(env, is.proxyEnv()...), nil
}

// killGroup sends SIGKILL to the process group led by pid. A group that
// is already gone is not an error.
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if st, ok := ps.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	return ps.ExitCode()
}

// capture keeps the first and the last bytes written to it and counts
// the ones in between. It is written by one goroutine and read after.
type capture struct {
	head  []byte
	tail  []byte // a ring once full; next is where the oldest byte is
	next  int
	total int64
	headN int
	tailN int
}

func newCapture(limit int) *capture {
	h := limit / 2
	return &capture{headN: h, tailN: limit - h}
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headN - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) >= c.tailN {
		c.tail = append(c.tail[:0], p[len(p)-c.tailN:]...)
		c.next = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(c.tail) < c.tailN {
			k := min(c.tailN-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(c.tail[c.next:], p)
		c.next = (c.next + k) % c.tailN
		p = p[k:]
	}
	return n, nil
}

// result is the kept output, with " [... N bytes omitted] " where bytes
// were left out. The cut moves to character boundaries, so the marker
// never splits a UTF-8 sequence.
func (c *capture) result() (string, int64) {
	tail := append(append([]byte{}, c.tail[c.next:]...), c.tail[:c.next]...)
	kept := int64(len(c.head) + len(tail))
	if kept == c.total {
		return string(c.head) + string(tail), 0
	}
	head := c.head
	if i := lastRuneStartCut(head); i >= 0 {
		head = head[:i]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	omitted := c.total - int64(len(head)+len(tail))
	var b strings.Builder
	b.Write(head)
	fmt.Fprintf(&b, " [... %d bytes omitted] ", omitted)
	b.Write(tail)
	return b.String(), omitted
}

// lastRuneStartCut returns where to cut b so that it does not end in the
// middle of a UTF-8 sequence, or -1 when it already does not.
func lastRuneStartCut(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return -1
			}
			return i
		}
	}
	return -1
}
