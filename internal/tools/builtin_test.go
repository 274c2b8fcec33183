package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel/internal/sandbox"
)

// builtinEnv is a workspace with every builtin working in it.
type builtinEnv struct {
	ws    *sandbox.Workspace
	tools map[string]BuiltinTool
}

func newBuiltinEnv(t testing.TB, opts *BuiltinOptions) *builtinEnv {
	t.Helper()
	ws, err := sandbox.NewWorkspace(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.Close(); err != nil {
			t.Error(err)
		}
	})
	e := &builtinEnv{ws: ws, tools: map[string]BuiltinTool{}}
	for _, bt := range NewBuiltins(Builtins(), ws, opts) {
		e.tools[bt.Name] = bt
	}
	return e
}

// call runs a builtin with args (a JSON string, or a value to marshal)
// and returns its text and error flag.
func (e *builtinEnv) call(t *testing.T, name string, args any) (string, bool) {
	t.Helper()
	return e.callCtx(t, t.Context(), name, args)
}

func (e *builtinEnv) callCtx(t *testing.T, ctx context.Context, name string, args any) (string, bool) {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	bt, ok := e.tools[name]
	if !ok {
		t.Fatalf("no builtin %q", name)
	}
	res := bt.Run(ctx, json.RawMessage(raw))
	var text string
	if err := json.Unmarshal(res.Output, &text); err != nil {
		t.Fatalf("%s output %s is not a JSON string: %v", name, res.Output, err)
	}
	return text, res.IsError
}

// file writes content at the workspace-relative path p.
func (e *builtinEnv) file(t *testing.T, p, content string) {
	t.Helper()
	full := filepath.Join(e.ws.Dir(), p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *builtinEnv) content(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.ws.Dir(), p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type toolCase struct {
	name    string
	args    any
	want    string
	wantErr bool
}

func (e *builtinEnv) run(t *testing.T, tool string, cases []toolCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, isErr := e.call(t, tool, c.args)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s %v (-want +got):\n%s", tool, c.args, diff)
			}
			if isErr != c.wantErr {
				t.Errorf("%s %v: isError = %v, want %v", tool, c.args, isErr, c.wantErr)
			}
		})
	}
}

type args = map[string]any

func TestNewBuiltins(t *testing.T) {
	ws, err := sandbox.NewWorkspace(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	type shape struct {
		Name     string
		ReadOnly bool
		Required []string
	}
	var got []shape
	for _, bt := range NewBuiltins([]string{"BASH", " grep", "Read", "ls", "find", "edit", "write", "WebFetch"}, ws, nil) {
		var schema struct {
			Type     string         `json:"type"`
			Props    map[string]any `json:"properties"`
			Required []string       `json:"required"`
		}
		if err := json.Unmarshal(bt.Schema, &schema); err != nil {
			t.Fatalf("%s schema: %v", bt.Name, err)
		}
		if schema.Type != "object" {
			t.Errorf("%s schema type = %q", bt.Name, schema.Type)
		}
		for _, r := range schema.Required {
			if _, ok := schema.Props[r]; !ok {
				t.Errorf("%s requires %s, which it does not declare", bt.Name, r)
			}
		}
		if bt.Description == "" || bt.Run == nil {
			t.Errorf("%s has no description or no Run", bt.Name)
		}
		got = append(got, shape{bt.Name, bt.ReadOnly, schema.Required})
	}
	want := []shape{
		{"read", true, []string{"path"}},
		{"write", false, []string{"path", "content"}},
		{"edit", false, []string{"path", "old_string", "new_string"}},
		{"ls", true, []string{}},
		{"find", true, []string{"pattern"}},
		{"grep", true, []string{"pattern"}},
		{"bash", false, []string{"command"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("builtins (-want +got):\n%s", diff)
	}
	if n := len(NewBuiltins(nil, ws, nil)); n != 0 {
		t.Errorf("no grants gave %d builtins", n)
	}
	if n := len(NewBuiltins([]string{"read"}, ws, nil)); n != 1 {
		t.Errorf("one grant gave %d builtins", n)
	}
}

func TestArgumentErrors(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.run(t, "read", []toolCase{
		{"not an object", `[1]`, "Tool 'read' arguments must be one JSON object. Retry the tool call with valid arguments.", true},
		{"wrong type", args{"path": 3}, "Tool 'read' argument path must be a string. Retry the tool call with a corrected value.", true},
		{"not a number", args{"path": "a", "offset": "ten"}, `Tool 'read' argument must be a number, not "ten". Retry the tool call with a corrected value.`, true},
		{"missing", args{}, "Tool 'read' missing required argument(s): path. Retry the tool call with those argument fields populated.", true},
	})
	e.run(t, "edit", []toolCase{
		{"missing several", args{"path": "a"}, "Tool 'edit' missing required argument(s): old_string, new_string. Retry the tool call with those argument fields populated.", true},
		{"bool type", args{"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"},
			"Tool 'edit' argument replace_all must be true or false. Retry the tool call with a corrected value.", true},
	})
	e.run(t, "write", []toolCase{
		{"missing content", args{"path": "a"}, "Tool 'write' missing required argument(s): content. Retry the tool call with those argument fields populated.", true},
	})
}

func TestRead(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.file(t, "a.txt", "one\ntwo\nthree\n")
	e.file(t, "noeol.txt", "first\nlast")
	e.file(t, "crlf.txt", "x\r\ny\r\n")
	e.file(t, "empty.txt", "")
	e.file(t, "bin.dat", "text\x00more")
	e.file(t, "long.txt", strings.Repeat("é", 1500)+"\n")
	var many strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	e.file(t, "many.txt", many.String())
	e.file(t, "dir/inner.txt", "in")

	e.run(t, "read", []toolCase{
		{"whole file", args{"path": "a.txt"}, "     1\tone\n     2\ttwo\n     3\tthree\n", false},
		{"no final newline", args{"path": "noeol.txt"}, "     1\tfirst\n     2\tlast\n", false},
		{"crlf", args{"path": "crlf.txt"}, "     1\tx\n     2\ty\n", false},
		{"offset and limit", args{"path": "a.txt", "offset": 2, "limit": 1},
			"     2\ttwo\n\n[Showing lines 2-2; the file continues. Call read with offset 3 to read more.]", false},
		{"numbers as strings", args{"path": "a.txt", "offset": "3"}, "     3\tthree\n", false},
		{"absolute inside", args{"path": filepath.Join(e.ws.Dir(), "dir", "inner.txt")}, "     1\tin\n", false},
		{"past the end", args{"path": "a.txt", "offset": 9}, `"a.txt" has 3 lines; offset 9 is past the end.`, true},
		{"empty", args{"path": "empty.txt"}, `("empty.txt" is empty.)`, false},
		{"binary", args{"path": "bin.dat"}, `"bin.dat" looks like a binary file (it contains NUL bytes); read shows text files only.`, true},
		{"directory", args{"path": "dir"}, `"dir" is a directory; use ls to list it.`, true},
		{"missing", args{"path": "nope.txt"}, `"nope.txt" does not exist.`, true},
		{"long line cut on a character", args{"path": "long.txt"},
			"     1\t" + strings.Repeat("é", 1000) + " [... line cut at 2000 bytes]\n", false},
	})

	got, isErr := e.call(t, "read", args{"path": "many.txt"})
	if isErr || !strings.HasPrefix(got, "     1\tline 1\n") ||
		!strings.HasSuffix(got, "  2000\tline 2000\n\n[Showing lines 1-2000; the file continues. Call read with offset 2001 to read more.]") {
		t.Errorf("read of a 2500-line file ends %q", got[max(0, len(got)-120):])
	}
	got, _ = e.call(t, "read", args{"path": "many.txt", "offset": 2001})
	if !strings.HasPrefix(got, "  2001\tline 2001\n") || !strings.HasSuffix(got, "  2500\tline 2500\n") {
		t.Errorf("read from offset 2001 = %.40q … %q", got, got[max(0, len(got)-40):])
	}
}

func TestReadByteCap(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	line := strings.Repeat("x", 1000)
	var b strings.Builder
	for range 400 { // 400 KB in 400 lines: the byte cap comes first
		b.WriteString(line + "\n")
	}
	e.file(t, "wide.txt", b.String())
	got, isErr := e.call(t, "read", args{"path": "wide.txt"})
	if isErr || len(got) > maxReadBytes+2000 {
		t.Fatalf("read returned %d bytes (isError %v), want at most about %d", len(got), isErr, maxReadBytes)
	}
	if !strings.Contains(got, "; the file continues. Call read with offset ") {
		t.Errorf("a capped read does not say how to continue: %q", got[len(got)-100:])
	}
}

func TestWrite(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.file(t, "script.sh", "old")
	if err := os.Chmod(filepath.Join(e.ws.Dir(), "script.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.file(t, "dir/x", "")
	e.run(t, "write", []toolCase{
		{"new file with parents", args{"path": "a/b/c.txt", "content": "hello"}, "Created a/b/c.txt (5 bytes).", false},
		{"overwrite", args{"path": "script.sh", "content": "#!/bin/sh\n"}, "Overwrote script.sh (10 bytes).", false},
		{"empty content", args{"path": "empty", "content": ""}, "Created empty (0 bytes).", false},
		{"directory", args{"path": "dir", "content": "x"}, `"dir" is a directory; write needs the path of a file.`, true},
		{"parent is a file", args{"path": "script.sh/x", "content": "x"}, `A parent of "script.sh/x" is a file, not a directory.`, true},
	})
	if got := e.content(t, "a/b/c.txt"); got != "hello" {
		t.Errorf("a/b/c.txt = %q", got)
	}
	fi, err := os.Stat(filepath.Join(e.ws.Dir(), "script.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 || e.content(t, "script.sh") != "#!/bin/sh\n" {
		t.Errorf("script.sh = %v %q, want 0755 with the new content", fi.Mode().Perm(), e.content(t, "script.sh"))
	}
}

func TestEdit(t *testing.T) {
	cases := []struct {
		toolCase
		before, after string
	}{
		{toolCase{"unique", args{"path": "f", "old_string": "b := 2", "new_string": "b := 3"}, "Edited f: replaced 1 occurrence.", false},
			"a := 1\nb := 2\n", "a := 1\nb := 3\n"},
		{toolCase{"not found", args{"path": "f", "old_string": "c := 3", "new_string": "x"},
			`old_string was not found in "f". It must match the file exactly, whitespace and indentation included; read the file again and copy the text from it, without the line-number prefix.`, true},
			"a := 1\n", "a := 1\n"},
		{toolCase{"not unique", args{"path": "f", "old_string": "x", "new_string": "y"},
			`old_string occurs 3 times in "f". Include more surrounding lines to make it unique, or set replace_all to true to replace every occurrence.`, true},
			"x x\nx\n", "x x\nx\n"},
		{toolCase{"replace all", args{"path": "f", "old_string": "x", "new_string": "y", "replace_all": true}, "Edited f: replaced 3 occurrences.", false},
			"x x\nx\n", "y y\ny\n"},
		{toolCase{"empty old_string", args{"path": "f", "old_string": "", "new_string": "y"},
			"old_string is empty; give the exact text to replace (to create a file, use write).", true}, "x", "x"},
		{toolCase{"same strings", args{"path": "f", "old_string": "x", "new_string": "x"},
			"old_string and new_string are the same; there is nothing to change.", true}, "x", "x"},
		{toolCase{"crlf file, lf old_string", args{"path": "f", "old_string": "one\ntwo", "new_string": "1\n2"}, "Edited f: replaced 1 occurrence.", false},
			"one\r\ntwo\r\n", "1\r\n2\r\n"},
		{toolCase{"binary", args{"path": "f", "old_string": "a", "new_string": "b"},
			`"f" looks like a binary file (it contains NUL bytes); edit changes text files only.`, true}, "a\x00", "a\x00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newBuiltinEnv(t, nil)
			e.file(t, "f", c.before)
			got, isErr := e.call(t, "edit", c.args)
			if diff := cmp.Diff(c.want, got); diff != "" || isErr != c.wantErr {
				t.Errorf("edit (-want +got):\n%s\nisError = %v", diff, isErr)
			}
			if after := e.content(t, "f"); after != c.after {
				t.Errorf("file after edit = %q, want %q", after, c.after)
			}
		})
	}
	e := newBuiltinEnv(t, nil)
	e.run(t, "edit", []toolCase{
		{"missing file", args{"path": "nope", "old_string": "a", "new_string": "b"}, `"nope" does not exist; use write to create a file.`, true},
	})
}

func TestLs(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.file(t, "b.txt", "")
	e.file(t, "a/x", "")
	e.file(t, ".hidden", "")
	if err := os.Symlink("b.txt", filepath.Join(e.ws.Dir(), "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.ws.Dir(), "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.run(t, "ls", []toolCase{
		{"root by default", args{}, ".hidden\na/\nb.txt\nc@\nempty/\n", false},
		{"root by dot", args{"path": "."}, ".hidden\na/\nb.txt\nc@\nempty/\n", false},
		{"subdirectory", args{"path": "a"}, "x\n", false},
		{"empty", args{"path": "empty"}, "(empty directory)", false},
		{"a file", args{"path": "b.txt"}, `"b.txt" is a file, not a directory; use read to see its content.`, true},
		{"missing", args{"path": "nope"}, `"nope" does not exist.`, true},
	})
}

func TestLsCap(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	for i := range maxListEntries + 5 {
		e.file(t, fmt.Sprintf("d/f%04d", i), "")
	}
	got, _ := e.call(t, "ls", args{"path": "d"})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != maxListEntries+1 || lines[len(lines)-1] != "[... 5 more entries not shown]" {
		t.Errorf("ls of %d entries gave %d lines ending %q", maxListEntries+5, len(lines), lines[len(lines)-1])
	}
}

// A FIFO left in the workspace must not hang a builtin that opens it.
func TestSpecialFilesRefused(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	if err := syscall.Mkfifo(filepath.Join(e.ws.Dir(), "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.run(t, "read", []toolCase{{"read", args{"path": "pipe"},
		`"pipe" is not a regular file (it is a device, pipe or socket); read shows text files only.`, true}})
	e.run(t, "write", []toolCase{{"write", args{"path": "pipe", "content": "x"},
		`"pipe" is not a regular file (it is a device, pipe or socket); write replaces files only.`, true}})
	e.run(t, "edit", []toolCase{{"edit", args{"path": "pipe", "old_string": "a", "new_string": "b"},
		`"pipe" is not a regular file (it is a device, pipe or socket); edit changes text files only.`, true}})
	e.run(t, "grep", []toolCase{
		{"grep the fifo", args{"pattern": "x", "path": "pipe"}, "No matches found.", false},
		{"grep around it", args{"pattern": "x"}, "No matches found.", false},
	})
	e.run(t, "ls", []toolCase{{"ls", args{"path": "pipe"},
		`"pipe" is a file, not a directory; use read to see its content.`, true}})
}
