package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A workspace holds an exclusive flock on its own directory for as long as
// it is open. The kernel drops the lock when the process dies, however it
// dies, so a directory whose lock can be taken belongs to no live runnel:
// SweepWorkspaces removes exactly those. The lock is on the directory
// rather than on a file in or beside it, which a command (running as the
// same user) could delete, leaving a live workspace that looks abandoned.

// workspacePrefix starts the name of every workspace directory.
const workspacePrefix = "run-"

// errLockMoved reports a directory removed or replaced between opening it
// and locking it: a sweep got there first.
var errLockMoved = errors.New("the directory was removed while it was being locked")

// lockDir opens dir and takes an exclusive flock on it without waiting.
// The lock lasts until the returned file is closed. A lock another
// process holds is an error wrapping syscall.EWOULDBLOCK.
func lockDir(dir string) (*os.File, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "flock", Path: dir, Err: err}
	}
	// The lock is on the directory the path named when it was opened;
	// make sure the path still names it.
	locked, err1 := f.Stat()
	now, err2 := os.Lstat(dir)
	if err1 != nil || err2 != nil || !os.SameFile(locked, now) {
		f.Close()
		return nil, errLockMoved
	}
	return f, nil
}

// createLockedDir creates a fresh run-* directory under root and locks
// it. A sweep by another runnel may take the directory between the two
// steps (it has no lock yet, so it looks abandoned) and remove it; then
// another name is tried.
func createLockedDir(root string) (string, *os.File, error) {
	const attempts = 5
	for range attempts {
		dir, err := os.MkdirTemp(root, workspacePrefix)
		if err != nil {
			return "", nil, fmt.Errorf("creating the workspace: %w", err)
		}
		lock, err := lockDir(dir)
		switch {
		case err == nil:
			return dir, lock, nil
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, errLockMoved):
			continue // a sweep has it
		}
		_ = os.Remove(dir)
		return "", nil, fmt.Errorf("locking the workspace: %w", err)
	}
	return "", nil, fmt.Errorf("creating the workspace: a sweep removed it %d times in a row", attempts)
}

// SweepWorkspaces removes the run-* directories under root that no live
// runnel process has open: the workspaces of a runnel that crashed or was
// killed. A workspace open in this process or in another (a replica
// sharing the root) is never touched. An empty root means the default
// one. Call it at start-up; not when workspaces are kept on purpose
// (WorkspaceOptions.Keep), since a closed kept workspace is unlocked too.
// It returns how many directories it removed.
func SweepWorkspaces(root string) (removed int, err error) {
	if root == "" {
		root = defaultWorkspaceRoot()
		if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		if err := ensurePrivateDir(root); err != nil {
			return 0, err
		}
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sweeping the workspace root: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), workspacePrefix) || !e.IsDir() {
			continue
		}
		ok, err := sweepWorkspace(filepath.Join(root, e.Name()))
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// sweepWorkspace removes dir if no one holds its lock, and holds the lock
// while it does, so that another sweeping replica leaves it alone.
func sweepWorkspace(dir string) (removed bool, err error) {
	lock, err := lockDir(dir)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, fs.ErrNotExist), errors.Is(err, errLockMoved):
		return false, nil // in use, or gone already
	case err != nil:
		return false, fmt.Errorf("sweeping a workspace: %w", err)
	}
	defer lock.Close()
	if err := removeAll(dir); err != nil {
		return false, fmt.Errorf("sweeping %s: %w", dir, err)
	}
	return true, nil
}

func defaultWorkspaceRoot() string { return filepath.Join(os.TempDir(), "runnel-workspaces") }
