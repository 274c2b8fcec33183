package sandbox

import (
	"errors"
	"syscall"
	"testing"
)

// assertDead fails the test unless the process pid has exited. SIGKILL
// is delivered asynchronously, and an orphan stays a zombie until its new
// parent reaps it, so "kill(pid, 0) fails" is not yet true when RunCommand
// returns; a pidfd becomes readable exactly when the process has exited.
// The 10 s bound only turns a process that never dies into a failure.
func assertDead(t *testing.T, pid int) {
	t.Helper()
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	switch {
	case errno == syscall.ESRCH:
		return // gone and reaped
	case errno != 0:
		t.Fatalf("pidfd_open(%d): %v", pid, errno)
	}
	defer syscall.Close(int(fd))
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ep)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
		t.Fatal(err)
	}
	events := make([]syscall.EpollEvent, 1)
	for {
		n, err := syscall.EpollWait(ep, events, 10_000)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("process %d is still running: the group kill missed it", pid)
		}
		return
	}
}

// killEscapee kills a process a test let escape, and its session.
func killEscapee(t *testing.T, pid int) { killSession(t, pid) }
