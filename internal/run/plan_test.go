package run

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/conformance"
	"github.com/runnel/runnel/internal/provider"
)

// validRequest passes every check; each refusal case breaks one thing.
func validRequest() *runnel.RunRequest {
	return &runnel.RunRequest{
		Model:    "openai/gpt-5",
		Messages: []runnel.Message{runnel.UserText("hi")},
		Secrets:  map[string]string{"OPENAI_API_KEY": "sk-x"},
	}
}

// unreachable is a model factory for refusal tests: a refused request must
// never get as far as building a model.
func unreachable(string, provider.Config) (provider.Model, error) {
	return nil, errors.New("a refused request built a model")
}

func TestRefusals(t *testing.T) {
	callback := &runnel.ToolCallback{Endpoint: "https://platform.example/tools/call"}
	tests := []struct {
		name   string
		modify func(r *runnel.RunRequest)
		want   string
	}{
		{"ACP harness", func(r *runnel.RunRequest) { r.Harness = "claude" },
			`Harness "claude" is not available: this runnel runs no ACP agents (its agents directory is not configured). Use harness "native", or install the agent with ` + "`runnel agents install claude`" + ` and restart runnel.`},
		{"ACP alias", func(r *runnel.RunRequest) { r.Harness = "pi_agenta" },
			`Harness "pi_agenta" is not available: this runnel runs no ACP agents (its agents directory is not configured). Use harness "native", or install the agent with ` + "`runnel agents install pi`" + ` and restart runnel.`},
		{"unknown harness", func(r *runnel.RunRequest) { r.Harness = "robot" },
			`Unknown harness "robot"; the harnesses are native, claude, codex, gemini, opencode, pi, pi_core, pi_agenta.`},
		{"no messages", func(r *runnel.RunRequest) { r.Messages = nil },
			"No user message to send (prompt/messages empty)."},
		{"no user text", func(r *runnel.RunRequest) {
			r.Messages = []runnel.Message{{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: "hello"}}}, runnel.UserText(" ")}
		}, "No user message to send (prompt/messages empty)."},
		{"code tool", func(r *runnel.RunRequest) {
			r.CustomTools = []runnel.ToolSpec{{Name: "c", Kind: runnel.ToolKindCode, InputSchema: runnel.PermissiveSchema()}}
		}, "Code tools are not supported by the sidecar."},
		{"callback tool without toolCallback", func(r *runnel.RunRequest) {
			r.CustomTools = []runnel.ToolSpec{{Name: "t", InputSchema: runnel.PermissiveSchema()}}
		}, `Tool "t" is a callback tool, but the request has no toolCallback; set toolCallback.endpoint to the URL that executes callback tools.`},
		{"duplicate tool", func(r *runnel.RunRequest) {
			r.ToolCallback = callback
			r.CustomTools = []runnel.ToolSpec{{Name: "t", InputSchema: runnel.PermissiveSchema()}, {Name: "t", InputSchema: runnel.PermissiveSchema()}}
		}, `Tool name "t" is declared more than once in customTools; tool names must be unique.`},
		{"invalid tool name", func(r *runnel.RunRequest) {
			r.ToolCallback = callback
			r.CustomTools = []runnel.ToolSpec{{Name: "get.user", InputSchema: runnel.PermissiveSchema()}}
		}, `Tool name "get.user" is not valid: model APIs accept 1 to 64 letters, digits, '_' or '-' (^[a-zA-Z0-9_-]{1,64}$).`},
		{"client tool with bindings", func(r *runnel.RunRequest) {
			r.CustomTools = []runnel.ToolSpec{{Name: "connect", Kind: runnel.ToolKindClient, InputSchema: runnel.PermissiveSchema(),
				ContextBindings: map[string]string{"user": "$ctx.user.id"}}}
		}, `Tool "connect" is a client tool (the browser runs it); remove its contextBindings and call, which only apply to tools runnel executes.`},
		{"custom tool named like a granted builtin", func(r *runnel.RunRequest) {
			r.Tools = []string{"Read"}
			r.CustomTools = []runnel.ToolSpec{{Name: "read", Kind: runnel.ToolKindClient, InputSchema: runnel.PermissiveSchema()}}
		}, `Tool name "read" is both a custom tool and a granted builtin; rename the custom tool or remove "read" from tools.`},
		{"direct call with a bad method", func(r *runnel.RunRequest) {
			r.ToolCallback = callback
			r.CustomTools = []runnel.ToolSpec{{Name: "t", InputSchema: runnel.PermissiveSchema(), Call: &runnel.DirectCall{Method: "PATCH", Path: "/x"}}}
		}, `Tool "t" has call.method "PATCH"; use GET, POST, PUT or DELETE.`},
		{"unknown builtin", func(r *runnel.RunRequest) { r.Tools = []string{"read", "WebFetch"} },
			`Unknown builtin tool "WebFetch" in tools; the builtins are read, write, edit, ls, find, grep, bash.`},
		{"filesystem policy on local", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Filesystem: "readonly"}
		}, `Filesystem sandbox policy is not enforceable on the local sandbox; use sandbox "isolated", or remove sandboxPermission.filesystem.`},
		{"network off on local", func(r *runnel.RunRequest) {
			r.Sandbox = "local"
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}}
		}, `Network sandbox policy is not enforceable on the local sandbox (runnel runs on this host with no egress control); use sandbox "isolated", or remove sandboxPermission.network.`},
		{"network allowlist on local", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"10.0.0.0/8"}}}
		}, `Network sandbox policy is not enforceable on the local sandbox (runnel runs on this host with no egress control); use sandbox "isolated", or remove sandboxPermission.network.`},
		{"isolated sandbox", func(r *runnel.RunRequest) { r.Sandbox = "isolated" },
			`Sandbox "isolated" is not available on this host (the isolated sandbox was not probed); use sandbox "local" without sandboxPermission restrictions, or run runnel where bubblewrap and user namespaces work.`},
		{"unknown sandbox", func(r *runnel.RunRequest) { r.Sandbox = "docker" },
			`Unknown sandbox "docker"; use "local" or "isolated".`},
		{"unknown enforcement", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Enforcement: "lenient"}
		}, `Unknown sandboxPermission.enforcement "lenient"; use "strict" or "best_effort".`},
		{"absolute harness file", func(r *runnel.RunRequest) { r.HarnessFiles = []runnel.File{{Path: "/etc/passwd"}} },
			`The harnessFiles path "/etc/passwd" is absolute; paths must be relative to the workspace.`},
		{"escaping harness file", func(r *runnel.RunRequest) { r.HarnessFiles = []runnel.File{{Path: "a/../../x"}} },
			`The harnessFiles path "a/../../x" escapes the workspace; paths must stay inside it.`},
		{"escaping skill file", func(r *runnel.RunRequest) {
			r.Skills = []runnel.Skill{{Name: "notes", Files: []runnel.File{{Path: "../../.bashrc"}}}}
		}, `The skills[notes].files path "../../.bashrc" escapes the workspace; paths must stay inside it.`},
		{"skill name with a slash", func(r *runnel.RunRequest) { r.Skills = []runnel.Skill{{Name: "../up"}} },
			`Skill name "../up" is not a single directory name; skill names may not contain '/' or be '.' or '..'.`},
		{"plain skill file escaping", func(r *runnel.RunRequest) { r.Skills = []runnel.Skill{{File: runnel.File{Path: ".."}}} },
			`The skills path ".." escapes the workspace; paths must stay inside it.`},
		{"MCP servers", func(r *runnel.RunRequest) { r.McpServers = []runnel.McpServer{{Name: "memory"}} },
			`MCP server "memory" has no URL; set connection.url.`},
		{"code mode", func(r *runnel.RunRequest) { r.CodeMode = &runnel.CodeMode{Enabled: true} },
			"codeMode.enabled needs at least one MCP server in mcpServers: scripts call MCP tools; add a server or set codeMode.enabled to false."},
		{"negative limits", func(r *runnel.RunRequest) { r.Limits = &runnel.Limits{MaxSteps: -1} },
			"limits.maxSteps, limits.totalTimeoutMs and limits.idleTimeoutMs must not be negative."},
		{"no model", func(r *runnel.RunRequest) { r.Model = "" },
			`No model given: set "model" to "provider/model-id" (for example "openai/gpt-5" or "anthropic/claude-sonnet-4-5").`},
		{"unknown provider", func(r *runnel.RunRequest) { r.Model = "openai-codex/gpt-5.5" },
			`Provider "openai-codex" is not built in; set endpoint.baseUrl to its OpenAI-compatible API, or use one of the built-in providers: openai, openai-responses, anthropic.`},
		{"invalid provider name", func(r *runnel.RunRequest) { r.Model = "my provider/m" },
			`Provider "my provider" is not a valid provider name.`},
		{"empty model id", func(r *runnel.RunRequest) { r.Model = "openai/" },
			`Model "openai/" has no model id after the provider; use "provider/model-id".`},
		{"missing OpenAI key", func(r *runnel.RunRequest) { r.Secrets = nil },
			`No API key for provider "openai": set secrets.OPENAI_API_KEY.`},
		{"missing Anthropic key", func(r *runnel.RunRequest) { r.Model = "claude-sonnet-4-5" },
			`No API key for provider "anthropic": set secrets.ANTHROPIC_API_KEY.`},
		{"missing Responses key", func(r *runnel.RunRequest) { r.Model, r.Secrets = "gpt-5", nil; r.Provider = "openai-responses" },
			`No API key for provider "openai-responses": set secrets.OPENAI_API_KEY.`},
		{"modelConnection without the key", func(r *runnel.RunRequest) {
			r.ModelConnection = &runnel.ModelConnection{Provider: "openai", CredentialMode: "env"}
		}, `No API key for provider "openai": add a credential bound to the environment variable OPENAI_API_KEY to modelConnection.credentials.`},
		// The host's own environment is never read by accident: without
		// the setting there is no key, whatever runnel's environment holds.
		{"runtime_provided without provider keys", func(r *runnel.RunRequest) {
			r.ModelConnection = &runnel.ModelConnection{Provider: "anthropic", CredentialMode: "runtime_provided"}
			r.Model = "claude-sonnet-4-6"
		}, `The request asks runnel to provide the credential for provider "anthropic" (modelConnection.credentialMode "runtime_provided"), but this runnel has no provider keys: set RUNNEL_PROVIDER_KEYS_FILE on the server to a file of NAME=value lines (ANTHROPIC_API_KEY=…), or send the credential in modelConnection.credentials.`},
	}
	// runnel's own environment is never a source of keys.
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-runnels-own-environment")
	t.Setenv("OPENAI_API_KEY", "sk-from-runnels-own-environment")
	m := NewManager(&Options{NewModel: unreachable})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validRequest()
			tt.modify(req)
			rec := &recorder{}
			res, err := m.Run(context.Background(), req, rec)
			if err == nil {
				t.Fatalf("the request ran: %+v", res)
			}
			var re *runnel.Error
			if !errors.As(err, &re) || re.Code != runnel.CodeInvalidRequest {
				t.Errorf("err = %#v, want a *runnel.Error with code invalid_request", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("sentence (-want +got):\n%s", diff)
			}
			if len(rec.events) != 0 {
				t.Errorf("a refused request emitted %d events", len(rec.events))
			}
		})
	}
}

func TestResolveModel(t *testing.T) {
	tests := []struct {
		name string
		req  runnel.RunRequest
		want modelRef
	}{
		{"prefix", runnel.RunRequest{Model: "openai/gpt-5", Secrets: map[string]string{"OPENAI_API_KEY": "k"}},
			modelRef{provider: "openai", id: "gpt-5", api: APIOpenAIChat, cfg: provider.Config{APIKey: "k"}}},
		{"claude is inferred as anthropic", runnel.RunRequest{Model: "claude-sonnet-4-6", Secrets: map[string]string{"ANTHROPIC_API_KEY": "a"}},
			modelRef{provider: "anthropic", id: "claude-sonnet-4-6", api: APIAnthropic, cfg: provider.Config{APIKey: "a"}}},
		{"anything else is inferred as openai", runnel.RunRequest{Model: "gpt-5", Secrets: map[string]string{"openai_api_key": "k"}},
			modelRef{provider: "openai", id: "gpt-5", api: APIOpenAIChat, cfg: provider.Config{APIKey: "k"}}},
		{"provider field keeps slashes in the id", runnel.RunRequest{Model: "meta-llama/llama-3", Provider: "OpenRouter",
			Endpoint: &runnel.Endpoint{BaseURL: "https://openrouter.example/api/v1"}, Secrets: map[string]string{"OPENROUTER_API_KEY": "or"}},
			modelRef{provider: "openrouter", id: "meta-llama/llama-3", api: APIOpenAIChat,
				cfg: provider.Config{BaseURL: "https://openrouter.example/api/v1", APIKey: "or"}}},
		{"provider field and the same prefix", runnel.RunRequest{Model: "anthropic/claude-x", Provider: "anthropic", Secrets: map[string]string{"ANTHROPIC_API_KEY": "a"}},
			modelRef{provider: "anthropic", id: "claude-x", api: APIAnthropic, cfg: provider.Config{APIKey: "a"}}},
		{"responses", runnel.RunRequest{Model: "openai-responses/gpt-5", Secrets: map[string]string{"OPENAI_API_KEY": "k"},
			Endpoint: &runnel.Endpoint{APIVersion: "2025-01-01", Headers: map[string]string{"X-A": "1"}}},
			modelRef{provider: "openai-responses", id: "gpt-5", api: APIOpenAIResponses,
				cfg: provider.Config{APIKey: "k", APIVersion: "2025-01-01", Headers: map[string]string{"X-A": "1"}}}},
		{"compatible falls back to OPENAI_API_KEY", runnel.RunRequest{Model: "local-llm/qwen", Endpoint: &runnel.Endpoint{BaseURL: "http://127.0.0.1:11434/v1"},
			Secrets: map[string]string{"OPENAI_API_KEY": "k"}},
			modelRef{provider: "local-llm", id: "qwen", api: APIOpenAIChat, cfg: provider.Config{BaseURL: "http://127.0.0.1:11434/v1", APIKey: "k"}}},
		{"a custom endpoint needs no key", runnel.RunRequest{Model: "ollama/llama3", Endpoint: &runnel.Endpoint{BaseURL: "http://127.0.0.1:11434/v1"}},
			modelRef{provider: "ollama", id: "llama3", api: APIOpenAIChat, cfg: provider.Config{BaseURL: "http://127.0.0.1:11434/v1"}}},
		{"modelConnection, as Agenta v0.113 sends it", runnel.RunRequest{Model: "claude-sonnet-4-6", ModelConnection: &runnel.ModelConnection{
			Provider: "anthropic", Deployment: "direct", CredentialMode: "env",
			Credentials: []runnel.Credential{{Binding: runnel.CredentialBinding{Kind: "environment", Name: "ANTHROPIC_API_KEY"}, Value: "sk-ant", Usage: "opaque_http"}},
			Endpoint:    &runnel.Endpoint{BaseURL: "https://api.anthropic.com"}}},
			modelRef{provider: "anthropic", id: "claude-sonnet-4-6", api: APIAnthropic, cfg: provider.Config{BaseURL: "https://api.anthropic.com", APIKey: "sk-ant"}}},
		{"modelConnection wins over the top-level fields", runnel.RunRequest{Model: "gpt-5", Provider: "anthropic",
			Endpoint: &runnel.Endpoint{BaseURL: "https://old.example"}, Secrets: map[string]string{"OPENAI_API_KEY": "old"},
			ModelConnection: &runnel.ModelConnection{Provider: "openai", CredentialMode: "env",
				Credentials: []runnel.Credential{{Binding: runnel.CredentialBinding{Kind: "environment", Name: "OPENAI_API_KEY"}, Value: "new"},
					{Binding: runnel.CredentialBinding{Kind: "header", Name: "X-Gateway-Key"}, Value: "gw"}},
				Endpoint: &runnel.Endpoint{BaseURL: "https://gw.example/v1", APIVersion: "2025-01-01", Headers: map[string]string{"X-Team": "t"}}}},
			modelRef{provider: "openai", id: "gpt-5", api: APIOpenAIChat, cfg: provider.Config{BaseURL: "https://gw.example/v1", APIKey: "new",
				APIVersion: "2025-01-01", Headers: map[string]string{"X-Team": "t", "X-Gateway-Key": "gw"}}}},
		{"runtime_provided takes the operator's key", runnel.RunRequest{Model: "anthropic/claude-sonnet-4-6",
			ModelConnection: &runnel.ModelConnection{Provider: "anthropic", Deployment: "direct", CredentialMode: "runtime_provided", Credentials: []runnel.Credential{}}},
			modelRef{provider: "anthropic", id: "claude-sonnet-4-6", api: APIAnthropic, cfg: provider.Config{APIKey: "operator-ant"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := map[string]string{"ANTHROPIC_API_KEY": "operator-ant"}
			got, err := resolveModel(&tt.req, connectionOf(&tt.req), keys)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(modelRef{})); diff != "" {
				t.Errorf("resolveModel (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	m := NewManager(&Options{MaxSteps: 10})
	tests := []struct {
		name       string
		limits     *runnel.Limits
		wantSteps  int
		wantTotal  string
		wantIdleMs int64
	}{
		{"server defaults", nil, 10, "10m0s", 120000},
		{"request lowers", &runnel.Limits{MaxSteps: 3, TotalTimeoutMs: 5000, IdleTimeoutMs: 1000}, 3, "5s", 1000},
		{"request cannot raise", &runnel.Limits{MaxSteps: 99, TotalTimeoutMs: 3_600_000, IdleTimeoutMs: 999_999}, 10, "10m0s", 120000},
		// Near 2^63 ms a Duration overflows; the old code then ended the
		// run at once, or switched the idle timeout off.
		{"request near the int64 limit cannot overflow", &runnel.Limits{TotalTimeoutMs: math.MaxInt64, IdleTimeoutMs: math.MaxInt64 / 1000}, 10, "10m0s", 120000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validRequest()
			req.Limits = tt.limits
			p, err := m.plan(req, "")
			if err != nil {
				t.Fatal(err)
			}
			got := []any{p.maxSteps, p.total.String(), p.idle.Milliseconds()}
			if diff := cmp.Diff([]any{tt.wantSteps, tt.wantTotal, tt.wantIdleMs}, got); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGoldenRequests runs the platform's real requests: they decode, and
// each is refused with a sentence naming what to change, never a crash.
// Fixing each named problem in turn leads to a request that plans and
// offers the model every custom tool.
func TestGoldenRequests(t *testing.T) {
	acp := func(h string) string {
		return `Harness "` + h + `" is not available: this runnel runs no ACP agents (its agents directory is not configured). Use harness "native", or install the agent with ` + "`runnel agents install " + agents.Canonical(h) + "`" + ` and restart runnel.`
	}
	type fix struct {
		want  string // the refusal before the fix; "" when the request plans
		apply func(r *runnel.RunRequest)
	}
	native := func(r *runnel.RunRequest) { r.Harness = "native" }
	tests := []struct {
		file  string
		fixes []fix
	}{
		{"run_request.pi_core.json", []fix{
			{acp("pi_core"), native},
			{`Network sandbox policy is not enforceable on the local sandbox (runnel runs on this host with no egress control); use sandbox "isolated", or remove sandboxPermission.network.`,
				func(r *runnel.RunRequest) { r.SandboxPermission = nil }},
			{`Provider "openai-codex" is not built in; set endpoint.baseUrl to its OpenAI-compatible API, or use one of the built-in providers: openai, openai-responses, anthropic.`,
				func(r *runnel.RunRequest) { r.Model = "openai/gpt-5.5" }},
			{"", nil},
		}},
		{"run_request.claude.json", []fix{
			{acp("claude"), native},
			{"", nil},
		}},
	}
	m := NewManager(&Options{NewModel: unreachable})
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := conformance.Read("agenta/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var req runnel.RunRequest
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, f := range tt.fixes {
				if f.want != "" {
					rec := &recorder{}
					_, err := m.Run(context.Background(), &req, rec)
					if diff := cmp.Diff(f.want, errText(err)); diff != "" {
						t.Fatalf("refusal (-want +got):\n%s", diff)
					}
					f.apply(&req)
					continue
				}
				p, err := m.plan(&req, "")
				if err != nil {
					t.Fatalf("the fixed request does not plan: %v", err)
				}
				var names, want []string
				for _, tool := range p.advert {
					names = append(names, tool.Name)
				}
				for _, s := range req.CustomTools {
					want = append(want, s.Name)
				}
				if diff := cmp.Diff(want, names); diff != "" {
					t.Errorf("advertised tools (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
