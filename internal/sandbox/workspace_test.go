package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// newTestWorkspace opens a workspace under a fresh test directory and
// closes it when the test ends.
func newTestWorkspace(t *testing.T, opts *WorkspaceOptions) *Workspace {
	t.Helper()
	ws, err := NewWorkspace(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.Close(); err != nil {
			t.Error(err)
		}
	})
	return ws
}

func TestWorkspaceCloseRemovesIt(t *testing.T) {
	root := t.TempDir()
	ws, err := NewWorkspace(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ws.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("workspace mode = %v, want 0700", got)
	}
	realRoot, _ := filepath.EvalSymlinks(root)
	if filepath.Dir(ws.Dir()) != realRoot {
		t.Errorf("workspace %s is not directly under %s", ws.Dir(), realRoot)
	}
	mustWrite(t, filepath.Join(ws.Dir(), "f"), "x")
	if err := ws.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(ws.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, Stat(workspace) = %v, want not exist", err)
	}
	if err := ws.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

// Close removes a directory a command made unwritable. Permission bits
// bind only a process without CAP_DAC_OVERRIDE, so as root (CI) the
// workspace is opened and closed by a helper process running as nobody;
// the helper checks that the bits do bind it.
func TestWorkspaceCloseRemovesUnwritableDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		if err := closeUnwritableWorkspace(t.TempDir()); err != nil {
			t.Fatal(err)
		}
		return
	}
	const nobody = 65534
	base := sharedTempDir(t)
	bin := filepath.Join(base, "sandbox.test")
	copyFile(t, os.Args[0], bin, 0o755)
	root := filepath.Join(base, "root")
	mustMkdir(t, root)
	if err := os.Chown(root, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{helperEnv + "=close-workspace", helperArgEnv + "=" + root, "TMPDIR=" + root}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("closing a workspace as uid %d: %v\n%s", nobody, err, out)
	}
	if entries, _ := os.ReadDir(root); len(entries) > 0 {
		t.Errorf("the workspace root still holds %s", entries[0].Name())
	}
}

// sharedTempDir is a fresh directory another user may enter, removed when
// the test ends.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// A start-up sweep removes the workspaces of runnel processes that died,
// and only those: not one a live process (another replica, or this one)
// has open, and nothing in the root that is not a workspace.
func TestSweepWorkspaces(t *testing.T) {
	root := t.TempDir()
	live := startHelper(t, "hold-workspace", root)
	liveDir := live.line(t)
	crashed := startHelper(t, "hold-workspace", root)
	crashedDir := crashed.line(t)
	crashed.crash(t)
	mineHere, err := NewWorkspace(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mineHere.Close()
	other := filepath.Join(root, "other")
	mustMkdir(t, other)
	mustSymlink(t, t.TempDir(), filepath.Join(root, "run-link"))

	removed, err := SweepWorkspaces(root)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 1 {
		t.Errorf("SweepWorkspaces removed %d directories, want 1", removed)
	}
	if _, err := os.Stat(crashedDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the crashed process's workspace is still there (%v)", err)
	}
	for _, dir := range []string{liveDir, mineHere.Dir(), other, filepath.Join(root, "run-link")} {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("the sweep removed %s: %v", dir, err)
		}
	}
	live.finish(t)
	if _, err := os.Stat(liveDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the live helper's workspace survived its Close (%v)", err)
	}
}

func TestSweepWorkspacesDefaultRoot(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	if removed, err := SweepWorkspaces(""); removed != 0 || err != nil {
		t.Errorf("SweepWorkspaces of a missing default root = %d, %v; want 0, nil", removed, err)
	}
	ws, err := NewWorkspace("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if removed, err := SweepWorkspaces(""); removed != 0 || err != nil {
		t.Errorf("SweepWorkspaces = %d, %v; want 0, nil (the workspace is open)", removed, err)
	}
}

func TestWorkspaceKeep(t *testing.T) {
	ws, err := NewWorkspace(t.TempDir(), &WorkspaceOptions{Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Dir()); err != nil {
		t.Errorf("a kept workspace is gone after Close: %v", err)
	}
}

func TestWorkspacesAreDistinct(t *testing.T) {
	root := t.TempDir()
	a, err := NewWorkspace(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewWorkspace(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Dir() == b.Dir() {
		t.Errorf("two workspaces share %s", a.Dir())
	}
}

func TestDefaultRoot(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ws, err := NewWorkspace("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	realTmp, _ := filepath.EvalSymlinks(tmp)
	if want := filepath.Join(realTmp, "runnel-workspaces"); filepath.Dir(ws.Dir()) != want {
		t.Errorf("workspace %s is not under %s", ws.Dir(), want)
	}
}

// In a shared temporary directory, a default root another user could
// write to would let them swap a run's workspace.
func TestDefaultRootRefusedWhenOthersCanWrite(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	shared := filepath.Join(tmp, "runnel-workspaces")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	ws, err := NewWorkspace("", nil)
	if err == nil {
		ws.Close()
		t.Fatal("NewWorkspace accepted a world-writable default root")
	}
	if !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("error = %q, want it to say the root is writable by other users", err)
	}
}

func TestResolve(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	outside := t.TempDir()
	dir := ws.Dir()
	mustMkdir(t, filepath.Join(dir, "sub"))
	mustWrite(t, filepath.Join(dir, "sub", "f.txt"), "x")
	mustSymlink(t, outside, filepath.Join(dir, "out"))
	mustSymlink(t, filepath.Join(dir, "sub"), filepath.Join(dir, "in"))
	mustSymlink(t, "sub/f.txt", filepath.Join(dir, "rel-in"))
	mustSymlink(t, "../..", filepath.Join(dir, "sub", "up"))
	mustSymlink(t, filepath.Join(outside, "missing", "file"), filepath.Join(dir, "dangling-out"))
	mustSymlink(t, "sub/new.txt", filepath.Join(dir, "dangling-in"))
	mustSymlink(t, "loop-b", filepath.Join(dir, "loop-a"))
	mustSymlink(t, "loop-a", filepath.Join(dir, "loop-b"))

	ok := []struct{ in, want string }{
		{".", dir},
		{"sub/f.txt", filepath.Join(dir, "sub", "f.txt")},
		{"./sub//f.txt", filepath.Join(dir, "sub", "f.txt")},
		{"new/deeper/file", filepath.Join(dir, "new", "deeper", "file")},
		{filepath.Join(dir, "sub", "f.txt"), filepath.Join(dir, "sub", "f.txt")},
		{"sub/../sub/f.txt", filepath.Join(dir, "sub", "f.txt")},
		{"in/f.txt", filepath.Join(dir, "sub", "f.txt")},
		{"in/new.txt", filepath.Join(dir, "sub", "new.txt")},
		{"rel-in", filepath.Join(dir, "sub", "f.txt")},
		{"dangling-in", filepath.Join(dir, "sub", "new.txt")},
		{"sub/f.txt/x", filepath.Join(dir, "sub", "f.txt", "x")},
	}
	for _, c := range ok {
		got, err := ws.Resolve(c.in)
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Resolve(%q) = %s, want %s", c.in, got, c.want)
		}
	}

	refused := []string{
		"..", "../x", "sub/../../x", "/etc/passwd", "/", outside,
		"out", "out/x", "out/new/deeper", "sub/up", "sub/up/etc",
		"dangling-out", "dangling-out/more",
	}
	for _, p := range refused {
		got, err := ws.Resolve(p)
		if !errors.Is(err, ErrOutsideWorkspace) {
			t.Errorf("Resolve(%q) = %q, %v; want ErrOutsideWorkspace", p, got, err)
			continue
		}
		if want := `path "` + p + `" is outside the workspace`; err.Error() != want {
			t.Errorf("Resolve(%q) error = %q, want %q", p, err, want)
		}
	}

	for _, p := range []string{"", "  ", "a\x00b", "loop-a", "loop-a/x"} {
		if got, err := ws.Resolve(p); err == nil {
			t.Errorf("Resolve(%q) = %q, want an error", p, got)
		}
	}
}

func TestRel(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	mustMkdir(t, filepath.Join(ws.Dir(), "sub"))
	mustSymlink(t, "sub", filepath.Join(ws.Dir(), "link"))
	for in, want := range map[string]string{".": ".", "a/b": "a/b", "link/c": "sub/c", ws.Dir(): "."} {
		got, err := ws.Rel(in)
		if err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
