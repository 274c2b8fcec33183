package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/sandbox"
)

// connectMCP opens the run's MCP sessions, or returns nil when the request
// names no server. A server that cannot be reached is not a failure of the
// run: the pool reports it, and the caller hears it as a notice event and
// a line in the result (DESIGN §4.6).
func (m *Manager) connectMCP(ctx context.Context, p *plan, ws *sandbox.Workspace) *mcp.Pool {
	if len(p.mcp) == 0 {
		return nil
	}
	pool := mcp.Connect(ctx, p.mcp, &mcp.Options{
		Guard:          m.opts.MCPGuard,
		ConnectTimeout: m.opts.MCPConnectTimeout,
		CallTimeout:    m.opts.MCPCallTimeout,
		Logger:         p.log,
		Stdio:          stdioStarter(ws),
		Propagate:      p.obs.Inject,
	})
	p.notices = append(p.notices, pool.Notices()...)
	return pool
}

// stdioGrace is how long a stdio server may take to exit once its input
// closes, before it is killed.
const stdioGrace = 2 * time.Second

// stdioStarter starts stdio servers in the run's workspace, which plan
// made sure is isolated; nil when the run has no workspace.
func stdioStarter(ws *sandbox.Workspace) mcp.StartFunc {
	if ws == nil {
		return nil
	}
	return func(_ context.Context, spec mcp.ServerSpec) (*mcp.Program, error) {
		var env []string
		for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
			env = append(env, k+"="+spec.Env[k])
		}
		stderr := sandbox.NewTail(8 << 10)
		proc, err := sandbox.StartProcess(ws, append([]string{spec.Command}, spec.Args...), &sandbox.ProcessOptions{Env: ws.Env(env), Stderr: stderr})
		if err != nil {
			return nil, err
		}
		return &mcp.Program{Stdin: proc.Stdin, Stdout: proc.Stdout, Stderr: stderr.String, Exited: proc.Exited(),
			End: func() error { return proc.End(stdioGrace) }}, nil
	}
}

// requiredMCP fails the run when a server it needs could not be reached:
// one whose policy says required, or any, when the operator says every
// server is. Nothing has run yet.
func (m *Manager) requiredMCP(pool *mcp.Pool) error {
	if pool == nil {
		return nil
	}
	for _, u := range pool.Unreachable() {
		switch {
		case u.Required:
			return runnel.Errorf(runnel.CodeUnavailable,
				"%s The run needs it (policy.required), so it did not start: fix the server or its credentials, or drop policy.required to run without it.", u.Reason)
		case m.opts.MCPRequired:
			return runnel.Errorf(runnel.CodeUnavailable,
				"%s This runnel runs no turn without its MCP servers (RUNNEL_MCP_REQUIRED), so it did not start: fix the server or its credentials.", u.Reason)
		}
	}
	return nil
}

// mcpTools adds the pool's tools to the gate and returns what the model is
// offered. MCP tools are relayed calls under their server's permission.
func mcpTools(g *gate, pool *mcp.Pool) []provider.Tool {
	if pool == nil {
		return nil
	}
	var advert []provider.Tool
	for _, t := range pool.Tools() {
		if _, taken := g.tools[t.QualifiedName]; taken {
			continue // a custom tool already has the name; Normalize keeps this from happening for MCP names
		}
		name := t.QualifiedName
		g.tools[name] = &gatedTool{
			executor:         permission.ExecutorRelay,
			serverPermission: t.ServerPermission,
			readOnly:         t.ReadOnly,
			subject:          schemaSubject(t.InputSchema),
			kind:             "mcp",
			run: func(ctx context.Context, c harness.Call) harness.ToolResult {
				return mcpResult(pool.Call(ctx, name, c.Input))
			},
		}
		advert = append(advert, provider.Tool{Name: name, Description: t.Description, Schema: t.InputSchema})
	}
	return advert
}

// mcpResult turns a pool call into what the model reads. A call that got
// no result (the server failed, or the run ended) is a tool error too.
func mcpResult(res mcp.Result, err error) harness.ToolResult {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return harness.TextResult("The MCP tool call was cancelled before it finished.", true)
	case err != nil:
		return harness.TextResult(fmt.Sprintf("The MCP tool call failed: %v", err), true)
	}
	return harness.ToolResult{Output: runnel.TextOutput(res.Content), IsError: res.IsError}
}
