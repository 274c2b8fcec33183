package main

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel/internal/sandbox"
)

func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// loadServe resolves the serve command's configuration.
func loadServe(args []string, env map[string]string) (*Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := newConfig(fs, mapEnv(env), "listen", "run", "log")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c.load()
}

func defaults() Config {
	return Config{Host: "127.0.0.1", Port: 8765, ConcurrencyLimit: 64, MaxBodyBytes: 8 << 20, MaxSteps: 50,
		RunTimeout: 10 * time.Minute, IdleTimeout: 2 * time.Minute, FirstTokenTimeout: 2 * time.Minute,
		ToolTimeout: 30 * time.Second, MCPCallTimeout: 2 * time.Minute, ShutdownGrace: 30 * time.Second, LogLevel: slog.LevelInfo, LogFormat: "json",
		Containment: "auto", InteractionTTL: 24 * time.Hour, MaxStepBytes: 8 << 20, MaxRunBytes: 32 << 20,
		WriteTimeout: 30 * time.Second, SandboxLimits: sandbox.Limits{Processes: 1024, Memory: 4 << 30, CPU: 10 * time.Minute}}
}

func TestConfig(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  file-token-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte("# provider keys\nANTHROPIC_API_KEY = sk-ant-1234\n\nOPENAI_API_KEY=sk-oa=5678\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badKeysFile := filepath.Join(t.TempDir(), "bad-keys")
	if err := os.WriteFile(badKeysFile, []byte("ANTHROPIC_API_KEY=sk-ant-1234\nsk-oa-secret-without-a-name\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	with := func(f func(*Config)) *Config {
		c := defaults()
		f(&c)
		return &c
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want *Config
		err  string
	}{
		{name: "defaults", want: with(func(*Config) {})},
		{name: "every variable", env: map[string]string{
			"RUNNEL_HOST": "0.0.0.0", "RUNNEL_PORT": "9000", "RUNNEL_TOKEN": "env-token-1234", "RUNNEL_CONCURRENCY_LIMIT": "5",
			"RUNNEL_MAX_BODY_BYTES": "16MiB", "RUNNEL_MAX_STEPS": "7", "RUNNEL_RUN_TIMEOUT": "1h", "RUNNEL_IDLE_TIMEOUT": "45s",
			"RUNNEL_FIRST_TOKEN_TIMEOUT": "20s", "RUNNEL_TOOL_TIMEOUT": "1m30s", "RUNNEL_MCP_CALL_TIMEOUT": "45s", "RUNNEL_SHUTDOWN_GRACE": "5s",
			"RUNNEL_SHUTDOWN_DELAY": "3s",
			"RUNNEL_LOG_LEVEL":      "DEBUG", "RUNNEL_LOG_FORMAT": "text", "RUNNEL_CONTAINMENT": "Subreaper",
			"RUNNEL_CGROUP_PARENT": "/sys/fs/cgroup/runnel", "RUNNEL_INTERACTION_TTL": "2h",
			"RUNNEL_SANDBOX_PROCESSES": "0", "RUNNEL_SANDBOX_MEMORY": "512MiB", "RUNNEL_SANDBOX_CPU": "0"},
			want: &Config{Host: "0.0.0.0", Port: 9000, Token: "env-token-1234", ConcurrencyLimit: 5, MaxBodyBytes: 16 << 20,
				MaxSteps: 7, RunTimeout: time.Hour, IdleTimeout: 45 * time.Second, FirstTokenTimeout: 20 * time.Second,
				ToolTimeout: 90 * time.Second, MCPCallTimeout: 45 * time.Second, ShutdownGrace: 5 * time.Second, ShutdownDelay: 3 * time.Second, LogLevel: slog.LevelDebug, LogFormat: "text",
				Containment: "subreaper", CgroupParent: "/sys/fs/cgroup/runnel", InteractionTTL: 2 * time.Hour,
				MaxStepBytes: 8 << 20, MaxRunBytes: 32 << 20, WriteTimeout: 30 * time.Second,
				SandboxLimits: sandbox.Limits{Memory: 512 << 20}}},
		{name: "a flag wins over its variable", args: []string{"--port", "0", "--log-level", "warn"},
			env:  map[string]string{"RUNNEL_PORT": "9000", "RUNNEL_LOG_LEVEL": "debug"},
			want: with(func(c *Config) { c.Port, c.LogLevel = 0, slog.LevelWarn })},
		{name: "an empty variable is unset", env: map[string]string{"RUNNEL_PORT": ""}, want: with(func(*Config) {})},
		{name: "body size in bytes", env: map[string]string{"RUNNEL_MAX_BODY_BYTES": "1000"},
			want: with(func(c *Config) { c.MaxBodyBytes = 1000 })},
		{name: "workspaces and signing", env: map[string]string{"RUNNEL_WORKSPACE_ROOT": "/srv/runnel", "RUNNEL_KEEP_WORKSPACES": "true",
			"RUNNEL_INTERACTION_SECRET": "0123456789abcdef0123"},
			want: with(func(c *Config) {
				c.WorkspaceRoot, c.KeepWorkspaces, c.InteractionSecret = "/srv/runnel", true, "0123456789abcdef0123"
			})},
		{name: "mcp allowlist", env: map[string]string{"RUNNEL_MCP_HOST_ALLOWLIST": "127.0.0.1, mcp.internal:8443"},
			want: with(func(c *Config) { c.MCPHostAllowlist = []string{"127.0.0.1", "mcp.internal:8443"} })},
		{name: "bad boolean", env: map[string]string{"RUNNEL_KEEP_WORKSPACES": "sometimes"},
			err: `RUNNEL_KEEP_WORKSPACES="sometimes" is not a boolean; use true or false`},
		{name: "short interaction secret", env: map[string]string{"RUNNEL_INTERACTION_SECRET": "short"},
			err: "RUNNEL_INTERACTION_SECRET is shorter than 16 characters; generate one with: openssl rand -hex 32"},
		{name: "token file", args: []string{"--token-file", tokenFile}, want: with(func(c *Config) { c.Token = "file-token-1234" })},
		{name: "bad number", env: map[string]string{"RUNNEL_PORT": "http"},
			err: `RUNNEL_PORT="http" is not a whole number from 0 to 65535`},
		{name: "port out of range", env: map[string]string{"RUNNEL_PORT": "70000"},
			err: `RUNNEL_PORT="70000" is not a whole number from 0 to 65535`},
		{name: "bad flag value names the flag", args: []string{"--concurrency-limit", "0"},
			err: `--concurrency-limit="0" is not a whole number from 1 to 1048576`},
		{name: "negative duration", env: map[string]string{"RUNNEL_RUN_TIMEOUT": "-5s"},
			err: `RUNNEL_RUN_TIMEOUT="-5s" must be a positive duration such as 30s`},
		{name: "zero duration", env: map[string]string{"RUNNEL_SHUTDOWN_GRACE": "0s"},
			err: `RUNNEL_SHUTDOWN_GRACE="0s" must be a positive duration such as 30s`},
		{name: "a delay may be off", env: map[string]string{"RUNNEL_SHUTDOWN_DELAY": "0"},
			want: with(func(*Config) {})},
		{name: "negative delay", env: map[string]string{"RUNNEL_SHUTDOWN_DELAY": "-1s"},
			err: `RUNNEL_SHUTDOWN_DELAY="-1s" must be 0 (off) or a positive duration such as 5s`},
		{name: "duration without unit", env: map[string]string{"RUNNEL_TOOL_TIMEOUT": "30"},
			err: `RUNNEL_TOOL_TIMEOUT="30" is not a duration; use a Go duration such as 30s, 5m or 1h30m`},
		{name: "bad size", env: map[string]string{"RUNNEL_MAX_BODY_BYTES": "1.5MiB"},
			err: `RUNNEL_MAX_BODY_BYTES="1.5MiB" is not a size; use a positive number of bytes, optionally with a KiB, MiB or GiB suffix (8MiB)`},
		{name: "unknown log level", env: map[string]string{"RUNNEL_LOG_LEVEL": "verbose"},
			err: `RUNNEL_LOG_LEVEL="verbose" is not a log level; use debug, info, warn or error`},
		{name: "unknown log format", env: map[string]string{"RUNNEL_LOG_FORMAT": "xml"},
			err: `RUNNEL_LOG_FORMAT="xml" is not a log format; use json or text`},
		{name: "every problem at once", env: map[string]string{"RUNNEL_MAX_STEPS": "many", "RUNNEL_IDLE_TIMEOUT": "soon"},
			err: `RUNNEL_MAX_STEPS="many" is not a whole number from 1 to 1048576` + "\n" +
				`RUNNEL_IDLE_TIMEOUT="soon" is not a duration; use a Go duration such as 30s, 5m or 1h30m`},
		{name: "token and token file", args: []string{"--token-file", tokenFile}, env: map[string]string{"RUNNEL_TOKEN": "x-token-1234"},
			err: "both RUNNEL_TOKEN and a token file are set; set only one"},
		// A token of spaces trims to nothing: it must never read as "no
		// token" (no authentication) nor as a token a blank header matches.
		{name: "a token of Unicode spaces", env: map[string]string{"RUNNEL_TOKEN": "\u00a0\u2003"},
			err: "RUNNEL_TOKEN is set but blank; set a token without spaces (generate one with: openssl rand -hex 32) or unset it"},
		{name: "a token with a space inside", env: map[string]string{"RUNNEL_TOKEN": "abc def-1234"},
			err: "RUNNEL_TOKEN holds a space or a control character, which no Authorization header can carry; generate one with: openssl rand -hex 32"},
		{name: "unknown containment", env: map[string]string{"RUNNEL_CONTAINMENT": "chroot"},
			err: `RUNNEL_CONTAINMENT="chroot" is not a containment; use auto, cgroup, subreaper or process-group`},
		{name: "provider keys", env: map[string]string{"RUNNEL_PROVIDER_KEYS_FILE": keysFile},
			want: with(func(c *Config) {
				c.ProviderKeys = map[string]string{"ANTHROPIC_API_KEY": "sk-ant-1234", "OPENAI_API_KEY": "sk-oa=5678"}
			})},
		// The line is named by its number, never shown: it may hold a key.
		{name: "a provider keys line without a name", env: map[string]string{"RUNNEL_PROVIDER_KEYS_FILE": badKeysFile},
			err: badKeysFile + " line 2 is not NAME=value"},
		{name: "empty token file", env: map[string]string{"RUNNEL_TOKEN_FILE": emptyFile},
			err: "the token file " + emptyFile + " is empty"},
		{name: "missing token file", env: map[string]string{"RUNNEL_TOKEN_FILE": "/nonexistent/token"},
			err: "reading the token file: open /nonexistent/token: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadServe(tt.args, tt.env)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListenCheck(t *testing.T) {
	tests := []struct {
		host, token string
		err         string
	}{
		{host: "127.0.0.1"},
		{host: "127.0.0.2"},
		{host: "::1"},
		{host: "[::1]"},
		{host: "localhost"},
		{host: "0.0.0.0", token: "t0ken-abcdef"},
		{host: "0.0.0.0", err: "refusing to listen on 0.0.0.0:8765 without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)"},
		{host: "", err: "refusing to listen on :8765 without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)"},
		{host: "::", err: "refusing to listen on [::]:8765 without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)"},
		{host: "10.1.2.3", err: "refusing to listen on 10.1.2.3:8765 without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)"},
		{host: "runnel.internal", err: "refusing to listen on runnel.internal:8765 without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)"},
	}
	for _, tt := range tests {
		err := (&Config{Host: tt.host, Port: 8765, Token: tt.token}).listenCheck()
		if got := errString(err); got != tt.err {
			t.Errorf("host %q token %v: %q, want %q", tt.host, tt.token != "", got, tt.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestLoggerRedactsTheToken(t *testing.T) {
	var b strings.Builder
	cfg := defaults()
	cfg.Token = "very-secret-token-value"
	cfg.logger(&b).Info("oops", "header", "Bearer very-secret-token-value")
	if strings.Contains(b.String(), "very-secret-token-value") {
		t.Errorf("the token reached the log: %s", b.String())
	}
}

// RUNNEL_HARNESS_<NAME>_COMMAND is split into words as a shell splits
// plain words and quoted strings, and an unclosed quote is an error, not a
// guess.
func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{`node /opt/agent/index.js`, []string{"node", "/opt/agent/index.js"}, false},
		{`  node   "/opt/my agent/i.js" --flag='a b' `, []string{"node", "/opt/my agent/i.js", "--flag=a b"}, false},
		{`""`, []string{""}, false},
		{`node "unclosed`, nil, true},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if (err != nil) != tt.err || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitWords(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}
