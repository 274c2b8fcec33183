package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func searchTree(t *testing.T) *builtinEnv {
	e := newBuiltinEnv(t, nil)
	for p, content := range map[string]string{
		"README.md":             "# Title\nhello world\n",
		"notes.txt":             "Hello again\n",
		"src/main.go":           "package main\n\nfunc main() { hello() }\n",
		"src/util/util.go":      "package util\n// HELLO in caps\n",
		"src/util/util_test.go": "package util\n",
		"src/image.png":         "\x89PNG\x00\x00hello",
		".git/config":           "hello from git\n",
		"docs/guide.md":         "nothing here\n",
	} {
		e.file(t, p, content)
	}
	return e
}

func TestFind(t *testing.T) {
	e := searchTree(t)
	e.run(t, "find", []toolCase{
		{"bare name at any depth", args{"pattern": "*.go"}, "src/main.go\nsrc/util/util.go\nsrc/util/util_test.go\n", false},
		{"double star", args{"pattern": "**/*.go"}, "src/main.go\nsrc/util/util.go\nsrc/util/util_test.go\n", false},
		{"anchored", args{"pattern": "src/*.go"}, "src/main.go\n", false},
		{"anchored double star", args{"pattern": "src/**/*_test.go"}, "src/util/util_test.go\n", false},
		{"braces", args{"pattern": "*.{md,txt}"}, "README.md\ndocs/guide.md\nnotes.txt\n", false},
		{"directories", args{"pattern": "util"}, "src/util/\n", false},
		{"everything under a path", args{"pattern": "**", "path": "src/util"}, "src/util/util.go\nsrc/util/util_test.go\n", false},
		{"relative to path", args{"pattern": "*.go", "path": "src/util"}, "src/util/util.go\nsrc/util/util_test.go\n", false},
		{"git is skipped", args{"pattern": "config"}, `No files match "config" under ./.`, false},
		{"no match", args{"pattern": "*.rs", "path": "src"}, `No files match "*.rs" under src.`, false},
		{"bad pattern", args{"pattern": "[a-"}, `Pattern "[a-" is not a valid glob (check its [ ] classes and \ escapes).`, true},
		{"absolute pattern", args{"pattern": "/etc/*"}, `Pattern "/etc/*" is absolute; patterns are relative to path (e.g. **/*.go).`, true},
		{"climbing pattern", args{"pattern": "../*"}, `Pattern "../*" climbs out with ..; set path instead.`, true},
		{"path is a file", args{"pattern": "*", "path": "notes.txt"}, `"notes.txt" is a file; find searches directories.`, true},
	})
}

func TestFindCap(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	for i := range maxFindResults + 7 {
		e.file(t, fmt.Sprintf("many/f%04d.txt", i), "")
	}
	got, isErr := e.call(t, "find", args{"pattern": "*.txt"})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if isErr || len(lines) != maxFindResults+1 || lines[len(lines)-1] != "[... 7 more matches not shown; narrow the pattern or the path.]" {
		t.Errorf("find of %d files gave %d lines ending %q", maxFindResults+7, len(lines), lines[len(lines)-1])
	}
}

func TestGrep(t *testing.T) {
	e := searchTree(t)
	e.run(t, "grep", []toolCase{
		{"everywhere", args{"pattern": "hello"}, "README.md:2:hello world\nsrc/main.go:3:func main() { hello() }\n", false},
		{"ignore case", args{"pattern": "hello", "ignore_case": true},
			"README.md:2:hello world\nnotes.txt:1:Hello again\nsrc/main.go:3:func main() { hello() }\nsrc/util/util.go:2:// HELLO in caps\n", false},
		{"glob", args{"pattern": "(?i)hello", "glob": "*.go"}, "src/main.go:3:func main() { hello() }\nsrc/util/util.go:2:// HELLO in caps\n", false},
		{"path", args{"pattern": "package", "path": "src/util"}, "src/util/util.go:1:package util\nsrc/util/util_test.go:1:package util\n", false},
		{"one file", args{"pattern": "^#", "path": "README.md"}, "README.md:1:# Title\n", false},
		{"no match", args{"pattern": "absent"}, "No matches found.", false},
		{"bad regexp", args{"pattern": "a(b"}, "pattern is not a valid regular expression (Go RE2 syntax): missing closing ): `a(b`.", true},
		{"missing path", args{"pattern": "x", "path": "nope"}, `"nope" does not exist.`, true},
	})
}

func TestGrepCapAndLongLines(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	e.file(t, "long.txt", "needle "+strings.Repeat("z", 5000)+"\n")
	got, _ := e.call(t, "grep", args{"pattern": "needle"})
	if want := "long.txt:1:needle " + strings.Repeat("z", maxLineBytes-7) + " [... line cut]\n"; got != want {
		t.Errorf("grep of a long line = %.60q…, %d bytes; want %d bytes", got, len(got), len(want))
	}

	var b strings.Builder
	for i := range maxGrepMatches + 10 {
		fmt.Fprintf(&b, "match %d\n", i)
	}
	e.file(t, "many.txt", b.String())
	got, isErr := e.call(t, "grep", args{"pattern": "^match", "path": "many.txt"})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if isErr || len(lines) != maxGrepMatches+1 || !strings.HasPrefix(lines[len(lines)-1], "[The search stopped at 500 matches") {
		t.Errorf("grep of %d matches gave %d lines ending %q", maxGrepMatches+10, len(lines), lines[len(lines)-1])
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pattern string
		yes, no []string
	}{
		{"*.go", []string{"a.go", "x/y/a.go", ".hidden.go"}, []string{"a.go/b", "a.gox"}},
		{"**/*.go", []string{"a.go", "x/y/a.go"}, []string{"a.txt"}},
		{"src/**", []string{"src", "src/a", "src/a/b"}, []string{"other/a"}},
		{"src/**/x", []string{"src/x", "src/a/b/x"}, []string{"x", "src/x/y"}},
		{"**/a/**/b/**", []string{"a/b/c", "z/a/y/b/c"}, []string{"a/c", "b/a/c"}},
		{"a/{b,c}/d", []string{"a/b/d", "a/c/d"}, []string{"a/e/d"}},
		{"{x,y{1,2}}.txt", []string{"x.txt", "y1.txt", "deep/y2.txt"}, []string{"y.txt"}},
		{"./docs//*.md", []string{"docs/a.md"}, []string{"a.md", "x/docs/a.md"}},
		{"lone{brace", []string{"lone{brace"}, []string{"lonebrace"}},
	}
	for _, c := range cases {
		g, err := parseGlob(c.pattern)
		if err != nil {
			t.Errorf("parseGlob(%q): %v", c.pattern, err)
			continue
		}
		for _, p := range c.yes {
			if !g.match(p) {
				t.Errorf("%q does not match %q", c.pattern, p)
			}
		}
		for _, p := range c.no {
			if g.match(p) {
				t.Errorf("%q matches %q", c.pattern, p)
			}
		}
	}
	if _, err := parseGlob("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}"); err == nil {
		t.Error("a 128-way brace expansion was accepted")
	}
}

// Every path a builtin takes is confined to the workspace: "..", absolute
// paths elsewhere, and a symlink inside the workspace that points out.
func TestBuiltinsConfined(t *testing.T) {
	e := newBuiltinEnv(t, nil)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("outside-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.ws.Dir(), "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(e.ws.Dir(), "secret-link")); err != nil {
		t.Fatal(err)
	}
	escapes := []string{"../x", "/etc/passwd", outside, "out", "out/secret.txt", "out/new/file.txt", "secret-link"}
	for _, p := range escapes {
		for tool, a := range map[string]args{
			"read":  {"path": p},
			"write": {"path": p, "content": "pwned"},
			"edit":  {"path": p, "old_string": "outside", "new_string": "pwned"},
			"ls":    {"path": p},
			"find":  {"pattern": "*", "path": p},
			"grep":  {"pattern": "secret", "path": p},
		} {
			got, isErr := e.call(t, tool, a)
			want := fmt.Sprintf("Path %q is outside the workspace. Every path must stay inside the workspace %s; relative paths start there.", p, e.ws.Dir())
			if !isErr || got != want {
				t.Errorf("%s %q = %q (isError %v), want the refusal", tool, p, got, isErr)
			}
		}
	}
	// Searching the whole workspace does not follow the links out.
	if got, _ := e.call(t, "grep", args{"pattern": "outside-secret"}); got != "No matches found." {
		t.Errorf("grep found something through a symlink: %q", got)
	}
	if got, _ := e.call(t, "find", args{"pattern": "secret.txt"}); !strings.HasPrefix(got, "No files match") {
		t.Errorf("find walked through a symlink: %q", got)
	}
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the outside directory now holds %d entries, want only secret.txt", len(entries))
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside-secret\n" {
		t.Errorf("the outside file was changed to %q", b)
	}
}
