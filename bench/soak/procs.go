package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// raiseFileLimit raises this process's RLIMIT_NOFILE to its hard limit
// (runnel serve, started after, inherits it) and reports both.
// Setting it explicitly matters: the Go runtime raises its own soft limit
// at start-up but gives a child the original one back.
func raiseFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
	}
	return lim.Cur, lim.Max, nil
}

// fdNeeds is about how many descriptors each side holds with n runs in
// flight. runnel: the client's stream, its connection to the model, to
// the platform or the MCP server, and their idle successors in the
// pools; the driver holds the other ends of all of them. The figure is
// an estimate with room to spare, not a bound.
func fdNeeds(n int) (runnel, driver int) {
	return 4*n + 256, 5*n + 256
}

// serve is `runnel serve` on a loopback port, in a process group of its
// own, so that stopping it stops whatever it started too.
type serve struct {
	url string
	cmd *exec.Cmd
}

func (s *serve) pid() int { return s.cmd.Process.Pid }

// startServe starts bin as `runnel serve` on 127.0.0.1 with env (the
// RUNNEL_* settings) and its log going to logFile, and waits for
// GET /health. The environment is this process's without any RUNNEL_*
// or proxy variable: no caller setting changes what the soak measures,
// and nothing it sends can leave for a proxy.
func startServe(ctx context.Context, bin string, env []string, logFile *os.File) (*serve, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(cleanEnv(os.Environ()), env...),
		"RUNNEL_HOST=127.0.0.1", "RUNNEL_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C at the terminal reaches this
	// driver, which stops runnel itself after its last measurement.
	// Pdeathsig: if this driver dies without stopping it, the kernel does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	s := &serve{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	if err := benchkit.WaitHealthy(ctx, s.url+"/health", 15*time.Second); err != nil {
		s.stop(5 * time.Second)
		return nil, fmt.Errorf("runnel serve did not become healthy (its log: %s): %w", logFile.Name(), err)
	}
	return s, nil
}

// stop sends SIGTERM to runnel's process group, waits up to grace for
// runnel to exit, then kills the group. It reports how runnel ended.
func (s *serve) stop(grace time.Duration) error {
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	t := time.NewTimer(grace)
	defer t.Stop()
	var err error
	select {
	case err = <-done:
	case <-t.C:
		err = fmt.Errorf("runnel serve did not exit within %s of SIGTERM; killed", grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	// Whatever runnel started and left behind goes too.
	if kerr := syscall.Kill(-pgid, syscall.SIGKILL); kerr == nil {
		err = errors.Join(err, errors.New("runnel serve left processes in its group; killed them"))
	}
	return err
}

// cleanEnv drops the RUNNEL_* and proxy variables from env.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(k, "RUNNEL_"),
			u == "HTTP_PROXY", u == "HTTPS_PROXY", u == "ALL_PROXY", u == "NO_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return out
}
