package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/harness/acp"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/telemetry"
)

// DefaultHistoryChars caps the conversation an ACP turn renders into its
// prompt (DESIGN §5.4); the oldest lines go first.
const DefaultHistoryChars = 100_000

// resultCapChars caps one tool result in the rendered conversation.
const resultCapChars = 4_000

// runACP runs a planned request on its ACP agent: the same gate, store,
// workspace, redaction and result as a native run, with the agent in
// place of the loop.
func (m *Manager) runACP(ctx context.Context, p *plan, sink runnel.Sink) (*runnel.Result, error) {
	red, log := p.red, p.log
	if sink == nil {
		sink = runnel.Discard{}
	}
	rs := &runSink{next: sink, traceID: p.traceID, obs: p.obs}
	sink = red.Sink(rs)
	launcher, err := p.agent.Launcher(agents.Run{
		Model:       agentModel(p),
		Mode:        p.req.HarnessMode,
		OpenPlan:    p.perm.Open() && serversOpen(p.mcp),
		Traceparent: p.obs.Traceparent(ctx),
		Builtins:    p.agentBuiltins,
	})
	if err != nil {
		return nil, invalid("%s.", upperFirst(strings.TrimSuffix(err.Error(), ".")))
	}
	p.req.HarnessFiles, p.notices = agentSafeFiles(p.req.HarnessFiles, p.notices)
	ws, closeWS, err := m.openWorkspace(p, true, notices(p, rs))
	if err != nil {
		return nil, err
	}
	defer closeWS()
	rctx, cancel := context.WithTimeoutCause(ctx, p.total, errTotalTimeout)
	defer cancel()
	start := time.Now()

	// runnel connects to the user's MCP servers once, before the agent
	// does: an unreachable required server refuses the run, and the
	// gate learns each tool's server policy and read-only hint.
	pool := m.connectMCP(rctx, p, ws)
	if err := m.requiredMCP(pool); err != nil {
		closePool(pool, log)
		return nil, err
	}
	m.deliverAttachments(rctx, p, ws)
	g, _ := m.gate(p, ws, pool)
	servers := reachable(p.mcp, pool)
	closePool(pool, log)

	tools := make([]acp.Tool, 0, len(p.advert))
	for _, t := range p.advert {
		tools = append(tools, acp.Tool{Name: t.Name, Description: t.Description, Schema: t.Schema})
	}
	timeouts := m.opts.ACPTimeouts
	timeouts.Idle = p.idle
	log.InfoContext(ctx, "run start", "tools", len(tools), "mcp_servers", len(servers), "agent", p.agent.Version())
	out, runErr := acp.Run(rctx, &acp.Turn{
		Agent:     countedLauncher{launcher, p.obs, p.harness},
		Workspace: ws,
		Prompt:    acpPrompt(p),
		Tools:     tools,
		Servers:   servers,
		Forwards:  p.forwards,
		Gate:      g,
		Notices:   p.notices,
		Timeouts:  timeouts,
		Logger:    log,
	}, sink)
	if runnel.ErrorCodeOf(runErr) == runnel.CodeRefused && out.Emitted == 0 {
		log.WarnContext(ctx, "run refused", "err", runErr)
		return nil, runErr
	}
	res := m.result(ctx, rctx, p, turnEnd{out.Messages, out.Output, out.Usage, out.StopReason, out.Interactions}, runErr)
	if runErr != nil {
		sink.Emit(runnel.Event{Type: runnel.EventError, Message: res.Error, Code: res.ErrorCode})
		sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: res.StopReason})
		log.WarnContext(ctx, "run failed", "status", res.Status, "code", res.ErrorCode, "err", runErr)
	} else {
		sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: res.StopReason})
	}
	red.Result(res)
	log.InfoContext(ctx, "run end", "status", res.Status, "stop_reason", res.StopReason,
		"input_tokens", res.Usage.Input, "output_tokens", res.Usage.Output, "duration", time.Since(start))
	return res, nil
}

// countedLauncher counts the agent processes runs start.
type countedLauncher struct {
	acp.Launcher
	obs   *telemetry.Run
	agent string
}

func (l countedLauncher) Launch(ctx context.Context, server acp.Endpoint) (*acp.Launch, error) {
	launch, err := l.Launcher.Launch(ctx, server)
	if err == nil {
		l.obs.AgentStarted(l.agent)
	}
	return launch, err
}

func closePool(pool *mcp.Pool, log interface{ Warn(string, ...any) }) {
	if pool == nil {
		return
	}
	if err := pool.Close(); err != nil {
		log.Warn("mcp close", "err", err)
	}
}

// reachable are the user's MCP servers the agent connects to itself: the
// ones runnel could reach, with their headers (credentials included).
func reachable(specs []mcp.ServerSpec, pool *mcp.Pool) []acp.Server {
	down := map[string]bool{}
	if pool != nil {
		for _, u := range pool.Unreachable() {
			down[u.Server] = true
		}
	}
	var out []acp.Server
	for _, s := range specs {
		if !down[s.Name] {
			out = append(out, acp.Server{Name: s.Name, URL: s.URL, Headers: s.Headers})
		}
	}
	return out
}

// agentModel is the run's model as its agent is configured with it.
func agentModel(p *plan) agents.Model {
	return agents.Model{Provider: p.model.provider, API: agentAPI(p.model), ID: p.model.id, BaseURL: p.model.cfg.BaseURL,
		APIKey: p.model.cfg.APIKey, APIVersion: p.model.cfg.APIVersion, Headers: p.model.cfg.Headers}
}

// agentAPI is the API an agent is configured to call for the run's model:
// runnel's own (the native adapters'), except for Google's Gemini, which
// runnel reaches only through an OpenAI-compatible endpoint and Gemini CLI
// speaks natively.
func agentAPI(m *modelRef) string {
	switch m.provider {
	case "gemini", "google":
		return "gemini"
	}
	return m.api
}

// serversOpen reports whether no MCP server's policy asks or denies.
func serversOpen(specs []mcp.ServerSpec) bool {
	for _, s := range specs {
		if s.Permission != "" && s.Permission != string(permission.Allow) {
			return false
		}
	}
	return true
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// acpPrompt is what an ACP turn asks its agent: the latest user message
// as it is when the conversation is only that message, else the whole
// conversation rendered as text (a cold resume: no agent session outlives
// a turn). The request's system prompts lead, since an agent keeps its
// own system prompt.
func acpPrompt(p *plan) []runnel.Block {
	var head []string
	if s := strings.TrimSpace(p.prompt.System); s != "" && strings.TrimSpace(p.req.SystemPrompt+p.req.AppendSystemPrompt) != "" {
		head = append(head, "Instructions from the platform for this conversation:\n"+strings.TrimSpace(p.req.SystemPrompt+"\n"+p.req.AppendSystemPrompt))
	}
	msgs := p.prompt.Messages
	if len(msgs) == 1 && msgs[0].Role == runnel.RoleUser {
		blocks := []runnel.Block{}
		if len(head) > 0 {
			blocks = append(blocks, runnel.Block{Type: runnel.BlockText, Text: strings.Join(head, "\n\n") + "\n\n"})
		}
		for _, b := range msgs[0].Content {
			if b.Type == runnel.BlockText || b.Type == runnel.BlockImage {
				blocks = append(blocks, b)
			}
		}
		return blocks
	}
	text := renderHistory(p.req.Messages, p.tools.IsClient, DefaultHistoryChars)
	return []runnel.Block{{Type: runnel.BlockText, Text: strings.Join(append(head, text), "\n\n")}}
}

// renderHistory writes a conversation as one prompt (DESIGN §5.4): who
// said what, each tool call and what it returned (capped), and each
// person's answer to an approval, which tells the agent to make an
// approved call again. The oldest lines go first past maxChars.
func renderHistory(msgs []runnel.Message, isClient func(string) bool, maxChars int) string {
	replay := permission.ReadReplay(msgs, isClient)
	type at struct{ m, i int }
	class := map[at]permission.ResultClass{}
	name := map[at]string{}
	for _, c := range replay.Calls {
		for _, a := range c.Answers {
			class[at{a.Message, a.Index}] = a.Class
			name[at{a.Message, a.Index}] = c.Block.ToolName
		}
	}
	for _, a := range replay.Untied {
		class[at{a.Message, a.Index}] = a.Class
		name[at{a.Message, a.Index}] = a.Block.ToolName
	}
	var lines []string
	for i, m := range msgs {
		if m.Role == runnel.RoleSystem {
			continue
		}
		for j, b := range m.Content {
			switch b.Type {
			case runnel.BlockText:
				if t := strings.TrimSpace(b.Text); t != "" {
					lines = append(lines, speaker(m.Role)+": "+t)
				}
			case runnel.BlockToolCall:
				args := string(b.Input)
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				lines = append(lines, fmt.Sprintf("[called %s(%s)]", b.ToolName, args))
			case runnel.BlockToolResult:
				n := name[at{i, j}]
				if n == "" {
					n = b.ToolName
				}
				switch class[at{i, j}] {
				case permission.ResultApproval:
					if a := permission.AnswerOf(b); a.Approved {
						lines = append(lines, fmt.Sprintf("[user APPROVED %s; the call has NOT run yet. Call the tool again with the same arguments now to execute it.]", n))
					} else {
						line := fmt.Sprintf("[user DENIED %s; the call was not executed.", n)
						if r := strings.TrimSpace(a.Reason); r != "" {
							line += fmt.Sprintf(" Their reason: %q", r)
						}
						lines = append(lines, line+"]")
					}
				case permission.ResultDeferred:
					lines = append(lines, fmt.Sprintf("[%s was not run: the turn paused for another call first.]", n))
				default:
					lines = append(lines, fmt.Sprintf("[%s returned: %s]", n, capText(b.OutputText(), resultCapChars)))
				}
			case runnel.BlockImage, runnel.BlockResource, runnel.BlockAttachment:
				lines = append(lines, fmt.Sprintf("%s: [%s %s]", speaker(m.Role), b.Type, firstNonEmpty(b.Filename, b.MimeType, b.URI)))
			}
		}
	}
	closing := "Continue the conversation: answer the user's latest message above."
	if last := permission.LatestUserText(msgs); last >= 0 && last < len(msgs)-1 {
		closing = "Continue the user's latest request from where it stopped, taking the answers above into account."
	}
	const header = "Conversation so far:"
	total := len(header) + len(closing) + 4
	for _, l := range lines {
		total += len(l) + 1
	}
	for len(lines) > 1 && total > maxChars {
		total -= len(lines[0]) + 1
		lines = lines[1:]
	}
	return header + "\n\n" + strings.Join(lines, "\n") + "\n\n" + closing
}

func speaker(r runnel.Role) string {
	switch r {
	case runnel.RoleAssistant:
		return "Assistant"
	case runnel.RoleTool:
		return "Tool"
	}
	return "User"
}

func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d more characters]", len(s)-cut)
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// agentSafeFiles keeps an agent's own permission settings from widening
// the run's plan: Claude Code's settings files in harnessFiles lose their
// allow list and default mode (an allowed call would never reach
// runnel's gate); their deny rules stay, since they only narrow.
func agentSafeFiles(files []runnel.File, notices []string) ([]runnel.File, []string) {
	out := make([]runnel.File, 0, len(files))
	for _, f := range files {
		switch strings.TrimPrefix(f.Path, "./") {
		case ".claude/settings.json", ".claude/settings.local.json":
			var settings map[string]any
			if json.Unmarshal([]byte(f.Content), &settings) == nil {
				if perms, ok := settings["permissions"].(map[string]any); ok {
					var dropped []string
					for _, k := range []string{"allow", "defaultMode", "additionalDirectories"} {
						if _, has := perms[k]; has {
							delete(perms, k)
							dropped = append(dropped, "permissions."+k)
						}
					}
					if len(dropped) > 0 {
						b, _ := json.MarshalIndent(settings, "", "  ")
						f.Content = string(b)
						notices = append(notices, fmt.Sprintf("%s: %s removed; runnel's permission plan decides what the agent may run.", f.Path, strings.Join(dropped, ", ")))
					}
				}
			}
		}
		out = append(out, f)
	}
	return out, notices
}
