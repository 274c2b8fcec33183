// Package acp runs a turn on an external coding agent (Claude Code,
// Codex, Pi, Gemini CLI, opencode) over the Agent Client Protocol:
// JSON-RPC 2.0, one object per line, on the agent's stdin and stdout
// (DESIGN §7).
//
// A turn, in the order Run takes it:
//
//   - runnel's own MCP server for the run (toolserver.go) starts on a
//     loopback port with a random bearer token. It advertises the run's
//     tools with their real schemas, and every tools/call goes through the
//     run's one gate (harness.Dispatcher).
//   - the Launcher writes the agent's config into a HOME of its own and
//     says how to start it; the agent starts contained in the run's
//     workspace (sandbox.StartProcess), with only the environment the
//     Launcher grants.
//   - initialize, session/new (runnel's server and the user's HTTP MCP
//     servers), the session mode that routes gated calls through
//     session/request_permission, then one session/prompt.
//   - while the prompt runs, session/update notifications become events
//     (session.go), the agent's permission requests go to the gate
//     (harness.Permitter), and its tool-call frames are tied to runnel's
//     calls by name and arguments (calls.go).
//   - a pause never answers the gate: runnel cancels the session, answers
//     the pending request "cancelled" (or gives a paused tools/call no
//     response at all), drains the agent's last events and settles every
//     call still open with harness.Deferred.
//   - the agent's whole process tree, its HOME and the MCP server are gone
//     when Run returns.
//
// The package keeps no state between turns: a resumed turn is a fresh
// session whose prompt is the conversation rendered as text (History),
// and the gate answers the re-issued call from the replayed answers.
package acp

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/sandbox"
)

// The documented defaults of Timeouts and Turn.
const (
	DefaultInitializeTimeout = 60 * time.Second
	DefaultSessionTimeout    = 60 * time.Second
	DefaultIdleTimeout       = 5 * time.Minute
	// DefaultDrainTimeout bounds the wait for a cancelled prompt to end.
	DefaultDrainTimeout = 10 * time.Second
	// DefaultExitGrace is how long an agent whose input closed may take to
	// exit by itself before it is killed.
	DefaultExitGrace = 2 * time.Second
	// DefaultMaxOutputBytes caps what an agent may stream in one turn
	// (text, thoughts, tool-call frames).
	DefaultMaxOutputBytes = 32 << 20
	// MaxLineBytes is the longest JSON-RPC line runnel reads from an agent
	// (the ACP SDK's bound); a longer one ends the turn.
	MaxLineBytes = 10 << 20
)

// ServerName is the name runnel's own MCP server has in session/new, so
// the agent calls its tools mcp__runnel__<tool> (or its own spelling).
const ServerName = "runnel"

// Turn is everything one ACP turn needs.
type Turn struct {
	// Agent prepares the agent's start once runnel's MCP server is up.
	Agent Launcher
	// Workspace is the agent's working directory; its Containment ends
	// the agent's processes.
	Workspace *sandbox.Workspace
	// Prompt is what the agent is asked: text and image blocks.
	Prompt []runnel.Block
	// Tools are the run's tools, served on runnel's MCP server.
	Tools []Tool
	// Servers are the user's HTTP MCP servers, passed through to the agent.
	Servers []Server
	// Forwards are the host loopback addresses ("127.0.0.1:8080") the
	// agent must reach from a network-confined workspace (its model, the
	// user's MCP servers): the sandbox forwards each through the run's
	// egress proxy, whose allowlist decides (sandbox.Isolation.Forwards).
	Forwards []string
	// Gate decides every call: the agent's permission requests (Permit)
	// and the tools/call requests runnel's server receives (Dispatch).
	Gate Gate
	// Notices are emitted once the agent has started and can take the
	// turn (nothing is emitted before a refusal).
	Notices []string
	// Timeouts bound each stage; zero fields are the defaults.
	Timeouts Timeouts
	// MaxOutputBytes caps what the agent may stream (default
	// DefaultMaxOutputBytes); past it the turn fails.
	MaxOutputBytes int64
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Gate is the run's one permission gate, as both ACP paths ask it.
type Gate interface {
	harness.Dispatcher
	harness.Permitter
}

// Timeouts bound the stages of a turn.
type Timeouts struct {
	// Initialize bounds the agent's start up to its initialize answer.
	Initialize time.Duration
	// Session bounds session/new and session/set_mode.
	Session time.Duration
	// Idle bounds a prompt's silence: no frame from the agent and no tool
	// call running for this long fails the turn.
	Idle time.Duration
	// Drain bounds the wait for a cancelled prompt to end.
	Drain time.Duration
	// ExitGrace is how long the agent may take to exit once its input
	// closes, before it is killed.
	ExitGrace time.Duration
}

// Tool is one of the run's tools, as runnel's MCP server advertises it.
type Tool struct {
	Name        string
	Description string
	// Schema is the tool's JSON Schema for its arguments (an object).
	Schema json.RawMessage
}

// Server is a user MCP server the agent connects to itself.
type Server struct {
	Name    string
	URL     string
	Headers map[string]string
}

// Endpoint is runnel's MCP server for one turn, as a Launcher hands it to
// an agent that takes its tools through its own config (Pi).
type Endpoint struct {
	URL     string
	Headers map[string]string
	Tools   []Tool
}

// Launcher prepares an agent's start.
type Launcher interface {
	// Launch writes what the agent needs to start offline (its config in a
	// HOME of its own) and returns its command line. server is runnel's
	// MCP server for the turn.
	Launch(ctx context.Context, server Endpoint) (*Launch, error)
}

// Launch is how to start one agent, and what to set once it runs.
type Launch struct {
	// Name is the harness, for messages ("claude").
	Name string
	Argv []string
	// Env is the agent's whole environment.
	Env []string
	// Mode is set with session/set_mode after session/new when the agent
	// offers it and is not in it already; empty keeps the agent's mode.
	Mode string
	// ReadOnly and Writable are the host directories the agent needs in
	// an isolated sandbox: its installation, read-only; its HOME.
	ReadOnly, Writable []string
	// ToolsInConfig says the agent receives runnel's tools through the
	// config Launch wrote (Pi's extension), not through mcpServers, so it
	// needs no MCP capability for them.
	ToolsInConfig bool
	// Cleanup removes what Launch wrote; Run calls it once the agent is
	// gone. Nil means nothing to remove.
	Cleanup func() error
}

// Outcome is what a turn added and how it ended.
type Outcome struct {
	// Messages are the assistant and tool messages the turn added.
	Messages []runnel.Message
	// Output is the agent's last text of the turn.
	Output string
	// Usage is what the agent reported, if it did.
	Usage runnel.Usage
	// StopReason is runnel.StopEndTurn, StopMaxSteps, StopPaused or
	// StopCancelled (empty when the turn failed).
	StopReason string
	// Interactions are what a paused turn waits for.
	Interactions []runnel.Interaction
	// Agent is the agent's name and version, as it introduced itself.
	Agent string
	// Emitted counts the events the turn emitted: a refusal comes before
	// any.
	Emitted int
}

func (t *Timeouts) withDefaults() Timeouts {
	o := *t
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&o.Initialize, DefaultInitializeTimeout)
	set(&o.Session, DefaultSessionTimeout)
	set(&o.Idle, DefaultIdleTimeout)
	set(&o.Drain, DefaultDrainTimeout)
	set(&o.ExitGrace, DefaultExitGrace)
	return o
}
