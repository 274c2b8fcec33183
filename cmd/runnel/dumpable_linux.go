package main

import (
	"fmt"
	"syscall"
)

// makeUndumpable clears the process's dumpable flag (PR_SET_DUMPABLE 0):
// processes of the same user, which is what a local run's bash is, can
// then no longer read /proc/<runnel>/environ or /mem, where the token,
// the interaction secret and every run's credentials live. Root keeps
// CAP_SYS_PTRACE and is not stopped (host.sandboxInfo says so). Children
// are dumpable again after exec: the flag is reset by execve.
func makeUndumpable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("%w: %w", errNotDumpable, errno)
	}
	return nil
}
