package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

// tree lists every file under dir as "path mode content", and every
// directory as "path/".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case d.IsDir():
			out = append(out, rel+"/")
		case d.Type()&fs.ModeSymlink != 0:
			out = append(out, rel+" symlink")
		default:
			fi, err := d.Info()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" "+fi.Mode().Perm().String()+" "+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestWriteFiles(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	err := ws.WriteFiles([]runnel.File{
		{Path: ".claude/settings.json", Content: "{}"},
		{Path: "bin/run.sh", Content: "#!/bin/sh\necho hi\n", Executable: true},
		{Path: "notes.txt", Content: "one"},
		{Path: "notes.txt", Content: "two"}, // a later file wins
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteAgentsMd("Be kind."); err != nil {
		t.Fatal(err)
	}
	want := []string{
		".claude/",
		".claude/settings.json -rw-r--r-- {}",
		"AGENTS.md -rw-r--r-- Be kind.",
		"bin/",
		"bin/run.sh -rwxr-xr-x #!/bin/sh\necho hi\n",
		"notes.txt -rw-r--r-- two",
	}
	if diff := cmp.Diff(want, tree(t, ws.Dir())); diff != "" {
		t.Errorf("workspace (-want +got):\n%s", diff)
	}
}

func TestWriteAgentsMdEmptyWritesNothing(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	if err := ws.WriteAgentsMd(""); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, ws.Dir()); len(got) != 0 {
		t.Errorf("workspace = %q, want empty", got)
	}
}

func TestWriteFilesConfined(t *testing.T) {
	for _, p := range []string{"../escape.txt", "a/../../escape.txt", "/tmp/escape.txt", "out/escape.txt", "out", "dangling"} {
		t.Run(p, func(t *testing.T) {
			ws := newTestWorkspace(t, nil)
			outside := t.TempDir()
			mustSymlink(t, outside, filepath.Join(ws.Dir(), "out"))
			mustSymlink(t, filepath.Join(outside, "made-by-write"), filepath.Join(ws.Dir(), "dangling"))
			err := ws.WriteFiles([]runnel.File{{Path: p, Content: "x"}})
			if !errors.Is(err, ErrOutsideWorkspace) {
				t.Fatalf("WriteFiles(%q) = %v, want ErrOutsideWorkspace", p, err)
			}
			if got := tree(t, outside); len(got) != 0 {
				t.Errorf("files appeared outside the workspace: %q", got)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(ws.Dir()), "escape.txt")); err == nil {
				t.Error("escape.txt was written next to the workspace")
			}
		})
	}
}

func TestWriteSkills(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	err := ws.WriteSkills([]runnel.Skill{
		{File: runnel.File{Path: "docs/style.md", Content: "tabs"}},
		{
			Name: "release-notes", Description: "Draft release notes from a changelog.",
			Body:  "Read the changelog, then write release notes.",
			Files: []runnel.File{{Path: "scripts/draft.py", Content: "print('draft')", Executable: true}},
		},
		{Name: "tricky", Description: "Use when: the user says yes", Body: "body\n"},
	})
	if err != nil {
		t.Fatal(err)
	}
	releaseMd := "---\nname: release-notes\ndescription: Draft release notes from a changelog.\n---\n\nRead the changelog, then write release notes.\n"
	trickyMd := "---\nname: tricky\ndescription: \"Use when: the user says yes\"\n---\n\nbody\n"
	var want []string
	for _, base := range []string{".agents", ".claude"} {
		want = append(want,
			base+"/",
			base+"/skills/",
			base+"/skills/release-notes/",
			base+"/skills/release-notes/SKILL.md -rw-r--r-- "+releaseMd,
			base+"/skills/release-notes/scripts/",
			base+"/skills/release-notes/scripts/draft.py -rwxr-xr-x print('draft')",
			base+"/skills/tricky/",
			base+"/skills/tricky/SKILL.md -rw-r--r-- "+trickyMd,
		)
	}
	want = append(want, "docs/", "docs/style.md -rw-r--r-- tabs")
	sort.Strings(want)
	if diff := cmp.Diff(want, tree(t, ws.Dir())); diff != "" {
		t.Errorf("workspace (-want +got):\n%s", diff)
	}
}

func TestWriteSkillsOwnFrontMatterAndDirs(t *testing.T) {
	ws := newTestWorkspace(t, &WorkspaceOptions{SkillDirs: []string{"skills"}})
	body := "---\nname: mine\ndescription: d\nallowed-tools: Read\n---\nText\n"
	if err := ws.WriteSkills([]runnel.Skill{{Name: "mine", Description: "ignored", Body: body}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"skills/", "skills/mine/", "skills/mine/SKILL.md -rw-r--r-- " + body}
	if diff := cmp.Diff(want, tree(t, ws.Dir())); diff != "" {
		t.Errorf("workspace (-want +got):\n%s", diff)
	}
}

func TestWriteSkillsRefused(t *testing.T) {
	cases := []struct {
		name  string
		skill runnel.Skill
		want  string
	}{
		{"file escapes the skill", runnel.Skill{Name: "s", Files: []runnel.File{{Path: "../../../AGENTS.md", Content: "x"}}},
			`skill "s": path "../../../AGENTS.md" is outside the skill's directory`},
		{"absolute skill file", runnel.Skill{Name: "s", Files: []runnel.File{{Path: "/etc/x", Content: "x"}}},
			`skill "s": path "/etc/x" is outside the skill's directory`},
		{"name with a slash", runnel.Skill{Name: "a/b"}, `skill name "a/b" is not a single directory name`},
		{"dot-dot name", runnel.Skill{Name: ".."}, `skill name ".." is not a single directory name`},
		{"no name, no path", runnel.Skill{Body: "x"},
			"a skill has neither a path nor a name; send {path, content} for a file or {name, description, body, files} for a skill"},
		{"plain file outside", runnel.Skill{File: runnel.File{Path: "../x", Content: "x"}}, `path "../x" is outside the workspace`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := newTestWorkspace(t, nil)
			err := ws.WriteSkills([]runnel.Skill{c.skill})
			if err == nil || err.Error() != c.want {
				t.Errorf("WriteSkills = %v, want %q", err, c.want)
			}
			if got := tree(t, ws.Dir()); len(got) > 0 {
				t.Errorf("something was written: %q", got)
			}
		})
	}
}

// A skills directory that is a symlink out of the workspace is refused
// like any other path.
func TestWriteSkillsThroughSymlink(t *testing.T) {
	ws := newTestWorkspace(t, nil)
	outside := t.TempDir()
	mustSymlink(t, outside, filepath.Join(ws.Dir(), ".agents"))
	err := ws.WriteSkills([]runnel.Skill{{Name: "s", Body: "b"}})
	if !errors.Is(err, ErrOutsideWorkspace) {
		t.Fatalf("WriteSkills = %v, want ErrOutsideWorkspace", err)
	}
	if got := tree(t, outside); len(got) != 0 {
		t.Errorf("files appeared outside the workspace: %q", got)
	}
}

func TestYAMLString(t *testing.T) {
	for in, want := range map[string]string{
		"release-notes":            "release-notes",
		"Draft notes, then ship.":  "Draft notes, then ship.",
		"":                         `""`,
		"yes":                      `"yes"`,
		"Null":                     `"Null"`,
		"key: value":               `"key: value"`,
		"trailing colon:":          `"trailing colon:"`,
		"a # comment":              `"a # comment"`,
		"- list":                   `"- list"`,
		"42":                       `"42"`,
		"two\nlines":               `"two\nlines"`,
		`say "hi"`:                 `"say \"hi\""`,
		"[flow]":                   `"[flow]"`,
		"Use when asked (or not).": "Use when asked (or not).",
	} {
		if got := yamlString(in); got != want {
			t.Errorf("yamlString(%q) = %s, want %s", in, got, want)
		}
	}
}
