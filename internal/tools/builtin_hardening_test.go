package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEditBomb: replacing a byte everywhere in a large file by a thousand
// is refused before anything is built; the file is left as it was.
func TestEditBomb(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.file(t, "big.txt", strings.Repeat("a", 9<<20))
	got, isErr := e.call(t, "edit", map[string]any{"path": "big.txt", "old_string": "a", "new_string": strings.Repeat("b", 1000), "replace_all": true})
	if !isErr || !strings.Contains(got, "more than edit handles") {
		t.Fatalf("edit = %q (error %v), want it refused as too large", got, isErr)
	}
	if fi, err := os.Stat(filepath.Join(e.ws.Dir(), "big.txt")); err != nil || fi.Size() != 9<<20 {
		t.Errorf("the file changed: %v, %v", fi.Size(), err)
	}
	// One replacement that grows past the cap is refused too.
	if got, isErr := e.call(t, "edit", map[string]any{"path": "big.txt", "old_string": strings.Repeat("a", 10), "new_string": strings.Repeat("c", 2<<20)}); !isErr {
		t.Errorf("a growing single edit = %q, want it refused", got)
	}
}

// TestWriteCap: write takes at most maxWriteBytes of content.
func TestWriteCap(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	got, isErr := e.call(t, "write", map[string]any{"path": "huge.txt", "content": strings.Repeat("x", maxWriteBytes+1)})
	if !isErr || !strings.Contains(got, "more than write takes") {
		t.Fatalf("write = %q (error %v), want it refused", got, isErr)
	}
	if _, err := os.Stat(filepath.Join(e.ws.Dir(), "huge.txt")); err == nil {
		t.Error("the file was written")
	}
}

// TestHardLinkedFilesAreNotChanged: a command can hard-link a file from
// outside the workspace into it; edit and write must not change it.
func TestHardLinkedFilesAreNotChanged(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	outside := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(outside, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(e.ws.Dir(), "linked")); err != nil {
		t.Skipf("cannot hard-link across these directories: %v", err)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"edit", map[string]any{"path": "linked", "old_string": "root", "new_string": "toor"}},
		{"write", map[string]any{"path": "linked", "content": "pwned"}},
	} {
		if got, isErr := e.call(t, c.tool, c.args); !isErr || !strings.Contains(got, "more than one hard link") {
			t.Errorf("%s = %q (error %v), want a refusal", c.tool, got, isErr)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "root:x:0:0\n" {
		t.Errorf("the outside file changed: %q", b)
	}
}

// TestBuiltinArgumentsMatchExactly: the builtins read their arguments as
// the permission gate does: names exactly, each once.
func TestBuiltinArgumentsMatchExactly(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	for _, tc := range []struct{ args, want string }{
		{`{"COMMAND":"echo hi"}`, "Tool 'bash' missing required argument(s): command."},
		{`{"command":"echo hi","command":"echo bye"}`, `Tool 'bash' arguments are ambiguous: the object has the member "command" twice.`},
		{`{"command":"echo hi","timeout_ms":1e300}`, "hi"},
	} {
		got, _ := e.call(t, "bash", tc.args)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("bash %s = %q, want it to start %q", tc.args, got, tc.want)
		}
	}
}

// TestSubjectIsWhatTheToolTouches: the argument a permission rule sees is
// the one the tool acts on: bash's command, the file tools' path resolved
// in the workspace, whatever spelling the model used.
func TestSubjectIsWhatTheToolTouches(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.file(t, "secret/x", "s")
	if err := os.Symlink("secret", filepath.Join(e.ws.Dir(), "alias")); err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		tool, args string
		want       *string
	}{
		{"bash", `{"command":"rm -rf /","description":"harmless"}`, str("rm -rf /")},
		{"bash", `{"COMMAND":"rm -rf /"}`, str("")},
		{"write", `{"content":"1","path":"secret/x"}`, str("secret/x")},
		{"write", `{"path":"./public/../secret/x","content":"1"}`, str("secret/x")},
		{"edit", `{"path":"` + e.ws.Dir() + `/secret/x","old_string":"a","new_string":"b"}`, str("secret/x")},
		{"read", `{"path":"alias/x"}`, str("secret/x")},
		{"ls", `{}`, str(".")},
		{"grep", `{"pattern":"x"}`, str(".")},
		{"find", `{"pattern":"*","path":"secret"}`, str("secret")},
		{"read", `{"path":"/etc/passwd"}`, nil},
		{"write", `{"path":7}`, nil},
	}
	for _, tt := range tests {
		got := e.tools[tt.tool].Subject(json.RawMessage(tt.args))
		if !cmp.Equal(got, tt.want) {
			t.Errorf("%s %s: subject %v, want %v", tt.tool, tt.args, show(got), show(tt.want))
		}
	}
}

func show(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
