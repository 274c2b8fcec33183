package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/telemetry"
	"github.com/runnel/runnel/internal/tools"
)

// approvalOptions are what a person may answer to an approval request.
func approvalOptions() []string { return []string{"approve", "deny"} }

// interactionID names the interaction of a parked call. It is derived from
// the call, not random, so the same paused turn sent twice asks the same
// question under the same id, and a resume on any replica can check an
// approval's signature without state.
func interactionID(toolCallID string) string { return "int_" + toolCallID }

// gatedTool is what the gate knows about one tool the model may call.
type gatedTool struct {
	executor permission.Executor
	// specPermission is the spec's own permission; empty when unset.
	specPermission string
	// serverPermission is the owning MCP server's policy.permission.
	serverPermission string
	readOnly         *bool
	// ownDefault, when set, decides the calls no spec, server or rule
	// decides, in place of the plan's default.
	ownDefault permission.Permission
	// boundPaths are the argument paths contextBindings fill; keys leave
	// them out, since the model's value there never reaches the tool.
	boundPaths []string
	// subject is the argument permission rules inspect (permission.Gate's
	// Argument), read from a call's arguments the way the tool reads
	// them; nil means the tool has none.
	subject func(args json.RawMessage) *string
	// render is passed through to a client tool's interaction.
	render json.RawMessage
	// run executes the call; nil for a client tool, which the browser runs.
	run func(ctx context.Context, c harness.Call) harness.ToolResult
	// kind is how run runs it, for its span and metrics: callback,
	// direct, mcp, builtin or code.
	kind string
}

// gate is the run's harness.Dispatcher: every call passes the permission
// plan (DESIGN §5.1) before it runs, is answered, or pauses the turn. It
// consumes the answers the replayed conversation carries (the store) and
// answers the parked calls a newer user message superseded.
type gate struct {
	tools map[string]*gatedTool
	plan  permission.Plan
	store *permission.Store
	// superseded and stale name parked calls by id. They are consulted
	// only for the parked calls the loop settles (harness.Call.Resumed),
	// never for a call the model makes in this run: a provider may reuse
	// ids ("call_0"), and a new call must not be refused for an old one's
	// sake.
	superseded map[string]bool
	// stale calls are settled by their answers, but never pause again.
	stale  map[string]bool
	secret []byte
	// now and ttl date and bound the signatures of interactions.
	now func() time.Time
	ttl time.Duration
	// holdsSecret reports whether a call's arguments hold a secret of the
	// run; such a call is never parked (see pause).
	holdsSecret func([]byte) bool
	// obs traces and counts the calls the gate runs.
	obs *telemetry.Run
}

// Dispatch decides one call. The order matters: a superseded call is
// settled before the policy is read (the person moved on; not even an
// allow should run it now), a deny stands before any stored answer, and a
// client tool is the browser's to answer, so allow and ask both serve its
// stored output or pause for it.
func (g *gate) Dispatch(_ context.Context, c harness.Call) harness.Verdict {
	t, ok := g.tools[c.Name]
	if !ok {
		return harness.Answer(harness.TextResult(fmt.Sprintf("Tool '%s' is not available.", c.Name), true))
	}
	if c.Resumed && g.superseded[c.ID] {
		return harness.Answer(harness.DeniedResult(supersededText(c.Name)))
	}
	ref := g.callRef(t, c)
	verdict, decision := g.decide(t, c.Name, c.Input, g.store, ref)
	return answered(g.verdict(t, c, ref, verdict, decision), decision, c.ID)
}

// answered is v, reporting the person's stored answer that settled the
// call, if one did (Agenta's frontend settles the request it showed by it).
func answered(v harness.Verdict, decision *permission.Decision, callID string) harness.Verdict {
	if decision == nil {
		return v
	}
	// The answer names the call the person was shown: an agent that made
	// the call again after a cold resume gave it a new id.
	if decision.ToolCallID != "" {
		callID = decision.ToolCallID
	}
	a := runnel.InteractionAnswer{ID: decision.InteractionID, Kind: runnel.InteractionApproval, ToolCallID: callID,
		Approved: decision.Approved, Reason: decision.Reason}
	if a.ID == "" {
		a.ID = interactionID(callID)
	}
	return v.Answered(a)
}

// verdict turns the plan's verdict on a call into what the loop does.
func (g *gate) verdict(t *gatedTool, c harness.Call, ref permission.CallRef, verdict permission.Verdict, decision *permission.Decision) harness.Verdict {
	switch {
	case verdict == permission.VerdictDeny && decision != nil:
		return harness.Answer(harness.DeniedResult(declinedText(c.Name, decision.Reason)))
	case verdict == permission.VerdictDeny:
		return harness.Answer(harness.DeniedResult(policyDeniedText(c.Name)))
	case t.run == nil:
		if out, ok := g.store.TakeOutput(ref); ok {
			return harness.Answer(fromTools(tools.CapResult(tools.Result{Output: out.Output, IsError: out.IsError})))
		}
		return g.pause(runnel.InteractionClientTool, c, t.render)
	case verdict == permission.VerdictPending:
		return g.pause(runnel.InteractionApproval, c, nil)
	}
	return harness.Execute(func(ctx context.Context) harness.ToolResult {
		ctx, span := g.obs.Tool(ctx, c.Name, c.ID, t.kind, c.Input)
		r := t.run(ctx, c)
		span.End(r.IsError, func() string { return string(r.Output) })
		return r
	})
}

// callRef is what the store matches a call's answer by: its id, name, key
// and canonical arguments (the ones an interaction's signature covers).
func (g *gate) callRef(t *gatedTool, c harness.Call) permission.CallRef {
	ref := permission.CallRef{ID: c.ID, Name: c.Name}
	if c.Reissued {
		ref.ID = ""
	}
	ref.Key, _ = permission.Key(c.Name, c.Input, permission.KeyOptions{BoundPaths: t.boundPaths})
	if args, err := permission.CanonicalJSON(signedInput(c.Input)); err == nil {
		ref.Args = string(args)
	}
	return ref
}

// decide is the permission plan's verdict on a call of t named name, and
// the stored decision it consumed from store for ref. With a nil store no
// stored decision counts, and ask stays pending.
func (g *gate) decide(t *gatedTool, name string, args json.RawMessage, store *permission.Store, ref permission.CallRef) (permission.Verdict, *permission.Decision) {
	plan, pg := g.planGate(t, name, args)
	return plan.Decide(pg, store, ref)
}

// peek is decide without consuming the stored decision.
func (g *gate) peek(t *gatedTool, name string, args json.RawMessage, ref permission.CallRef) (permission.Verdict, *permission.Decision) {
	plan, pg := g.planGate(t, name, args)
	if plan.Effective(pg) != permission.Ask || g.store == nil {
		return plan.Verdict(pg, nil), nil
	}
	d, _ := g.store.PeekDecision(ref)
	return plan.Verdict(pg, d), d
}

// planGate is the plan a call of t is decided by, and the call as a gate.
func (g *gate) planGate(t *gatedTool, name string, args json.RawMessage) (permission.Plan, permission.Gate) {
	plan := g.plan
	if t.ownDefault != "" {
		plan.Default = t.ownDefault
	}
	var subject *string
	if t.subject != nil {
		subject = t.subject(args)
	}
	return plan, permission.Gate{
		Executor:         t.executor,
		ToolName:         name,
		Args:             args,
		Argument:         subject,
		SpecPermission:   t.specPermission,
		ServerPermission: t.serverPermission,
		ReadOnly:         t.readOnly,
	}
}

// Permit decides an ACP agent's request for leave to make a call
// (harness.Permitter), by the same plan, store and pause as Dispatch.
//
// A call of one of the run's tools is only looked at: runnel runs it when
// the agent then calls it on runnel's server, and Dispatch consumes the
// stored decision there. A client tool is allowed here (the browser's
// turn comes at that call) unless the policy denies it. Any other call,
// the agent's own tool or a user MCP server's, runs in the agent, so this
// verdict is the only one: a stored decision it uses is spent.
func (g *gate) Permit(_ context.Context, c harness.AgentCall) harness.Verdict {
	switch c.Owner {
	case harness.OwnerRunnel:
		t, ok := g.tools[c.Name]
		if !ok || strings.HasPrefix(c.Name, "mcp__") {
			return harness.Answer(harness.DeniedResult(fmt.Sprintf("Tool call execution denied. Tool '%s' is not available in this run.", c.Name)))
		}
		ref := g.callRef(t, c.Call)
		verdict, _ := g.peek(t, c.Name, c.Input, ref)
		switch {
		case c.ArgsUnknown && verdict != permission.VerdictDeny:
			// runnel's server reads the arguments when the agent calls
			// it, and Dispatch decides there.
			return harness.Allow()
		case verdict == permission.VerdictDeny:
			// Final: the agent will not call it, so nothing else would
			// take the decision that denied it.
			return g.agentVerdict(t, c)
		case t.run == nil || verdict == permission.VerdictAllow:
			return harness.Allow()
		}
		return g.pause(runnel.InteractionApproval, c.Call, nil)
	case harness.OwnerServer:
		t, ok := g.tools[c.Name]
		if !ok {
			return harness.Answer(harness.DeniedResult(fmt.Sprintf("Tool call execution denied. Tool '%s' is not among the tools this run allows from MCP server %q.", c.Name, c.Server)))
		}
		return g.agentVerdict(t, c)
	}
	t := &gatedTool{executor: permission.ExecutorHarness, readOnly: c.ReadOnly, subject: builtinSubject(c.Name)}
	return g.agentVerdict(t, c)
}

// agentVerdict is the final verdict on a call the agent runs itself.
// One whose arguments the agent did not show is never put to a person
// (they would approve what they cannot see) and never matched to a
// stored decision: under ask it is refused, saying why.
func (g *gate) agentVerdict(t *gatedTool, c harness.AgentCall) harness.Verdict {
	ref := g.callRef(t, c.Call)
	store := g.store
	if c.ArgsUnknown {
		ref.Key, ref.Args, store = "", "", nil
	}
	verdict, decision := g.decide(t, c.Name, c.Input, store, ref)
	var v harness.Verdict
	switch {
	case verdict == permission.VerdictAllow:
		v = harness.Allow()
	case verdict == permission.VerdictDeny && decision != nil:
		v = harness.Answer(harness.DeniedResult(declinedText(c.Name, decision.Reason)))
	case verdict == permission.VerdictDeny:
		v = harness.Answer(harness.DeniedResult(policyDeniedText(c.Name)))
	case c.ArgsUnknown:
		return harness.Answer(harness.DeniedResult(fmt.Sprintf("Tool call execution denied. This '%s' call needs a person's approval, and the agent did not say what its arguments are, so no one can be asked to approve it. Make the call again with its arguments stated.", c.Name)))
	default:
		return g.pause(runnel.InteractionApproval, c.Call, nil)
	}
	return answered(v, decision, c.ID)
}

// builtinSubject is what argument rules inspect in an agent's own tool,
// whose arguments come in the builtin's shape (harness.AgentCall): the
// command of Bash, the path of a file tool.
func builtinSubject(rule string) func(json.RawMessage) *string {
	member := "path"
	if rule == "Bash" {
		member = "command"
	}
	return func(args json.RawMessage) *string { return permission.StringMember(args, member) }
}

// pause parks the call behind an interaction, signed when the run has a
// secret, so a resume can prove its answer is for this very call. A stale
// call (its turn is over: the person wrote since) is superseded instead.
//
// A call whose arguments hold a secret of the run is answered instead of
// parked: the result shows its arguments redacted, the platform would
// replay "[REDACTED]", and the call would then run with that text or
// never verify. The model is told to leave the credential out; the
// platform holds it.
func (g *gate) pause(kind runnel.InteractionKind, c harness.Call, render json.RawMessage) harness.Verdict {
	if c.Resumed && g.stale[c.ID] {
		return harness.Answer(harness.DeniedResult(supersededText(c.Name)))
	}
	if g.holdsSecret != nil && g.holdsSecret(c.Input) {
		return harness.Answer(harness.TextResult(fmt.Sprintf(
			"Tool '%s' cannot be sent to the user: its arguments contain a credential of this run, which must never be shown. Retry the call without the credential in its arguments; the platform supplies credentials itself.",
			c.Name), true))
	}
	it := runnel.Interaction{
		ID: interactionID(c.ID), Kind: kind, ToolCallID: c.ID, ToolName: c.Name, Input: c.Input, Render: render,
		// What Agenta's frontend draws the request from; resolvedName is
		// the name a permission rule knows the tool by (Bash for bash).
		ToolCall: &runnel.InteractionToolCall{ToolCallID: c.ID, Title: c.Name, RawInput: signedInput(c.Input),
			ResolvedName: permission.CanonicalName(c.Name, nil)},
	}
	if kind == runnel.InteractionApproval {
		it.Options = approvalOptions()
	}
	if len(g.secret) > 0 {
		sig, err := permission.Sign(g.secret, it.ID, it.ToolCallID, it.ToolName, signedInput(c.Input), g.now())
		if err != nil {
			return harness.Answer(harness.TextResult(fmt.Sprintf(
				"Tool '%s' cannot be sent for approval: its arguments cannot be signed (%v). Retry the tool call with plain JSON arguments.",
				c.Name, err), true))
		}
		it.Signature = sig
	}
	return harness.Pause(it)
}

// fromTools is a tool's result as the loop reads it.
func fromTools(r tools.Result) harness.ToolResult {
	return harness.ToolResult{Output: r.Output, IsError: r.IsError}
}

// signedInput is a call's arguments as the interaction shows them: absent
// or null arguments are the empty object, as the loop reads them.
func signedInput(input json.RawMessage) json.RawMessage {
	if t := strings.TrimSpace(string(input)); t == "" || t == "null" {
		return json.RawMessage(`{}`)
	}
	return input
}

// The sentences a model reads when a call does not run. Each says what
// happened, whether retrying can change it, and what to do instead: a
// model given no next action invents one (a denied call retried in a
// reshaped form is the usual invention). They all start "Tool call
// execution denied." so a platform can recognise a denial.

func declinedText(name, reason string) string {
	s := fmt.Sprintf("Tool call execution denied. The user declined this '%s' call", name)
	if r := strings.TrimSpace(reason); r != "" {
		s += fmt.Sprintf(", saying: %q", r)
	}
	return s + ". This is their decision about this call, not a temporary block: do not send it again or a reshaped version of it; ask the user what they would like to do instead."
}

func policyDeniedText(name string) string {
	return fmt.Sprintf("Tool call execution denied. The permission policy of this run does not allow the tool '%s', whatever its arguments; this does not change while the conversation continues. Do not call it again; tell the user it is unavailable and ask what they would like to do instead.", name)
}

func supersededText(name string) string {
	return fmt.Sprintf("Tool call execution denied. The user sent a new message instead of answering the request to run this '%s' call, so it did not run. Answer their new message; call the tool again only if it still fits what they ask.", name)
}
