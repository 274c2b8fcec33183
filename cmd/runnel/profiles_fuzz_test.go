package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel/internal/strictjson"
)

// FuzzProfilesFile fuzzes the reading of RUNNEL_PROFILES_FILE (secrets
// from the environment only: a file reference would read the fuzzer's
// choice of file). Whatever the file, no error carries a secret's value;
// and every profile it yields has a unique name, runs with a fresh copy
// of its run fields and secrets each time (a run cannot change the
// next), and reports the model it runs.
func FuzzProfilesFile(f *testing.F) {
	for _, s := range []string{
		`{"profiles":[{"name":"gpt","label":"GPT-5","default":true,"run":{"model":"openai/gpt-5","customTools":[{"name":"connect","kind":"client"}]},"secrets":{"OPENAI_API_KEY":{"env":"OPENAI_API_KEY"}}}]}`,
		`{"profiles":[{"name":"a","run":{"model":"anthropic/claude-sonnet-4-5"}},{"name":"a"},{"name":" "},{"name":"b","default":true},{"name":"c","default":true}]}`,
		`{"profiles":[{"name":"x","run":{"messages":[{"role":"user","content":"hi"}]}},{"name":"y","run":{"secrets":{"K":"v"}}},{"name":"z","secrets":{"K":{"env":"UNSET"}}},{"name":"w","secrets":{"K":{}}}]}`,
		`{"profiles":[]}`, `{"profiles":[{"name":"n","run":null}]}`, `{"profiles":[{"name":"n","run":[1]}]}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	const value = "sk-from-the-environment-0123456789"
	getenv := func(name string) string {
		if name == "UNSET" {
			return ""
		}
		return value
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var file profilesFile
		if strictjson.Unmarshal(data, &file) == nil {
			for _, p := range file.Profiles {
				for _, s := range p.Secrets {
					if s.File != "" {
						return
					}
				}
			}
		}
		path := filepath.Join(t.TempDir(), "profiles.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		profiles, secrets, err := loadProfiles(path, getenv)
		if err != nil && strings.Contains(err.Error(), value) {
			t.Fatalf("the error carries a secret: %v", err)
		}
		names := map[string]bool{}
		for _, p := range profiles {
			if names[p.Name] || strings.TrimSpace(p.Name) == "" {
				t.Fatalf("profile name %q is empty or given twice", p.Name)
			}
			names[p.Name] = true
			first, err := p.Run()
			if err != nil {
				t.Fatalf("profile %q loaded but does not run: %v", p.Name, err)
			}
			if first.Model != p.Model || len(first.Messages) > 0 {
				t.Fatalf("profile %q runs model %q with %d messages; it shows model %q", p.Name, first.Model, len(first.Messages), p.Model)
			}
			for k, v := range first.Secrets {
				if v != value {
					t.Fatalf("profile %q secret %s is %q, not the environment's", p.Name, k, v)
				}
			}
			before, _ := p.Run()
			first.Model, first.SessionID = "changed", "changed"
			for k := range first.Secrets {
				first.Secrets[k] = "changed"
			}
			after, _ := p.Run()
			if diff := cmp.Diff(before, after); diff != "" {
				t.Fatalf("profile %q: changing one run's fields changed the next (-before +after):\n%s", p.Name, diff)
			}
		}
		for _, s := range secrets {
			if s != value {
				t.Fatalf("secret value %q is not the environment's", s)
			}
		}
	})
}
