package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/codemode"
	"github.com/runnel/runnel/internal/egress"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/harness/native"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/redact"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/telemetry"
	"github.com/runnel/runnel/internal/tools"
)

// plan is a request that passed every check, with what the run needs
// resolved: nothing in it can be refused any more.
type plan struct {
	req *runnel.RunRequest
	// harness is "native" or the ACP agent's name; agent is that agent.
	harness string
	agent   *agents.Agent
	// agentBuiltins are the builtin grants of an ACP run: the agent's own
	// tools, which runnel does not serve (Pi activates them by name).
	agentBuiltins []string
	model         *modelRef
	prompt        native.Prompt
	tools         *tools.Registry
	// gated are the custom tools as the permission gate sees them; the
	// builtins join them once the run has its workspace.
	gated  map[string]*gatedTool
	advert []provider.Tool
	// grants are the builtin tools the request grants (DESIGN §3.1).
	grants []string
	// mcp are the validated MCP servers; Run connects them.
	mcp []mcp.ServerSpec
	// codeMode adds list_mcp_tools and run_mcp_script (DESIGN §4.7).
	codeMode bool
	// scriptTimeout is a script's budget when the model passes no timeoutMs.
	scriptTimeout time.Duration
	perm          permission.Plan
	// resume is what the replayed conversation asks before the model runs.
	resume   *resumption
	maxSteps int
	total    time.Duration
	idle     time.Duration
	// isolation is the run's isolated sandbox, nil on local; allow is
	// its network allowlist (NetworkAllowlist).
	isolation *sandbox.Isolation
	allow     *egress.Allowlist
	// forwards are the host loopback addresses an agent in a confined
	// sandbox reaches through the proxy (its model, MCP servers).
	forwards []string
	// notices tell the caller what the run accepted but does not act on.
	notices []string
	// runID names the run in logs and in an internal error's sentence.
	runID string
	// sessionID is the request's session, or one runnel made up for a
	// request without one, so the platform can carry it into the next
	// turn as a platform that reads it expects (Agenta's does).
	sessionID string
	// traceID is the run's trace: the caller's, when its traceparent is
	// valid, or a fresh one. Every result and done event names it.
	traceID string
	// obs is the run's tracing and metrics; export is the run's own
	// collector (telemetry.exporters.otlp) and capture whether content
	// goes on spans.
	obs     *telemetry.Run
	export  *telemetry.Export
	capture bool
	// red removes the request's secrets from everything the run shows.
	red *redact.Redactor
	// log is the run's logger: run id, session, harness and model on every
	// record, secrets redacted.
	log *slog.Logger
}

// plan checks req and resolves it, or returns the *runnel.Error (code
// invalid_request or refused) for the first thing that cannot run. The
// order puts what a caller most needs to hear first: a harness that is not
// there makes every other field moot. runID names the run; empty means a
// fresh one (the server passes its request id, so logs and results share
// one id).
func (m *Manager) plan(req *runnel.RunRequest, runID string) (*plan, error) {
	if runID == "" {
		runID = newRunID()
	}
	if req == nil {
		return nil, invalid("The request is empty.")
	}
	export, capture, telSecrets, err := readTelemetry(req)
	if err != nil {
		return nil, err
	}
	secrets := append(append(secretValues(req), telSecrets...), m.opts.ServerSecrets...)
	p := &plan{req: req, runID: runID, red: redact.New(secrets...), sessionID: req.SessionID,
		export: export, capture: capture}
	if p.sessionID == "" {
		p.sessionID = "sess_" + randomHex(8)
	}
	if err := m.checkHarness(p); err != nil {
		return nil, err
	}
	// The trace id and span id join once the run's span starts.
	p.log = slog.New(p.red.Handler(m.log.Handler())).With(
		"run_id", p.runID, "session_id", p.sessionID, "harness", p.harness, "model", req.Model)
	checks := []func(*plan) error{
		checkMessages, m.checkSandbox, checkFiles, m.checkMCP, m.checkLimits,
	}
	for _, check := range checks {
		if err := check(p); err != nil {
			return nil, err
		}
	}
	if err := m.planTools(p); err != nil {
		return nil, err
	}
	ref, err := resolveModel(req, connectionOf(req), m.opts.ProviderKeys)
	if err != nil {
		return nil, err
	}
	ref.cfg.HTTPClient = m.opts.HTTPClient
	p.model = ref
	if err := checkSandboxReach(p); err != nil {
		return nil, err
	}
	planPermissions(p)
	p.prompt = native.BuildPrompt(req)
	p.resume, err = planResume(p.prompt.Messages, resumeOptions{
		isClient: p.tools.IsClient, boundPaths: p.tools.BoundPaths,
		secret: m.opts.InteractionSecret, now: m.opts.Now(), ttl: m.opts.InteractionTTL,
	})
	if err != nil {
		return nil, err
	}
	p.prompt.Messages = p.resume.history
	return p, nil
}

// planPermissions reads the permission plan. A plan runnel could not read
// whole asks for everything, and each rule it dropped is said, so nobody
// believes a rule is in force that is not.
func planPermissions(p *plan) {
	p.perm = permission.ParsePlan(p.req.Permissions)
	if p.perm.Malformed != "" {
		p.notices = append(p.notices, fmt.Sprintf(
			"The permissions were not understood (%s), so every tool call will ask for approval.", p.perm.Malformed))
	}
	for _, r := range p.perm.Dropped {
		p.notices = append(p.notices, fmt.Sprintf(
			"A permissions rule was dropped because it is not {pattern, permission} with a valid pattern and allow, ask or deny: %s", r))
	}
}

func invalid(format string, args ...any) *runnel.Error {
	return runnel.Errorf(runnel.CodeInvalidRequest, format, args...)
}

// checkHarness finds the harness: native, or an installed ACP agent. A
// known agent that is not installed is refused with the command that
// installs it.
func (m *Manager) checkHarness(p *plan) error {
	h := strings.ToLower(strings.TrimSpace(p.req.Harness))
	if h == "" || h == "native" {
		p.harness = "native"
		if p.req.HarnessMode != "" {
			return invalid("harnessMode is for ACP harnesses; the native harness has no modes. Remove harnessMode.")
		}
		return nil
	}
	if !slices.Contains(agents.Harnesses(), h) {
		return invalid("Unknown harness %q; the harnesses are native, %s.", p.req.Harness, strings.Join(agents.Harnesses(), ", "))
	}
	if m.opts.Agents == nil {
		return invalid("Harness %q is not available: this runnel runs no ACP agents (its agents directory is not configured). Use harness \"native\", or install the agent with `runnel agents install %s` and restart runnel.", p.req.Harness, agents.Canonical(h))
	}
	a, err := m.opts.Agents.Resolve(h)
	if err != nil {
		return invalid("Harness %q is not available: %s.", p.req.Harness, strings.TrimSuffix(err.Error(), "."))
	}
	p.harness, p.agent = a.Name(), a
	return nil
}

func checkMessages(p *plan) error {
	if _, ok := native.LatestUserText(p.req.Messages); !ok {
		return invalid("No user message to send (prompt/messages empty).")
	}
	return nil
}

// checkFiles refuses skill and harness file paths that would land outside
// the workspace. Files of a named skill live under that skill's directory,
// so the name must be one safe path segment too.
func checkFiles(p *plan) error {
	for _, f := range p.req.HarnessFiles {
		if err := checkPath("harnessFiles", f.Path); err != nil {
			return err
		}
	}
	for _, s := range p.req.Skills {
		if s.Path != "" || len(s.Files) == 0 && s.Name == "" {
			if err := checkPath("skills", s.Path); err != nil {
				return err
			}
		}
		if s.Name != "" && (strings.ContainsAny(s.Name, `/\`) || s.Name == "." || s.Name == ".." || strings.ContainsRune(s.Name, 0)) {
			return invalid("Skill name %q is not a single directory name; skill names may not contain '/' or be '.' or '..'.", s.Name)
		}
		for _, f := range s.Files {
			if err := checkPath(fmt.Sprintf("skills[%s].files", s.Name), f.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkPath(field, p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return invalid("A %s entry has an empty path.", field)
	case strings.ContainsRune(p, 0):
		return invalid("The %s path %q contains a NUL byte.", field, p)
	case path.IsAbs(p) || strings.HasPrefix(p, `\`) || len(p) > 1 && p[1] == ':':
		return invalid("The %s path %q is absolute; paths must be relative to the workspace.", field, p)
	}
	clean := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return invalid("The %s path %q escapes the workspace; paths must stay inside it.", field, p)
	}
	return nil
}

// checkMCP validates the MCP servers (shape, reserved name, stdio, the
// static part of the URL guard) and code mode, which needs a server whose
// tools the scripts can call.
func (m *Manager) checkMCP(p *plan) error {
	specs, err := mcp.Normalize(p.req.McpServers, m.opts.MCPGuard)
	if err != nil {
		return err
	}
	p.mcp = specs
	for _, s := range specs {
		if s.Transport != mcp.TransportStdio {
			continue
		}
		switch {
		case p.agent != nil:
			return runnel.Errorf(runnel.CodeRefused, `MCP server %q is a stdio server, and harness %q does not take stdio servers in this runnel; use harness "native", or an http or sse MCP server.`, s.Name, p.harness)
		case p.isolation == nil:
			return runnel.Errorf(runnel.CodeRefused, `MCP server %q is a stdio server, which runs a program: runnel starts one only inside the isolated sandbox; set sandbox "isolated", or use an http or sse MCP server.`, s.Name)
		}
	}
	if cm := p.req.CodeMode; cm != nil && cm.Enabled {
		if p.agent != nil {
			return invalid("codeMode runs on the native harness; harness %q calls MCP tools itself. Set codeMode.enabled to false, or use harness \"native\".", p.harness)
		}
		if len(specs) == 0 {
			return invalid("codeMode.enabled needs at least one MCP server in mcpServers: scripts call MCP tools; add a server or set codeMode.enabled to false.")
		}
		if cm.TimeoutMs < 0 || cm.TimeoutMs > codemode.MaxTimeout.Milliseconds() {
			return invalid("codeMode.timeoutMs must be between 1 and %d (0 or absent means %d).",
				codemode.MaxTimeout.Milliseconds(), codemode.DefaultTimeout.Milliseconds())
		}
		p.codeMode = true
		p.scriptTimeout = time.Duration(cm.TimeoutMs) * time.Millisecond
		if p.scriptTimeout == 0 {
			p.scriptTimeout = codemode.DefaultTimeout
		}
	}
	return nil
}

// checkLimits applies the request's limits, which may only tighten the
// server's.
func (m *Manager) checkLimits(p *plan) error {
	p.maxSteps, p.total, p.idle = m.opts.MaxSteps, m.opts.TotalTimeout, m.opts.IdleTimeout
	l := p.req.Limits
	if l == nil {
		return nil
	}
	if l.MaxSteps < 0 || l.TotalTimeoutMs < 0 || l.IdleTimeoutMs < 0 {
		return invalid("limits.maxSteps, limits.totalTimeoutMs and limits.idleTimeoutMs must not be negative.")
	}
	if l.MaxSteps > 0 {
		p.maxSteps = min(p.maxSteps, l.MaxSteps)
	}
	if l.TotalTimeoutMs > 0 {
		p.total = min(p.total, milliseconds(l.TotalTimeoutMs))
	}
	if l.IdleTimeoutMs > 0 {
		p.idle = min(p.idle, milliseconds(l.IdleTimeoutMs))
	}
	return nil
}

// milliseconds is ms as a Duration, saturating instead of overflowing: a
// request's huge timeout must not wrap into a negative one, which would
// end the run at once or, for the idle timeout, switch it off.
func milliseconds(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// planTools builds the tool registry, what the permission gate knows of
// each custom tool, and what the model is offered. The builtins are only
// named here: they need the run's workspace, which Run opens.
func (m *Manager) planTools(p *plan) error {
	grants, err := tools.ParseBuiltins(p.req.Tools)
	if err != nil {
		return err
	}
	p.grants = grants
	if p.agent != nil {
		// The agent brings its own builtins, which the gate decides when it
		// asks; runnel serves none of its own.
		p.agentBuiltins, p.grants = grants, nil
		grants = nil
	}
	reg, err := tools.New(p.req.CustomTools, p.req.ToolCallback, &tools.Options{
		HTTPClient: m.opts.HTTPClient,
		Timeout:    m.opts.ToolTimeout,
		RunContext: withSession(p.req.RunContext, p.sessionID),
		Logger:     p.log,
	})
	if err != nil {
		return err
	}
	p.tools = reg
	p.gated = map[string]*gatedTool{}
	for _, s := range reg.Specs() {
		if slices.ContainsFunc(grants, func(g string) bool { return strings.EqualFold(g, s.Name) }) {
			return invalid("Tool name %q is both a custom tool and a granted builtin; rename the custom tool or remove %q from tools.", s.Name, strings.ToLower(s.Name))
		}
		if p.codeMode && (s.Name == codemode.ListToolsName || s.Name == codemode.RunScriptName) {
			return invalid("Tool name %q is taken by code mode; rename the custom tool or set codeMode.enabled to false.", s.Name)
		}
		p.gated[s.Name] = customTool(reg, s)
		p.advert = append(p.advert, provider.Tool{Name: s.Name, Description: s.Description, Schema: s.InputSchema})
	}
	return nil
}

// withSession is runContext with session.id filled from the request's
// sessionId when it has none (DESIGN §3.1): a tool binding
// "$ctx.session.id" (a platform's rename_session, say) then gets it. A
// runContext that is not an object is left for tools.New to refuse.
func withSession(runContext json.RawMessage, sessionID string) json.RawMessage {
	if sessionID == "" {
		return runContext
	}
	ctx := map[string]any{}
	if t := bytes.TrimSpace(runContext); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber() // numbers reach the platform as they came
		if dec.Decode(&ctx) != nil || ctx == nil {
			return runContext
		}
	}
	session, ok := ctx["session"].(map[string]any)
	if !ok {
		if _, present := ctx["session"]; present {
			return runContext // not an object: leave it as the platform sent it
		}
		session = map[string]any{}
		ctx["session"] = session
	}
	if _, has := session["id"]; has {
		return runContext
	}
	session["id"] = sessionID
	out, err := json.Marshal(ctx)
	if err != nil {
		return runContext
	}
	return out
}

// customTool is a custom tool as the gate sees it: a client tool is the
// browser's to run, anything else runnel relays to the platform.
func customTool(reg *tools.Registry, s runnel.ToolSpec) *gatedTool {
	t := &gatedTool{
		executor:       permission.ExecutorRelay,
		specPermission: s.Permission,
		readOnly:       s.ReadOnly,
		boundPaths:     reg.BoundPaths(s.Name),
		subject:        schemaSubject(s.InputSchema),
	}
	if s.EffectiveKind() == runnel.ToolKindClient {
		t.executor, t.render = permission.ExecutorClient, s.Render
		return t
	}
	t.run = func(ctx context.Context, c harness.Call) harness.ToolResult {
		return fromTools(reg.Execute(ctx, tools.Call{ID: c.ID, Name: c.Name, Input: c.Input}))
	}
	t.kind = "callback"
	if s.Call != nil {
		t.kind = "direct"
	}
	return t
}

// schemaSubject is what permission rules inspect in the calls of a tool
// with this input schema: its first declared string property
// (permission.SchemaArgument), read exactly from the call's arguments.
func schemaSubject(schema json.RawMessage) func(json.RawMessage) *string {
	name := permission.SchemaArgument(schema)
	if name == "" {
		return nil
	}
	return func(args json.RawMessage) *string { return permission.StringMember(args, name) }
}

// secretValues lists every value the request marks as secret: provider
// keys, the callback authorization, endpoint and MCP headers, a stdio MCP
// server's environment (where its keys go), the pieces of an MCP URL
// that look like credentials (a key in its path or query). (The OTLP
// exporter's headers come from readTelemetry.)
func secretValues(req *runnel.RunRequest) []string {
	out := credentialValues(req)
	for _, v := range req.Secrets {
		out = append(out, v)
	}
	if req.ToolCallback != nil {
		out = append(out, req.ToolCallback.Authorization)
	}
	if req.Endpoint != nil {
		for _, v := range req.Endpoint.Headers {
			out = append(out, v)
		}
	}
	for _, s := range req.McpServers {
		for _, v := range s.Headers {
			out = append(out, v)
		}
		for _, v := range s.Env {
			out = append(out, v)
		}
		out = append(out, mcp.SecretURLParts(s.URL)...)
		if s.Connection != nil {
			for _, v := range s.Connection.Headers {
				out = append(out, v)
			}
			for _, v := range s.Connection.Env {
				out = append(out, v)
			}
			out = append(out, mcp.SecretURLParts(s.Connection.URL)...)
		}
	}
	return out
}
