package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/runnel/runnel"
)

// WriteFiles writes a request's harnessFiles into the workspace: parents
// are created, an executable file gets mode 0755 and any other 0644, and
// a path that leads outside the workspace (by "..", an absolute path or a
// symlink) is refused. It stops at the first file it cannot write.
func (w *Workspace) WriteFiles(files []runnel.File) error {
	for _, f := range files {
		if err := w.writeFile(f.Path, f.Content, f.Executable); err != nil {
			return err
		}
	}
	return nil
}

// WriteAgentsMd writes text as AGENTS.md at the workspace root, where ACP
// agents look for it. Empty text writes nothing.
func (w *Workspace) WriteAgentsMd(text string) error {
	if text == "" {
		return nil
	}
	return w.writeFile("AGENTS.md", text, false)
}

// WriteSkills writes a request's skills. A skill with a path is a plain
// file, written like a harness file. A named skill becomes
// <dir>/<name>/SKILL.md (YAML front matter with name and description,
// then the body) plus its files under <dir>/<name>/, once for each of the
// workspace's skill directories (DefaultSkillDirs: every agent finds it
// where it looks). A skill file may not leave its skill's directory.
// Files are written after SKILL.md, so a skill that ships its own
// SKILL.md among its files keeps it.
func (w *Workspace) WriteSkills(skills []runnel.Skill) error {
	// Every skill is checked before any is written, so a refused request
	// leaves no half-written skill behind.
	for _, s := range skills {
		if err := checkSkill(s); err != nil {
			return err
		}
	}
	for _, s := range skills {
		if s.Path != "" {
			if err := w.writeFile(s.Path, s.Content, s.Executable); err != nil {
				return err
			}
			continue
		}
		for _, base := range w.skillDirs {
			if err := w.writeSkill(path.Join(base, s.Name), s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *Workspace) writeSkill(dir string, s runnel.Skill) error {
	if err := w.writeFile(path.Join(dir, "SKILL.md"), skillMarkdown(s), false); err != nil {
		return err
	}
	for _, f := range s.Files {
		rel, _ := inside(f.Path) // checked by checkSkill
		if err := w.writeFile(path.Join(dir, rel), f.Content, f.Executable); err != nil {
			return fmt.Errorf("skill %q: %w", s.Name, err)
		}
	}
	return nil
}

// checkSkill refuses a named skill whose name is not one directory name
// or whose files leave its directory. A plain file is checked when it is
// written, since only the workspace can tell where its path leads.
func checkSkill(s runnel.Skill) error {
	if s.Path != "" {
		return nil
	}
	switch {
	case s.Name == "":
		return errors.New("a skill has neither a path nor a name; send {path, content} for a file or {name, description, body, files} for a skill")
	case strings.ContainsAny(s.Name, `/\`) || s.Name == "." || s.Name == ".." || strings.ContainsRune(s.Name, 0):
		return fmt.Errorf("skill name %q is not a single directory name", s.Name)
	}
	for _, f := range s.Files {
		if _, err := inside(f.Path); err != nil {
			return fmt.Errorf("skill %q: %w", s.Name, err)
		}
	}
	return nil
}

// writeFile writes one file through the workspace's root. WriteFile sets
// the mode only when it creates the file, and through the umask, so the
// mode is set again afterwards.
func (w *Workspace) writeFile(p, content string, executable bool) error {
	rel, err := w.Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("path %q is the workspace itself, not a file", p)
	}
	mode := fs.FileMode(0o644)
	if executable {
		mode = 0o755
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("writing %q: %w", p, unwrapPath(err))
		}
	}
	if err := w.root.WriteFile(rel, []byte(content), mode); err != nil {
		return fmt.Errorf("writing %q: %w", p, unwrapPath(err))
	}
	if err := w.root.Chmod(rel, mode); err != nil {
		return fmt.Errorf("writing %q: %w", p, unwrapPath(err))
	}
	return nil
}

// inside cleans p and refuses one that is absolute or climbs out of the
// directory it is relative to.
func inside(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("a file has an empty path")
	}
	clean := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if path.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q is outside the skill's directory", p)
	}
	return clean, nil
}

// skillMarkdown renders a named skill as SKILL.md. A body that already
// starts with front matter is the whole file and is written as it is.
func skillMarkdown(s runnel.Skill) string {
	if strings.HasPrefix(s.Body, "---\n") || strings.HasPrefix(s.Body, "---\r\n") {
		return s.Body
	}
	var b strings.Builder
	b.WriteString("---\nname: ")
	b.WriteString(yamlString(s.Name))
	b.WriteString("\ndescription: ")
	b.WriteString(yamlString(s.Description))
	b.WriteString("\n---\n\n")
	b.WriteString(s.Body)
	if s.Body != "" && !strings.HasSuffix(s.Body, "\n") {
		b.WriteByte('\n')
	}
	return b.String()
}

// yamlString writes s as a YAML string: plain when that cannot be read as
// anything else, otherwise double-quoted. A JSON string is a valid YAML
// double-quoted scalar, escapes included.
func yamlString(s string) string {
	if plainYAML(s) {
		return s
	}
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// plainYAML reports whether s reads back as the same string unquoted: it
// starts with a letter, holds only ordinary punctuation, has no ": " or
// " #", and is not a word YAML reads as a boolean or null.
func plainYAML(s string) bool {
	if s == "" || !isLetter(s[0]) || strings.HasSuffix(s, " ") || strings.HasSuffix(s, ":") ||
		strings.Contains(s, ": ") || strings.Contains(s, " #") {
		return false
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !(c >= '0' && c <= '9') && !strings.ContainsRune(" .,;:_-()/'!?+=", rune(c)) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
