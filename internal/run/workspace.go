package run

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/tools"
)

// needsWorkspace reports whether the run has anything to do in a
// workspace: builtins or stdio MCP servers to run there, or files to put
// there. A run without any gets none, so a plain chat turn touches no
// disk.
func needsWorkspace(p *plan) bool {
	r := p.req
	return len(p.grants) > 0 || len(r.Skills) > 0 || len(r.HarnessFiles) > 0 || strings.TrimSpace(r.AgentsMd) != "" ||
		slices.ContainsFunc(p.mcp, func(s mcp.ServerSpec) bool { return s.Transport == mcp.TransportStdio })
}

// openWorkspace creates the run's workspace (DESIGN §6), isolated when
// the plan says so, with its egress proxy (whose refusals go to notice),
// and writes the request's skills, harnessFiles and agentsMd into it, or
// returns nil when the run needs none (an ACP run always does: it is the
// agent's working directory). The caller defers closeWS (a no-op when
// there is no workspace): it removes the workspace unless
// Options.KeepWorkspace, and logs a failure to. A file that cannot be
// written refuses the run before anything ran.
func (m *Manager) openWorkspace(p *plan, always bool, notice func(string)) (ws *sandbox.Workspace, closeWS func(), err error) {
	closeWS = func() {}
	if !always && !needsWorkspace(p) {
		return nil, closeWS, nil
	}
	is, stopEgress, err := startEgress(p, notice)
	if err == nil {
		ws, err = sandbox.NewWorkspace(m.opts.WorkspaceRoot, &sandbox.WorkspaceOptions{
			Keep: m.opts.KeepWorkspace, Containment: m.opts.Containment, Isolation: is,
		})
	}
	if err != nil {
		stopEgress()
		p.log.Error("workspace", "err", err)
		return nil, closeWS, &runnel.Error{Code: runnel.CodeInternal, Err: err}
	}
	if is != nil {
		p.obs.SandboxStarted("isolated")
	} else {
		p.obs.SandboxStarted("local")
	}
	steps := []struct {
		what  string
		write func() error
	}{
		{"skills", func() error { return ws.WriteSkills(p.req.Skills) }},
		{"harnessFiles", func() error { return ws.WriteFiles(p.req.HarnessFiles) }},
		{"agentsMd", func() error { return ws.WriteAgentsMd(p.req.AgentsMd) }},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			_ = ws.Close()
			stopEgress()
			return nil, closeWS, invalid("The %s could not be written into the workspace: %s.", s.what, strings.TrimSuffix(err.Error(), "."))
		}
	}
	return ws, func() {
		if err := ws.Close(); err != nil {
			p.log.Warn("workspace cleanup", "err", err)
		}
		stopEgress()
	}, nil
}

// gate builds the run's permission gate and what the model is offered:
// the custom tools of the plan, then the granted builtins working in ws.
// Read-only builtins (read, ls, find, grep) count as reads under the
// allow_reads default; the others ask.
func (m *Manager) gate(p *plan, ws *sandbox.Workspace, pool *mcp.Pool) (*gate, []provider.Tool) {
	g := &gate{
		tools:       maps.Clone(p.gated),
		plan:        p.perm,
		store:       p.resume.store,
		superseded:  p.resume.superseded,
		stale:       p.resume.stale,
		secret:      m.opts.InteractionSecret,
		now:         m.opts.Now,
		ttl:         m.opts.InteractionTTL,
		holdsSecret: p.red.Contains,
		obs:         p.obs,
	}
	advert := append([]provider.Tool(nil), p.advert...)
	advert = append(advert, mcpTools(g, pool)...)
	advert = append(advert, codeModeTools(g, p, pool, m.opts.ScriptLimiter, m.opts.ScriptWarm)...)
	if ws == nil || len(p.grants) == 0 {
		return g, advert
	}
	for _, b := range tools.NewBuiltins(p.grants, ws, m.opts.Builtins) {
		readOnly := b.ReadOnly
		run := b.Run
		g.tools[b.Name] = &gatedTool{
			executor: permission.ExecutorHarness,
			readOnly: &readOnly,
			subject:  b.Subject,
			kind:     "builtin",
			run: func(ctx context.Context, c harness.Call) harness.ToolResult {
				return fromTools(run(ctx, c.Input))
			},
		}
		advert = append(advert, provider.Tool{Name: b.Name, Description: b.Description, Schema: b.Schema})
	}
	return g, advert
}
