package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/runnel/runnel/internal/codemode"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/strictjson"
)

// codeModeTools adds list_mcp_tools and run_mcp_script (DESIGN §4.7) to the
// gate and returns what the model is offered. Nothing is added when code
// mode is off or no server could be reached: a script would have nothing to
// call, and the unreachable servers are already reported.
//
// Neither tool has an effect of its own: listing reads what the model could
// see anyway, and every call a script makes passes the gate like a direct
// call. So they are allowed unless a rule names them (deny run_mcp_script
// to forbid scripts); under a default of ask, asking for the script as well
// as for its calls would ask twice.
func codeModeTools(g *gate, p *plan, pool *mcp.Pool, limiter *codemode.Limiter, warm *codemode.Warm) []provider.Tool {
	if !p.codeMode || pool == nil {
		return nil
	}
	mcpTools := pool.Tools()
	if len(mcpTools) == 0 {
		return nil
	}
	sandboxTools := make([]codemode.Tool, len(mcpTools))
	for i, t := range mcpTools {
		sandboxTools[i] = codemode.Tool{Server: t.Server, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	listing := codemode.ListTools(sandboxTools)
	readOnly := true
	g.tools[codemode.ListToolsName] = &gatedTool{
		executor:   permission.ExecutorRelay,
		readOnly:   &readOnly,
		ownDefault: permission.Allow,
		kind:       "code",
		run: func(context.Context, harness.Call) harness.ToolResult {
			return harness.TextResult(listing, false)
		},
	}
	scripts := &scriptCaller{gate: g, pool: pool, names: make(map[[2]string]string, len(mcpTools))}
	for _, t := range mcpTools {
		scripts.names[[2]string{t.Server, t.Name}] = t.QualifiedName
	}
	g.tools[codemode.RunScriptName] = &gatedTool{
		executor:   permission.ExecutorRelay,
		readOnly:   &readOnly,
		ownDefault: permission.Allow,
		kind:       "code",
		run: func(ctx context.Context, c harness.Call) harness.ToolResult {
			return runScript(ctx, p.log, c.Input, &codemode.Options{Timeout: p.scriptTimeout, Limiter: limiter, Warm: warm}, sandboxTools, scripts)
		},
	}
	return []provider.Tool{
		{Name: codemode.ListToolsName, Description: codemode.ListToolsDescription, Schema: json.RawMessage(codemode.ListToolsSchema)},
		{Name: codemode.RunScriptName, Description: codemode.RunScriptDescription, Schema: json.RawMessage(codemode.RunScriptSchema(p.scriptTimeout))},
	}
}

// runScript is one run_mcp_script call. The model's timeoutMs replaces the
// default budget (opts.Timeout), up to codemode.MaxTimeout; the run's own
// deadline bounds it all the same through ctx.
func runScript(ctx context.Context, log *slog.Logger, input json.RawMessage, opts *codemode.Options, tools []codemode.Tool, caller codemode.Caller) harness.ToolResult {
	var in codemode.ScriptInput
	if err := strictjson.Unmarshal(input, &in); err != nil || strings.TrimSpace(in.Script) == "" {
		return harness.TextResult(fmt.Sprintf(
			"%s needs {\"script\": \"<JavaScript>\"}, with an optional integer timeoutMs; the arguments given were not that. Call list_mcp_tools for the functions a script can call.",
			codemode.RunScriptName), true)
	}
	o := *opts
	if in.TimeoutMs > 0 {
		// Compared in milliseconds first: a huge timeoutMs must not
		// overflow into a negative, or no, budget.
		o.Timeout = time.Duration(min(in.TimeoutMs, codemode.MaxTimeout.Milliseconds())) * time.Millisecond
	}
	start := time.Now()
	out := codemode.Run(ctx, in.Script, tools, caller, &o)
	log.InfoContext(ctx, "code mode script", "duration_ms", time.Since(start).Milliseconds(),
		"failure", string(out.Failure), "logs", len(out.Logs))
	b, err := json.Marshal(out)
	if err != nil { // the result is JSON already and the rest are strings
		return harness.TextResult("The script's output could not be encoded.", true)
	}
	return harness.ToolResult{Output: b, IsError: out.Error != ""}
}

// scriptCaller runs the calls of scripts through the run's gate, under
// the permissions mcpTools registered for the direct calls: what the policy
// allows is called, what it denies rejects, and what would need a person
// rejects with a codemode.Refusal, because a script cannot pause. Stored
// approvals are not consulted: they answer the direct calls they were
// given for, never a call inside a script.
type scriptCaller struct {
	gate  *gate
	pool  *mcp.Pool
	names map[[2]string]string // the direct tool name by server and the server's tool name
}

func (s *scriptCaller) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (codemode.CallResult, error) {
	name := s.names[[2]string{server, tool}]
	t, ok := s.gate.tools[name]
	if !ok { // codemode only passes the tools it was given
		return codemode.CallResult{}, fmt.Errorf("unknown tool %s.%s", server, tool)
	}
	if err := strictjson.Check(args); err != nil {
		return codemode.CallResult{}, fmt.Errorf("the arguments of %s.%s %w; pass each argument once, in the case the tool's schema uses", server, tool, err)
	}
	// No store: stored approvals answer the direct calls they were given
	// for, never a call inside a script.
	switch verdict, _ := s.gate.decide(t, name, args, nil, permission.CallRef{}); verdict {
	case permission.VerdictDeny:
		return codemode.CallResult{}, errors.New(policyDeniedText(name))
	case permission.VerdictPending:
		return codemode.CallResult{}, &codemode.Refusal{Server: server, Tool: tool, Direct: name}
	}
	res, err := s.pool.Call(ctx, name, args)
	if err != nil {
		return codemode.CallResult{}, err
	}
	return codemode.CallResult{Content: res.Content, IsError: res.IsError}, nil
}
