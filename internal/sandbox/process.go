package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions configures StartProcess.
type ProcessOptions struct {
	// Env is the whole environment ("NAME=value"): nothing of runnel's own
	// environment is passed on, since it may hold tokens.
	Env []string
	// Dir is the working directory; empty means the workspace.
	Dir string
	// Stderr receives the program's standard error; nil discards it.
	Stderr io.Writer
	// Isolation adds to the workspace's isolation, when it has one, the
	// program's own ReadOnly and Writable directories (its installation,
	// its HOME), Forwards and Sockets; its other fields are ignored.
	Isolation *Isolation
}

// Process is a long-lived program a run talks to over its standard input
// and output (an ACP agent), contained like a command: when it is ended,
// everything it started goes with it, as far as the workspace's
// Containment reaches (see RunCommand).
type Process struct {
	// Stdin and Stdout are the program's standard input and output.
	Stdin  io.WriteCloser
	Stdout io.ReadCloser

	cmd    *exec.Cmd
	scope  *scope
	exited chan struct{}

	endOnce sync.Once
	endErr  error
}

// StartProcess starts argv in ws under its Containment. The caller must
// End it, whatever happens.
func StartProcess(ws *Workspace, argv []string, opts *ProcessOptions) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("starting a process: no command")
	}
	var o ProcessOptions
	if opts != nil {
		o = *opts
	}
	dir := o.Dir
	if dir == "" {
		dir = ws.Dir()
	}
	name := argv[0]
	sc, err := ws.containment.newScope()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	argv, env, err := ws.isolated(dir, argv, o.Env, o.Isolation, sc)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting %s: %w", name, err), sc.discard())
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = sc.sysProcAttr()
	cmd.Stderr = o.Stderr
	// A process that left the group may hold stderr open for ever; Wait
	// must not wait for it once the program itself is gone.
	cmd.WaitDelay = pipeGrace
	// Pipes of our own, not cmd.StdinPipe: those are closed by Wait, which
	// races with a reader still draining the last lines the program wrote.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting %s: %w", name, err), sc.discard())
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, errors.Join(fmt.Errorf("starting %s: %w", name, err), sc.discard())
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = sc.start(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Stdin: inW, Stdout: outR, cmd: cmd, scope: sc, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// TermAfter is how long AwaitExit waits for a program whose input was
// closed to exit by itself before it asks it to.
const TermAfter = 100 * time.Millisecond

// AwaitExit gives a program whose input was closed up to grace to exit
// (exited closes when it has): most exit as soon as their input ends; one
// that does not (codex-acp 2.6 keeps running for seconds) is asked to with
// term after TermAfter, so its caller does not wait out the whole grace
// for a program it no longer needs. It reports whether the program
// exited; what did not is the caller's to kill.
func AwaitExit(exited <-chan struct{}, term func(), grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	if waitClosed(exited, min(grace, TermAfter)) {
		return true
	}
	if grace <= 0 {
		return false
	}
	term()
	return waitClosed(exited, time.Until(deadline))
}

// waitClosed waits up to d for ch to close and reports whether it did.
func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// Pid is the program's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the program itself has exited (what it started
// may still run until End).
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitCode is the program's exit status once Exited is closed (128+n for
// a signal, as shells report it), or -1.
func (p *Process) ExitCode() int {
	select {
	case <-p.exited:
		return exitCode(p.cmd.ProcessState)
	default:
		return -1
	}
}

// End closes the program's input, gives it grace to exit (after a moment,
// with SIGTERM), then kills it and everything it started, and returns once all of it is gone
// (as far as the Containment reaches). It is safe to call more than once.
func (p *Process) End(grace time.Duration) error {
	p.endOnce.Do(func() {
		p.Stdin.Close()
		AwaitExit(p.exited, func() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }, grace)
		err := p.scope.kill(p.Pid())
		<-p.exited
		p.endErr = errors.Join(err, p.scope.end())
		p.Stdout.Close()
	})
	return p.endErr
}

// Tail keeps the last bytes written to it (a program's standard error),
// for the sentence that says why the program failed. It is safe for
// concurrent use.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what the tail holds.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
