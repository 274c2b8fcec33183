package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrOutsideWorkspace is wrapped by every error that refuses a path for
// leading outside the workspace.
var ErrOutsideWorkspace = errors.New("outside the workspace")

// maxSymlinkHops bounds the symlinks Resolve follows, as the kernel's
// ELOOP limit does.
const maxSymlinkHops = 40

// WorkspaceOptions configures a Workspace. The zero value is the default.
type WorkspaceOptions struct {
	// Keep leaves the directory in place on Close, for debugging a run.
	Keep bool
	// SkillDirs are the workspace-relative directories named skills are
	// written under; nil means DefaultSkillDirs.
	SkillDirs []string
	// Containment is how RunCommand ends what the workspace's commands
	// start (ProbeContainment, once per process). Nil means the process
	// group, which processes that call setsid escape.
	Containment *Containment
	// Isolation runs the workspace's commands and programs in the
	// isolated sandbox; nil runs them on the host (the local sandbox).
	// The root the workspace is created under is hidden inside, so that a
	// run never sees another's workspace.
	Isolation *Isolation
}

// DefaultSkillDirs are where WriteSkills puts a named skill: the Agent
// Skills location that Codex, Gemini CLI, OpenCode and Pi read, and the
// one Claude Code reads.
func DefaultSkillDirs() []string { return []string{".agents/skills", ".claude/skills"} }

// Workspace is one run's private directory. It is safe for concurrent use.
type Workspace struct {
	dir       string // absolute, symlinks resolved
	root      *os.Root
	lock      *os.File // holds the directory's flock (workspace_lock.go)
	keep      bool
	skillDirs []string
	// containment is WorkspaceOptions.Containment.
	containment *Containment
	// isolation is WorkspaceOptions.Isolation, with the root hidden.
	isolation *Isolation

	closeOnce sync.Once
	closeErr  error
}

// NewWorkspace creates a fresh directory (mode 0700) under root, or under
// os.TempDir()/runnel-workspaces when root is empty, and locks it against
// SweepWorkspaces until Close.
func NewWorkspace(root string, opts *WorkspaceOptions) (*Workspace, error) {
	var o WorkspaceOptions
	if opts != nil {
		o = *opts
	}
	if o.Isolation != nil {
		if err := o.Isolation.check(); err != nil {
			return nil, fmt.Errorf("isolating the workspace: %w", err)
		}
	}
	if root == "" {
		root = defaultWorkspaceRoot()
		if err := ensurePrivateDir(root); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating the workspace root: %w", err)
	}
	dir, lock, err := createLockedDir(root)
	if err != nil {
		return nil, err
	}
	// The real path, so that paths the model sees (pwd in bash) and
	// paths Resolve returns agree, even when TMPDIR is itself a symlink.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		_ = os.Remove(dir)
		lock.Close()
		return nil, fmt.Errorf("creating the workspace: %w", err)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		_ = os.Remove(dir)
		lock.Close()
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	skillDirs := o.SkillDirs
	if skillDirs == nil {
		skillDirs = DefaultSkillDirs()
	}
	w := &Workspace{dir: real, root: r, lock: lock, keep: o.Keep, skillDirs: skillDirs, containment: o.Containment}
	if o.Isolation != nil {
		is := *o.Isolation
		is.Hide = append([]string{filepath.Dir(real)}, is.Hide...)
		w.isolation = &is
	}
	return w, nil
}

// ensurePrivateDir creates the shared default root and refuses one that
// another user could tamper with: in a world-writable /tmp, anyone may
// create runnel-workspaces first and then swap a run's directory.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the workspace root: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking the workspace root: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("the workspace root %s is not a directory", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("the workspace root %s belongs to another user; remove it or configure another root", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("the workspace root %s is writable by other users; chmod 700 it or configure another root", dir)
	}
	return nil
}

// Dir is the workspace's absolute path, with symlinks resolved.
func (w *Workspace) Dir() string { return w.dir }

// NetworkConfined reports whether the workspace's programs run in a
// network namespace of their own (isolated, network off or allowlist):
// a loopback address of runnel's is out of their reach, so what they
// must reach is bridged in (Isolation.Sockets, Isolation.Forwards).
func (w *Workspace) NetworkConfined() bool {
	return w.isolation != nil && w.isolation.network() != NetworkOn
}

// Root gives access to the workspace through an *os.Root, which refuses
// any path or symlink that escapes it. The workspace owns it: do not close
// it. Pass it names from Rel.
func (w *Workspace) Root() *os.Root { return w.root }

// Close removes the directory, unless the workspace was opened with Keep.
// Calling it again returns the first call's result.
func (w *Workspace) Close() error {
	w.closeOnce.Do(func() {
		err := w.root.Close()
		if !w.keep {
			err = errors.Join(err, removeAll(w.dir))
		}
		// Unlocked only once removed, so that a sweep never races Close.
		w.closeErr = errors.Join(err, w.lock.Close())
	})
	return w.closeErr
}

// removeAll removes dir even when a command left directories without
// write or search permission behind (chmod -w, chmod 000).
func removeAll(dir string) error {
	if os.RemoveAll(dir) == nil {
		return nil
	}
	// WalkDir calls the function for a directory before reading it, so
	// each directory is made readable just in time.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the workspace: %w", err)
	}
	return nil
}

// Resolve turns a model-supplied path, relative to the workspace or
// absolute inside it, into a real absolute path inside the workspace.
// Symlinks are followed (dangling ones too, since writing through one
// would create its target), and a path that ends up outside is refused
// with an error wrapping ErrOutsideWorkspace. The path need not exist.
func (w *Workspace) Resolve(p string) (string, error) {
	switch {
	case strings.TrimSpace(p) == "":
		return "", errors.New("path is empty")
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(w.dir, abs)
	}
	real, err := resolveLenient(filepath.Clean(abs))
	if err != nil {
		return "", fmt.Errorf("path %q cannot be resolved: %w", p, unwrapPath(err))
	}
	if real != w.dir && !strings.HasPrefix(real, w.dir+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q is %w", p, ErrOutsideWorkspace)
	}
	return real, nil
}

// Rel is Resolve, relative to the workspace: "." for the workspace itself,
// otherwise a slash-separated name for Root.
func (w *Workspace) Rel(p string) (string, error) {
	real, err := w.Resolve(p)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(w.dir, real)
	if err != nil {
		return "", fmt.Errorf("path %q cannot be resolved: %w", p, err)
	}
	return filepath.ToSlash(rel), nil
}

// resolveLenient evaluates the symlinks of the longest existing prefix of
// the clean absolute path abs and joins the rest. When the first missing
// component is a dangling symlink, its target takes its place and the
// resolution starts over.
func resolveLenient(abs string) (string, error) {
	for range maxSymlinkHops {
		prefix, rest := abs, ""
		for {
			real, err := filepath.EvalSymlinks(prefix)
			if err == nil {
				if rest == "" {
					return real, nil
				}
				first, tail, _ := strings.Cut(rest, string(filepath.Separator))
				target, lerr := os.Readlink(filepath.Join(real, first))
				if lerr != nil {
					// Not a symlink: it does not exist, so nothing
					// below it can be a symlink either.
					return filepath.Join(real, rest), nil
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(real, target)
				}
				abs = filepath.Clean(filepath.Join(target, tail))
				break
			}
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return "", err
			}
			parent := filepath.Dir(prefix)
			if parent == prefix {
				return abs, nil
			}
			rest = filepath.Join(filepath.Base(prefix), rest)
			prefix = parent
		}
	}
	return "", errors.New("too many levels of symbolic links")
}

// unwrapPath drops the *fs.PathError wrapper, whose path is absolute and
// says nothing the caller's own message does not.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
