package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The two tools code mode adds to a run (DESIGN §4.7), and what the model is
// told about them.
const (
	ListToolsName = "list_mcp_tools"
	RunScriptName = "run_mcp_script"

	ListToolsDescription = "List the MCP tools available to run_mcp_script, as JavaScript function signatures with JSDoc. Call it before writing a script."
	RunScriptDescription = "Run a JavaScript script (plain JavaScript, not TypeScript) in a fresh sandbox where each MCP tool is an async function tools.<server>.<tool>(args); see list_mcp_tools. The script is the body of an async function: await the tools and return the value you want back. Returns {result, logs, error?}; console.log output is captured in logs. Use it to chain many tool calls or to filter large results before they reach you."

	// ListToolsSchema is list_mcp_tools' input schema.
	ListToolsSchema = `{"type":"object","properties":{}}`
)

// RunScriptSchema is run_mcp_script's input schema. It tells the model the
// budget a script gets when it passes no timeoutMs, which the platform may
// set (codeMode.timeoutMs).
func RunScriptSchema(defaultTimeout time.Duration) string {
	return fmt.Sprintf(`{"type":"object","properties":{"script":{"type":"string","description":"JavaScript: the body of an async function. await the tools, return the result."},"timeoutMs":{"type":"integer","description":"Wall-clock budget for the whole script in milliseconds (default %d, at most %d)."}},"required":["script"]}`,
		defaultTimeout.Milliseconds(), MaxTimeout.Milliseconds())
}

// Defaults and limits of Options.
const (
	DefaultTimeout            = 30 * time.Second
	MaxTimeout                = 120 * time.Second
	DefaultMemoryLimit        = 64 << 20
	DefaultMaxLogBytes        = 64 << 10
	DefaultMaxResultBytes     = 256 << 10
	DefaultMaxConcurrentCalls = 16

	DefaultAbandonGrace = time.Second
)

// ScriptInput is the input of run_mcp_script.
type ScriptInput struct {
	Script    string `json:"script"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// Tool is one MCP tool a script may call as tools.<Server>.<Name>(args).
type Tool struct {
	Server      string
	Name        string
	Description string
	InputSchema json.RawMessage
	// OutputSchema, when the server declares one, types the promise in the
	// listing; the Caller should then return the structured content.
	OutputSchema json.RawMessage
}

// CallResult is what a tool call produced: its content as text (JSON when
// the tool returned structured content) and whether the tool reported an
// error. In the script the call resolves to the parsed JSON when Content is
// JSON and to the string otherwise; IsError rejects it with an Error whose
// message is Content.
type CallResult struct {
	Content string
	IsError bool
}

// Caller runs the tool calls a script makes. The run implements it and
// applies the same permission gates as for direct calls. It must be safe for
// concurrent use: a script's calls run in parallel (up to
// Options.MaxConcurrentCalls). It must honour ctx, which is cancelled when
// the script returns or its budget ends, so that nothing the script started
// goes on afterwards.
//
// An error rejects the call in the script with the error's text. A call that
// cannot run without a person (it needs approval, or it is a client tool)
// returns a *Refusal, whose text tells the model to make that call directly.
type Caller interface {
	CallTool(ctx context.Context, server, tool string, args json.RawMessage) (CallResult, error)
}

// CallerFunc adapts a function to a Caller.
type CallerFunc func(ctx context.Context, server, tool string, args json.RawMessage) (CallResult, error)

// CallTool calls f.
func (f CallerFunc) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (CallResult, error) {
	return f(ctx, server, tool, args)
}

// Refusal is the error a Caller returns for a call a script cannot make
// because it would have to pause: a script cannot wait for a person. The
// model has to make the call directly, where the run can pause for it.
type Refusal struct {
	Server, Tool string
	// Direct is the tool's name as the model calls it outside scripts,
	// e.g. mcp__memory__delete.
	Direct string
	// ClientTool says the tool runs in the user's client; otherwise it
	// needs the user's approval.
	ClientTool bool
}

func (r *Refusal) Error() string {
	direct := r.Direct
	if direct == "" {
		direct = "it"
	}
	if r.ClientTool {
		return fmt.Sprintf("Tool %s.%s runs in the user's client; scripts cannot wait for it. Call %s directly (outside %s) instead.",
			r.Server, r.Tool, direct, RunScriptName)
	}
	return fmt.Sprintf("Tool %s.%s needs the user's approval; scripts cannot pause for approval. Call %s directly (outside %s) so the user can approve it.",
		r.Server, r.Tool, direct, RunScriptName)
}

// Options configures Run. A zero or negative field means its default.
type Options struct {
	// Timeout is the one wall-clock budget for the synchronous and the
	// asynchronous parts of the script together (default DefaultTimeout,
	// clamped to MaxTimeout).
	Timeout time.Duration
	// MemoryLimit caps the sandbox's heap in bytes (default DefaultMemoryLimit).
	MemoryLimit int64
	// MaxLogBytes caps the captured console output (default DefaultMaxLogBytes).
	MaxLogBytes int
	// MaxResultBytes caps the JSON of the script's return value
	// (default DefaultMaxResultBytes).
	MaxResultBytes int
	// MaxConcurrentCalls caps the tool calls in flight at once; more wait
	// their turn (default DefaultMaxConcurrentCalls).
	MaxConcurrentCalls int
	// AbandonGrace is how long Run waits, after the budget ends, for the
	// engine to stop before it returns without it (default
	// DefaultAbandonGrace).
	AbandonGrace time.Duration
	// Limiter, shared by every Run of the process, bounds the sandboxes
	// still running after their Run returned (see Limiter); nil means no
	// bound.
	Limiter *Limiter
	// Warm, shared by every Run of the process, keeps sandboxes ready
	// before scripts ask for them (see Warm); nil builds each one when its
	// script asks.
	Warm *Warm
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	r.Timeout = min(r.Timeout, MaxTimeout)
	if r.MemoryLimit <= 0 {
		r.MemoryLimit = DefaultMemoryLimit
	}
	if r.MaxLogBytes <= 0 {
		r.MaxLogBytes = DefaultMaxLogBytes
	}
	if r.MaxResultBytes <= 0 {
		r.MaxResultBytes = DefaultMaxResultBytes
	}
	if r.MaxConcurrentCalls <= 0 {
		r.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if r.AbandonGrace <= 0 {
		r.AbandonGrace = DefaultAbandonGrace
	}
	return r
}

// Output is what run_mcp_script returns to the model.
type Output struct {
	// Result is the JSON of the script's return value (undefined is null);
	// null when the script failed.
	Result json.RawMessage `json:"result"`
	// Logs is the captured console output, one entry per call, never nil.
	Logs []string `json:"logs"`
	// Error says why the script failed, for the model to read.
	Error string `json:"error,omitempty"`
	// Failure classifies Error for the run's logs and metrics; the model
	// does not see it.
	Failure Failure `json:"-"`
}

// Failure is why a script failed.
type Failure string

// The failures. A script failure is the script's own error: it threw, its
// promise rejected, its result cannot be sent back, or it waited for
// something that can never happen. A busy failure is a script not run
// because Options.Limiter's bound on abandoned sandboxes is reached.
const (
	FailureNone      Failure = ""
	FailureScript    Failure = "script"
	FailureTimeout   Failure = "timeout"
	FailureCancelled Failure = "cancelled"
	FailureMemory    Failure = "memory"
	FailureInternal  Failure = "internal"
	FailureBusy      Failure = "busy"
)

// Run runs script in a fresh sandbox where each of tools is an async
// function calling caller, and returns its result, its console output, or
// why it failed. Script failures are in the Output, for the model; Run
// itself never fails. When Run returns, every tool call the script started
// has returned, and no call can start any more.
//
// Run returns within the budget plus Options.AbandonGrace. The sandbox is normally
// gone by then too (with Options.Warm, its goroutine closes it right after),
// but the engine checks for an interrupt only between
// calls and loop iterations, so one long built-in call (a naive string
// search in megabytes of text, a sort of a million elements) runs to its
// end; Run then returns without it, and its goroutine closes the VM when
// the engine stops. Such a goroutine holds memory up to
// Options.MemoryLimit and a CPU, and nothing else: it cannot start a call.
// (A script that catches out-of-memory errors in a loop can make it last:
// an interrupt that cannot allocate its error becomes a catchable
// out-of-memory error.) Options.Limiter bounds how many such goroutines
// there are: while they are at its bound, Run refuses at once.
//
// Run is safe for concurrent use; each call has its own sandbox.
func Run(ctx context.Context, script string, tools []Tool, caller Caller, opts *Options) Output {
	return runWith(ctx, script, tools, caller, opts, hooks{})
}
