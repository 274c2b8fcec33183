package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	// Leave behind what a careless command would: a directory nobody may
	// write to, holding a file.
	if err := os.MkdirAll(filepath.Join(ws.Dir(), "locked", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir(), "locked", "deep", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws.Dir(), "locked"), 0o500); err != nil {
		t.Fatal(err)
	}
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
