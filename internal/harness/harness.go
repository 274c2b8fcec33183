// Package harness is the vocabulary every harness shares with the
// permission gate: a tool call (Call), what becomes of it (Verdict), and
// what the agent reads back (ToolResult). The native loop
// (internal/harness/native) and the ACP harness (internal/harness/acp) ask
// the same Dispatcher about every call, so a policy, a stored decision, a
// browser's output, the superseded rule and signing mean the same thing
// whichever harness runs the turn (DESIGN §7: one gate for both).
//
// A Dispatcher answers two questions:
//
//   - Dispatch: runnel itself is about to run the call (a native model's
//     call, or a tools/call on runnel's internal MCP server). The verdict
//     runs it (Execute), answers it without running (Answer: a denial, a
//     stored output) or pauses the turn (Pause).
//   - Permit (Permitter): an ACP agent asks leave to run a call itself (its
//     own Bash, a user MCP server's tool) or to call one of runnel's tools
//     it will then send to Dispatch. The verdict allows it (Allow), refuses
//     it (Answer with a denial) or pauses the turn.
package harness

import (
	"context"
	"encoding/json"

	"github.com/runnel/runnel"
)

// Call is one tool call, with arguments already checked to be a JSON
// object that has every required field, and that can be read only one
// way (CheckArgs).
type Call struct {
	ID    string
	Name  string
	Input json.RawMessage
	// Resumed marks a call a paused turn left waiting that the harness is
	// settling, as opposed to a call the model made in this run. Providers
	// may reuse ids, so a Dispatcher that treats parked calls specially
	// must not take a new call for a parked one because the ids agree.
	Resumed bool
	// Reissued marks a call of an external agent, whose ids are its own:
	// after a cold resume it makes an answered call again under a new id,
	// so the answer is matched by the call's name and arguments alone.
	Reissued bool
}

// ToolResult is what the model reads back for one call.
type ToolResult struct {
	// Output is JSON; a tool that produces text returns a JSON string.
	Output json.RawMessage
	// IsError marks a failure the model should see and may correct.
	IsError bool
	// Denied marks a call a person or the policy declined (IsError too);
	// the tool_result event says so.
	Denied bool
}

// TextResult is a ToolResult holding text.
func TextResult(text string, isError bool) ToolResult {
	return ToolResult{Output: runnel.TextOutput(text), IsError: isError}
}

// DeniedResult is the answer to a call that was declined: an error the
// model reads, marked as a denial for the caller.
func DeniedResult(text string) ToolResult {
	return ToolResult{Output: runnel.TextOutput(text), IsError: true, Denied: true}
}

// ToolFunc executes one call. It must return when ctx is done. A failure is
// a ToolResult with IsError, never a panic (a harness catches a panic and
// answers it as an internal tool error all the same).
type ToolFunc func(ctx context.Context) ToolResult

// Verdict is what becomes of one tool call: it is executed (Execute),
// allowed to run in the agent (Allow), answered without executing (Answer:
// a denial or a stored output), or it pauses the turn for a person or a
// browser (Pause).
type Verdict struct {
	run    ToolFunc
	allow  bool
	result ToolResult
	pause  *runnel.Interaction
	// answer is an answer the Dispatcher consumed to reach the verdict.
	answer *runnel.InteractionAnswer
}

// Execute is the verdict of a call runnel runs now.
func Execute(fn ToolFunc) Verdict { return Verdict{run: fn} }

// Allow is the verdict of a call the agent may run itself (Permit only).
func Allow() Verdict { return Verdict{allow: true} }

// Answer is the verdict of a call answered without running anything.
func Answer(r ToolResult) Verdict { return Verdict{result: r} }

// Pause is the verdict of a call that must wait for the interaction.
func Pause(it runnel.Interaction) Verdict { return Verdict{pause: &it} }

// Answered is v, reporting that the Dispatcher reached it on a person's
// answer that the replayed conversation carried: the harness emits it as
// an interaction_response before the call's result, so the platform can
// settle the request it showed.
func (v Verdict) Answered(a runnel.InteractionAnswer) Verdict {
	v.answer = &a
	return v
}

// Run is the function an Execute verdict runs; nil for any other verdict.
func (v Verdict) Run() ToolFunc { return v.run }

// Allowed reports an Allow verdict.
func (v Verdict) Allowed() bool { return v.allow }

// Result is an Answer verdict's result (the zero ToolResult otherwise).
func (v Verdict) Result() ToolResult { return v.result }

// Interaction is what a Pause verdict waits for; nil for any other verdict.
func (v Verdict) Interaction() *runnel.Interaction { return v.pause }

// Answer is the person's answer the verdict was reached on, if any.
func (v Verdict) Answer() *runnel.InteractionAnswer { return v.answer }

// Dispatcher decides the verdict of each call runnel is to run. Dispatch
// must not have side effects a pause would have to undo: those belong in
// the ToolFunc it returns. The native loop calls it once per call, in call
// order, from one goroutine; the ACP harness calls it as the agent's
// tools/call requests arrive, possibly at once.
type Dispatcher interface {
	Dispatch(ctx context.Context, call Call) Verdict
}

// DispatcherFunc adapts a function to a Dispatcher.
type DispatcherFunc func(ctx context.Context, call Call) Verdict

// Dispatch calls f(ctx, call).
func (f DispatcherFunc) Dispatch(ctx context.Context, call Call) Verdict { return f(ctx, call) }

// Deferred settles a call that was not executed because its turn paused,
// so the next turn never sees an unanswered call (DESIGN §5.3).
const Deferred = "DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required."

// Owner says whose tool an agent's call is.
type Owner string

// The owners of the calls an ACP agent asks leave for.
const (
	// OwnerRunnel: one of the run's tools, which the agent reaches through
	// runnel's MCP server (or Pi's extension); runnel runs it once the
	// agent calls it, through Dispatch.
	OwnerRunnel Owner = "runnel"
	// OwnerServer: a tool of a user MCP server passed through to the agent.
	OwnerServer Owner = "server"
	// OwnerAgent: one of the agent's own tools (Claude's Bash, Pi's edit).
	OwnerAgent Owner = "agent"
)

// AgentCall is a call an agent asks leave to make (ACP
// session/request_permission), named the way the permission plan knows
// the tool: the run's tool name, "mcp__<server>__<tool>", or a builtin's
// rule name (Bash, Read, Write, Edit, Ls, Find, Grep, …) with its
// arguments in the builtin's own shape ({"command"} for Bash, {"path"}
// for the file tools).
type AgentCall struct {
	Call
	Owner Owner
	// Server is the user MCP server of an OwnerServer call.
	Server string
	// Title is the agent's own label for the call, shown to a person.
	Title string
	// ReadOnly is what runnel knows of a builtin's effects; nil is unknown.
	ReadOnly *bool
	// ArgsUnknown says the agent asked without saying with what arguments
	// (opencode sends {} and fills them in later): no person can be asked
	// to approve such a call, and no stored decision can be matched to it.
	ArgsUnknown bool
}

// Permitter decides an agent's request for leave to make a call: Allow,
// Answer with a denial (the agent is told no), or Pause. For an
// OwnerRunnel call it only looks (a stored decision stays for the
// Dispatch that follows); for any other call the verdict is final, and a
// stored decision it used is spent.
type Permitter interface {
	Permit(ctx context.Context, call AgentCall) Verdict
}
