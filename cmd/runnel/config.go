package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/harness/acp"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/redact"
	"github.com/runnel/runnel/internal/run"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/server"
)

// Config is everything runnel reads from flags and RUNNEL_* variables. It
// is read once, in Main, validated as a whole, and passed down as options.
type Config struct {
	Host             string
	Port             int
	Token            string // never logged
	ConcurrencyLimit int
	MaxBodyBytes     int64
	MaxSteps         int
	// SandboxLimits bound each isolated command or agent.
	SandboxLimits sandbox.Limits
	// AllowLocalSandbox is RUNNEL_ALLOW_LOCAL_SANDBOX; nil is auto: local
	// only where the host cannot isolate.
	AllowLocalSandbox *bool
	MaxStepBytes      int64
	MaxRunBytes       int64
	RunTimeout        time.Duration
	IdleTimeout       time.Duration
	FirstTokenTimeout time.Duration
	ToolTimeout       time.Duration
	MCPCallTimeout    time.Duration
	ShutdownGrace     time.Duration
	ShutdownDelay     time.Duration
	WriteTimeout      time.Duration
	WorkspaceRoot     string
	KeepWorkspaces    bool
	MCPHostAllowlist  []string
	// MCPRequired fails a run whose MCP server cannot be reached.
	MCPRequired bool
	// AttachmentsURL fetches attachments stored by the platform.
	AttachmentsURL string
	// Containment is how the processes of runs are ended: auto, cgroup,
	// subreaper or process-group; CgroupParent where cgroups are made.
	Containment  string
	CgroupParent string
	// InteractionTTL is how long a signed approval stays valid.
	InteractionTTL time.Duration
	// ProviderKeys are the operator's provider keys (RUNNEL_PROVIDER_KEYS_FILE),
	// for requests whose credentials the host provides; never logged.
	ProviderKeys map[string]string
	// Profiles are the run profiles of RUNNEL_PROFILES_FILE, and
	// ProfileSecrets the keys they reference; never logged.
	Profiles       []server.Profile
	ProfileSecrets []string
	// InteractionSecret signs interactions (RUNNEL_INTERACTION_SECRET, no
	// flag so it never shows in ps); never logged.
	InteractionSecret string
	// AgentsDir is where ACP agents are installed; HarnessCommands
	// override an agent's command line (RUNNEL_HARNESS_<NAME>_COMMAND).
	AgentsDir         string
	HarnessCommands   map[string][]string
	AgentStartTimeout time.Duration
	LogLevel          slog.Level
	LogFormat         string // json or text
	// MetricsAddr is a separate listener for /metrics, without a token;
	// empty is none.
	MetricsAddr string
	// OTLPEndpoint and OTLPHeaders are the operator's trace export; the
	// headers are never logged.
	OTLPEndpoint string
	OTLPHeaders  map[string]string
}

// A setting is one configuration value: a flag, the variable behind it and
// its default. A set flag wins over the variable; an empty variable counts
// as unset.
type setting struct {
	flag, env, def, usage string
	arg                   string // what the value is, for -h
}

// settings lists every setting; the group says which subcommands take it.
func settings() []struct {
	group string
	setting
} {
	type s = setting
	return []struct {
		group string
		setting
	}{
		{"listen", s{"host", "RUNNEL_HOST", "127.0.0.1", "address to listen on; a non-loopback address requires a token", "host"}},
		{"listen", s{"port", "RUNNEL_PORT", "8765", "port to listen on (0 picks a free one)", "port"}},
		{"listen", s{"token-file", "RUNNEL_TOKEN_FILE", "", "file holding the bearer token (or set RUNNEL_TOKEN)", "file"}},
		{"listen", s{"concurrency-limit", "RUNNEL_CONCURRENCY_LIMIT", "64", "concurrent runs before answering 429", "number"}},
		{"listen", s{"shutdown-grace", "RUNNEL_SHUTDOWN_GRACE", "30s", "how long in-flight runs may finish after SIGTERM", "duration"}},
		{"listen", s{"shutdown-delay", "RUNNEL_SHUTDOWN_DELAY", "0s", "how long to go on accepting after SIGTERM, /health answering 503, so a load balancer's checks take the replica out before it stops accepting (set it past their detection time where nothing else, like a Kubernetes preStop pause, does)", "duration"}},
		{"listen", s{"profiles-file", "RUNNEL_PROFILES_FILE", "", "JSON file of run profiles a POST /v1/chat request may name (model, endpoint, key references, tools, callback, permissions), so a browser never holds a key", "file"}},
		{"listen", s{"write-timeout", "RUNNEL_WRITE_TIMEOUT", "30s", "longest a write to a client may block; a client that stops reading is treated as gone", "duration"}},
		{"listen", s{"metrics-addr", "RUNNEL_METRICS_ADDR", "", "host:port of a separate listener serving GET /metrics without a token (for a scraper); /metrics on the main listener always needs the token", "addr"}},
		{"listen", s{"otlp-endpoint", "RUNNEL_OTLP_ENDPOINT", "", "OTLP/HTTP traces URL every run's spans are exported to (a run's own telemetry target gets its spans too)", "url"}},
		{"listen", s{"otlp-headers", "RUNNEL_OTLP_HEADERS", "", "comma-separated name=value headers of the OTLP export (its credential; never logged)", "headers"}},
		{"run", s{"max-body-bytes", "RUNNEL_MAX_BODY_BYTES", "8MiB", "largest request body (bytes, or with a KiB/MiB/GiB suffix)", "size"}},
		{"run", s{"max-steps", "RUNNEL_MAX_STEPS", "50", "model steps per run", "number"}},
		{"run", s{"max-step-bytes", "RUNNEL_MAX_STEP_BYTES", "8MiB", "most a model may stream in one step (text, reasoning, tool arguments)", "size"}},
		{"run", s{"max-run-bytes", "RUNNEL_MAX_RUN_BYTES", "32MiB", "most a model may stream over a whole run", "size"}},
		{"run", s{"run-timeout", "RUNNEL_RUN_TIMEOUT", "10m", "deadline of a whole run", "duration"}},
		{"run", s{"idle-timeout", "RUNNEL_IDLE_TIMEOUT", "2m", "longest silence from the model within a step", "duration"}},
		{"run", s{"first-token-timeout", "RUNNEL_FIRST_TOKEN_TIMEOUT", "2m", "longest wait for a step's first chunk", "duration"}},
		{"run", s{"tool-timeout", "RUNNEL_TOOL_TIMEOUT", "30s", "timeout of a callback tool whose spec sets none", "duration"}},
		{"run", s{"mcp-call-timeout", "RUNNEL_MCP_CALL_TIMEOUT", "2m", "timeout of one MCP tool call; past it the call is cancelled and the model told which tool failed", "duration"}},
		{"run", s{"workspace-root", "RUNNEL_WORKSPACE_ROOT", "", "directory under which each run gets its workspace (default: a private dir under the system temp dir)", "dir"}},
		{"run", s{"mcp-host-allowlist", "RUNNEL_MCP_HOST_ALLOWLIST", "", "comma-separated MCP hosts (host or host:port) exempt from the https-and-public-address rule", "hosts"}},
		{"run", s{"attachments-url", "RUNNEL_ATTACHMENTS_URL", "", "where attachment blocks that carry only an id are fetched: a URL with {id} and {sessionId}", "url"}},
		{"run", s{"mcp-required", "RUNNEL_MCP_REQUIRED", "false", "fail a run when one of its MCP servers cannot be reached (else a notice, and the model goes on without its tools)", "bool"}},
		{"run", s{"keep-workspaces", "RUNNEL_KEEP_WORKSPACES", "false", "keep each run's workspace after the run instead of removing it", "bool"}},
		{"run", s{"containment", "RUNNEL_CONTAINMENT", "auto", "how every process a run starts is ended: auto (the strongest this host allows), cgroup, subreaper or process-group", "mechanism"}},
		{"run", s{"cgroup-parent", "RUNNEL_CGROUP_PARENT", "", "cgroup v2 directory under which runnel makes a cgroup per command (default: runnel's own cgroup)", "dir"}},
		{"run", s{"allow-local-sandbox", "RUNNEL_ALLOW_LOCAL_SANDBOX", "auto", "let a request that asks for sandbox \"local\" have it: auto (only where the isolated sandbox is unavailable), true, or false (start-up fails where it is unavailable)", "auto|bool"}},
		{"run", s{"sandbox-processes", "RUNNEL_SANDBOX_PROCESSES", "1024", "processes and threads an isolated command or agent may have at once (0: no bound)", "number"}},
		{"run", s{"sandbox-memory", "RUNNEL_SANDBOX_MEMORY", "4GiB", "memory an isolated command or agent may use, all its processes together (0: no bound)", "size"}},
		{"run", s{"sandbox-cpu", "RUNNEL_SANDBOX_CPU", "10m", "processor time each process of an isolated command or agent may use (0: no bound)", "duration"}},
		{"run", s{"interaction-ttl", "RUNNEL_INTERACTION_TTL", "24h", "how long a signed approval stays valid after runnel asked", "duration"}},
		{"run", s{"provider-keys-file", "RUNNEL_PROVIDER_KEYS_FILE", "", "file of NAME=value lines (ANTHROPIC_API_KEY=…) for requests whose modelConnection.credentialMode is runtime_provided", "file"}},
		{"agents", s{"agents-dir", "RUNNEL_AGENTS_DIR", "", "directory the ACP agents are installed in by `runnel agents install` (default ~/.local/share/runnel/agents)", "dir"}},
		{"agents", s{"agent-start-timeout", "RUNNEL_AGENT_START_TIMEOUT", "60s", "longest an ACP agent may take to answer initialize, and to open its session", "duration"}},
		{"log", s{"log-level", "RUNNEL_LOG_LEVEL", "info", "debug, info, warn or error", "level"}},
		{"log", s{"log-format", "RUNNEL_LOG_FORMAT", "json", "json or text", "format"}},
	}
}

// config binds the settings of some groups to a flag set and resolves them
// after parsing.
type config struct {
	fs     *flag.FlagSet
	getenv func(string) string
	groups map[string]bool
	byFlag map[string]setting
	vals   map[string]*string
	errs   []error
}

func newConfig(fs *flag.FlagSet, getenv func(string) string, groups ...string) *config {
	c := &config{fs: fs, getenv: getenv, groups: map[string]bool{},
		byFlag: map[string]setting{}, vals: map[string]*string{}}
	for _, g := range groups {
		c.groups[g] = true
	}
	for _, s := range settings() {
		if c.groups[s.group] {
			c.byFlag[s.flag] = s.setting
			c.vals[s.flag] = fs.String(s.flag, "", fmt.Sprintf("%s (a `%s`; env %s, default %q)", s.usage, s.arg, s.env, s.def))
		}
	}
	return c
}

// raw returns a setting's text and the name to blame for a bad value.
func (c *config) raw(name string) (val, from string) {
	s := c.byFlag[name]
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if set {
		return *c.vals[name], "--" + name
	}
	if v := c.getenv(s.env); v != "" {
		return v, s.env
	}
	return s.def, s.env
}

func (c *config) fail(from, val, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s=%q %s", from, val, fmt.Sprintf(format, args...)))
}

func (c *config) str(name string) string {
	v, _ := c.raw(name)
	return strings.TrimSpace(v)
}

// int reads a whole number in [lo, hi].
func (c *config) int(name string, lo, hi int64) int64 {
	v, from := c.raw(name)
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		c.fail(from, v, "is not a whole number from %d to %d", lo, hi)
		return 0
	}
	return n
}

// bytes reads a positive size: 1048576, 512KiB, 8MiB, 1GiB.
func (c *config) bytes(name string) int64 {
	v, from := c.raw(name)
	s, mult := strings.TrimSpace(v), int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if t, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = strings.TrimSpace(t), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		c.fail(from, v, "is not a size; use a positive number of bytes, optionally with a KiB, MiB or GiB suffix (8MiB)")
		return 0
	}
	return n * mult
}

// zero reports a setting given as 0: no bound, where the setting allows
// it.
func (c *config) zero(name string) bool {
	v, _ := c.raw(name)
	return strings.TrimSpace(v) == "0"
}

// duration reads a positive Go duration. Zero is refused rather than
// taken as "no limit" or "default": either reading would surprise someone.
func (c *config) duration(name string) time.Duration {
	v, from := c.raw(name)
	d, err := c.parseDuration(from, v)
	if err == nil && d <= 0 {
		c.fail(from, v, "must be a positive duration such as 30s")
	}
	return d
}

// optionalDuration is duration where 0 turns the setting off.
func (c *config) optionalDuration(name string) time.Duration {
	v, from := c.raw(name)
	d, err := c.parseDuration(from, v)
	if err == nil && d < 0 {
		c.fail(from, v, "must be 0 (off) or a positive duration such as 5s")
	}
	return d
}

func (c *config) parseDuration(from, v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		c.fail(from, v, "is not a duration; use a Go duration such as 30s, 5m or 1h30m")
	}
	return d, err
}

// bool reads true/false (also 1/0, yes/no).
func (c *config) bool(name string) bool {
	v, from := c.raw(name)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	case "false", "0", "no":
		return false
	}
	c.fail(from, v, "is not a boolean; use true or false")
	return false
}

func (c *config) logLevel() slog.Level {
	v, from := c.raw("log-level")
	var l slog.Level
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		c.fail(from, v, "is not a log level; use debug, info, warn or error")
	}
	return l
}

func (c *config) logFormat() string {
	v, from := c.raw("log-format")
	f := strings.ToLower(strings.TrimSpace(v))
	if f != "json" && f != "text" {
		c.fail(from, v, "is not a log format; use json or text")
	}
	return f
}

// token reads RUNNEL_TOKEN or the token file; both at once is an error, as
// one of them would be silently ignored.
func (c *config) token() string {
	raw := c.getenv("RUNNEL_TOKEN")
	tok := strings.TrimSpace(raw)
	path := c.str("token-file")
	switch {
	case raw != "" && tok == "":
		c.errs = append(c.errs, errors.New("RUNNEL_TOKEN is set but blank; set a token without spaces (generate one with: openssl rand -hex 32) or unset it"))
		return ""
	case strings.IndexFunc(tok, badTokenRune) >= 0:
		c.errs = append(c.errs, errors.New("RUNNEL_TOKEN holds a space or a control character, which no Authorization header can carry; generate one with: openssl rand -hex 32"))
		return ""
	case path == "":
		return tok
	case tok != "":
		c.errs = append(c.errs, errors.New("both RUNNEL_TOKEN and a token file are set; set only one"))
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("reading the token file: %w", err))
		return ""
	}
	if tok = strings.TrimSpace(string(data)); tok == "" {
		c.errs = append(c.errs, fmt.Errorf("the token file %s is empty", path))
	} else if strings.IndexFunc(tok, badTokenRune) >= 0 {
		c.errs = append(c.errs, fmt.Errorf("the token in %s holds a space or a control character, which no Authorization header can carry", path))
		return ""
	}
	return tok
}

// attachmentsURL reads the attachments endpoint: an absolute http(s) URL
// that names the attachment by {id}.
func (c *config) attachmentsURL() string {
	v, from := c.raw("attachments-url")
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	u, err := url.Parse(strings.NewReplacer("{id}", "x", "{sessionId}", "x").Replace(v))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(v, "{id}") {
		c.fail(from, v, "is not an attachments URL; give an absolute http(s) URL with {id} (and optionally {sessionId}) in it")
		return ""
	}
	return v
}

// providerKeys reads the provider keys file: one NAME=value a line, blank
// lines and lines starting with # skipped. A bad line fails start-up with
// its number, never its text (it may hold a key).
// metricsAddr reads metrics-addr: empty, or a host:port to listen on.
func (c *config) metricsAddr() string {
	v, from := c.raw("metrics-addr")
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		c.fail(from, v, "is not a host:port to listen on (\":9090\" listens on every address)")
	}
	return v
}

// otlp reads the operator's trace export: an http(s) URL and its headers.
func (c *config) otlp() (string, map[string]string) {
	endpoint, from := c.raw("otlp-endpoint")
	endpoint = strings.TrimSpace(endpoint)
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.fail(from, endpoint, "is not an http or https URL of an OTLP/HTTP collector (e.g. http://collector:4318/v1/traces)")
		}
	}
	raw, hfrom := c.raw("otlp-headers")
	if strings.TrimSpace(raw) == "" {
		return endpoint, nil
	}
	headers := map[string]string{}
	for _, pair := range strings.Split(raw, ",") {
		name, value, ok := strings.Cut(pair, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" || strings.ContainsAny(name, " \t:") {
			// The value is a credential: the message names the setting only.
			c.errs = append(c.errs, fmt.Errorf("%s is not a comma-separated list of name=value headers", hfrom))
			return endpoint, nil
		}
		headers[name] = value
	}
	return endpoint, headers
}

func (c *config) providerKeys() map[string]string {
	path := c.str("provider-keys-file")
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("reading the provider keys file: %w", err))
		return nil
	}
	keys := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" || strings.ContainsAny(name, " \t") {
			c.errs = append(c.errs, fmt.Errorf("%s line %d is not NAME=value", path, i+1))
			continue
		}
		keys[name] = value
	}
	if len(keys) == 0 {
		c.errs = append(c.errs, fmt.Errorf("the provider keys file %s holds no NAME=value line", path))
	}
	return keys
}

// badTokenRune is a rune a bearer token cannot hold (RFC 6750's b64token
// has none of them, and a header would fold or trim them).
// harnessCommands reads RUNNEL_HARNESS_<NAME>_COMMAND for every agent.
func (c *config) harnessCommands() map[string][]string {
	out := map[string][]string{}
	for _, name := range agents.Harnesses() {
		if agents.Canonical(name) != name {
			continue // an alias: the agent's own name is the setting
		}
		env := "RUNNEL_HARNESS_" + strings.ToUpper(name) + "_COMMAND"
		v := c.getenv(env)
		if strings.TrimSpace(v) == "" {
			continue
		}
		words, err := splitWords(v)
		if err != nil {
			c.fail(env, v, "is not a command line: %v", err)
			continue
		}
		out[name] = words
	}
	return out
}

// splitWords splits a command line into words as a shell would for plain
// words and quoted strings (no expansion): `node "/opt/my agent/i.js"`.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func badTokenRune(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// load resolves the bound settings into a Config, reporting every bad
// value at once.
func (c *config) load() (*Config, error) {
	cfg := &Config{}
	if c.groups["listen"] {
		cfg.Host = strings.Trim(c.str("host"), "[]") // "[::1]" as people write it in URLs
		cfg.Port = int(c.int("port", 0, 65535))
		cfg.Token = c.token()
		cfg.ConcurrencyLimit = int(c.int("concurrency-limit", 1, 1<<20))
		cfg.ShutdownGrace = c.duration("shutdown-grace")
		cfg.ShutdownDelay = c.optionalDuration("shutdown-delay")
		cfg.WriteTimeout = c.duration("write-timeout")
		cfg.MetricsAddr = c.metricsAddr()
		cfg.OTLPEndpoint, cfg.OTLPHeaders = c.otlp()
		var err error
		if cfg.Profiles, cfg.ProfileSecrets, err = loadProfiles(c.str("profiles-file"), c.getenv); err != nil {
			c.errs = append(c.errs, err)
		}
	}
	if c.groups["run"] {
		cfg.MaxBodyBytes = c.bytes("max-body-bytes")
		cfg.MaxSteps = int(c.int("max-steps", 1, 1<<20))
		cfg.MaxStepBytes = c.bytes("max-step-bytes")
		cfg.MaxRunBytes = c.bytes("max-run-bytes")
		cfg.RunTimeout = c.duration("run-timeout")
		cfg.IdleTimeout = c.duration("idle-timeout")
		cfg.FirstTokenTimeout = c.duration("first-token-timeout")
		cfg.ToolTimeout = c.duration("tool-timeout")
		cfg.MCPCallTimeout = c.duration("mcp-call-timeout")
		cfg.WorkspaceRoot = c.str("workspace-root")
		cfg.KeepWorkspaces = c.bool("keep-workspaces")
		cfg.MCPRequired = c.bool("mcp-required")
		cfg.AttachmentsURL = c.attachmentsURL()
		if v, from := c.raw("mcp-host-allowlist"); strings.TrimSpace(v) != "" {
			hosts, err := mcp.ParseHostAllowlist(v)
			if err != nil {
				c.fail(from, v, "is not a host allowlist: %v", err)
			}
			cfg.MCPHostAllowlist = hosts
		}
		cfg.Containment = strings.ToLower(c.str("containment"))
		switch cfg.Containment {
		case "auto", "cgroup", "subreaper", "process-group":
		default:
			v, from := c.raw("containment")
			c.fail(from, v, "is not a containment; use auto, cgroup, subreaper or process-group")
		}
		cfg.CgroupParent = c.str("cgroup-parent")
		if v, _ := c.raw("allow-local-sandbox"); strings.ToLower(strings.TrimSpace(v)) != "auto" {
			allow := c.bool("allow-local-sandbox")
			cfg.AllowLocalSandbox = &allow
		}
		cfg.SandboxLimits.Processes = int(c.int("sandbox-processes", 0, 1<<22))
		if !c.zero("sandbox-memory") {
			cfg.SandboxLimits.Memory = c.bytes("sandbox-memory")
		}
		if !c.zero("sandbox-cpu") {
			cfg.SandboxLimits.CPU = c.duration("sandbox-cpu")
		}
		cfg.InteractionTTL = c.duration("interaction-ttl")
		cfg.ProviderKeys = c.providerKeys()
		cfg.InteractionSecret = strings.TrimSpace(c.getenv("RUNNEL_INTERACTION_SECRET"))
		if cfg.InteractionSecret != "" && len(cfg.InteractionSecret) < 16 {
			c.errs = append(c.errs, errors.New("RUNNEL_INTERACTION_SECRET is shorter than 16 characters; generate one with: openssl rand -hex 32"))
		}
	}
	if c.groups["agents"] {
		cfg.AgentsDir = c.str("agents-dir")
		if cfg.AgentsDir == "" {
			cfg.AgentsDir = agents.DefaultDir()
		}
		cfg.AgentStartTimeout = c.duration("agent-start-timeout")
		cfg.HarnessCommands = c.harnessCommands()
	}
	if c.groups["log"] {
		cfg.LogLevel = c.logLevel()
		cfg.LogFormat = c.logFormat()
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// listenCheck refuses to expose an unauthenticated runner beyond this host
// (DESIGN §2). Only a loopback IP or "localhost" counts as local: a name
// that merely resolves to loopback today may not tomorrow.
func (cfg *Config) listenCheck() error {
	if cfg.Token != "" || isLoopback(cfg.Host) {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)",
		net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// logger writes to w in the configured format and redacts the token, so
// no log line can carry it even by accident.
func (cfg *Config) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(redact.New(cfg.serverSecrets()...).Handler(h))
}

func (cfg *Config) runOptions(log *slog.Logger, h *host) *run.Options {
	return &run.Options{
		Logger:            log,
		Containment:       h.containment,
		Isolator:          h.isolator,
		SandboxLimits:     cfg.SandboxLimits,
		AllowLocalSandbox: h.localAllowed,
		ScriptLimiter:     h.scripts,
		ScriptWarm:        h.warm,
		InteractionTTL:    cfg.InteractionTTL,
		ProviderKeys:      cfg.ProviderKeys,
		// The server's own secrets are secrets of every run: a run's
		// tools must not bring them into its events.
		ServerSecrets:     cfg.serverSecrets(),
		MaxSteps:          cfg.MaxSteps,
		MaxStepBytes:      cfg.MaxStepBytes,
		MaxRunBytes:       cfg.MaxRunBytes,
		TotalTimeout:      cfg.RunTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		FirstTokenTimeout: cfg.FirstTokenTimeout,
		ToolTimeout:       cfg.ToolTimeout,
		MCPCallTimeout:    cfg.MCPCallTimeout,
		WorkspaceRoot:     cfg.WorkspaceRoot,
		KeepWorkspace:     cfg.KeepWorkspaces,
		InteractionSecret: cfg.interactionSecret(),
		MCPGuard:          mcp.GuardOptions{HostAllowlist: cfg.MCPHostAllowlist},
		MCPRequired:       cfg.MCPRequired,
		AttachmentsURL:    cfg.AttachmentsURL,
		Agents:            h.agents,
		ACPTimeouts:       acp.Timeouts{Initialize: cfg.AgentStartTimeout, Session: cfg.AgentStartTimeout},
		Telemetry:         h.tel,
		HTTPClient:        h.outboundClient(),
	}
}

// localAllowed is whether a request may have sandbox "local": as the
// operator said, or (auto) only where the host cannot isolate.
func (cfg *Config) localAllowed(iso *sandbox.Isolator) bool {
	if cfg.AllowLocalSandbox != nil {
		return *cfg.AllowLocalSandbox
	}
	return !iso.Supported()
}

// registry is the ACP agents this runnel may run.
func (cfg *Config) registry() *agents.Registry {
	return agents.NewRegistry(agents.Options{Dir: cfg.AgentsDir, Commands: cfg.HarnessCommands})
}

// serverSecrets are the values every run redacts: the token, the
// interaction secret, and the operator's provider keys.
func (cfg *Config) serverSecrets() []string {
	out := []string{cfg.Token, cfg.InteractionSecret}
	for _, v := range cfg.ProviderKeys {
		out = append(out, v)
	}
	for _, v := range cfg.OTLPHeaders {
		out = append(out, v)
	}
	return append(out, cfg.ProfileSecrets...)
}

// interactionSecret is nil when signing is off, never an empty key.
func (cfg *Config) interactionSecret() []byte {
	if cfg.InteractionSecret == "" {
		return nil
	}
	return []byte(cfg.InteractionSecret)
}

func (cfg *Config) serverOptions(log *slog.Logger, harnesses []string, h *host) *server.Options {
	features := []string{"ndjson", "permissions", "pause_resume", "client_tools", "builtins", "mcp", "code_mode",
		"model_connection", "attachments", "kill", "acp", "ui_message_stream"}
	return &server.Options{
		Token:            cfg.Token,
		MaxBodyBytes:     cfg.MaxBodyBytes,
		ConcurrencyLimit: cfg.ConcurrencyLimit,
		ShutdownGrace:    cfg.ShutdownGrace,
		ShutdownDelay:    cfg.ShutdownDelay,
		WriteTimeout:     cfg.WriteTimeout,
		Version:          version,
		Harnesses:        harnesses,
		Features:         features,
		Logger:           log,
		Profiles:         cfg.Profiles,
		Metrics:          h.tel.Metrics().Handler(),
		Refused:          h.tel.Metrics().Refused,
		Capabilities: &server.Capabilities{Sandbox: h.sandboxInfo(), Agents: h.agentInfo(), Limits: server.Limits{
			MaxSteps:            cfg.MaxSteps,
			RunTimeoutMs:        cfg.RunTimeout.Milliseconds(),
			IdleTimeoutMs:       cfg.IdleTimeout.Milliseconds(),
			FirstTokenTimeoutMs: cfg.FirstTokenTimeout.Milliseconds(),
			ToolTimeoutMs:       cfg.ToolTimeout.Milliseconds(),
		}},
	}
}
