//go:build !linux

package sandbox

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// assertDead fails the test unless the process pid has exited. Without
// pidfds there is nothing to wait on, so it polls; the bound only turns a
// process that never dies into a failure. A zombie counts as alive here,
// which the reaping parent (init) settles quickly.
func assertDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	t.Fatalf("process %d is still running: the group kill missed it", pid)
}

// killEscapee kills a process a test let escape.
func killEscapee(t *testing.T, pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
