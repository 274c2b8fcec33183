// Package native is runnel's own agent loop: it calls a model, runs the
// tool calls the model makes, feeds the results back, and repeats until the
// model answers without calling a tool, a step limit is reached, or a tool
// call must wait for someone outside the run (a pause).
//
// A run of the loop is a for over explicit phases (loop.go): resume, call
// the model, run its tools, finish. Resume (resume.go) settles the calls a
// previous, paused turn left waiting (Turn.Parked), through the same
// Dispatcher, and then puts every tool result of the replayed history right
// after the call it answers (history.go), as every model API requires.
//
// The loop knows nothing about HTTP or a vendor API. It talks to a Model
// (one streaming method, which every provider adapter has) and to a
// Dispatcher that decides what becomes of each tool call:
//
//	out, err := native.Run(ctx, &native.Turn{
//		Model:      model,
//		ModelID:    "gpt-5",
//		System:     system,
//		Messages:   history,
//		Tools:      tools,
//		Dispatcher: dispatcher,
//	}, sink)
//	fmt.Println(out.StopReason, out.Output)
//
// Events go to the sink as they happen (message and thought parts, tool
// calls and results, interaction requests, per-step usage, done). A failure
// is returned as an error with the partial Outcome; the caller reports it.
//
// The loop does not decide permissions: the Dispatcher does (the one
// internal/harness defines for every harness), and answers each call with
// a harness.Verdict (Execute, Answer or Pause). When a model step has a
// paused call, the step's other runnable calls are settled with
// harness.Deferred and the turn ends paused with one interaction per
// paused call.
package native

import (
	"context"
	"log/slog"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/provider"
)

// Model streams one model call. provider.Model satisfies it; the loop needs
// nothing else of a provider.
type Model interface {
	Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error)
}

// Turn is everything one run of the loop needs.
type Turn struct {
	Model Model
	// ModelID is the model id sent to the API, without provider prefix.
	ModelID string
	// System is the whole system prompt (see SystemPrompt).
	System string
	// Messages is the conversation so far, without system-role messages.
	Messages []runnel.Message
	// Tools are advertised to the model; a call to any other name is
	// answered with a tool error.
	Tools      []provider.Tool
	Dispatcher harness.Dispatcher
	// Parked are tool_call blocks of Messages that a paused turn left
	// waiting for a person or a browser (DESIGN §5.4). Before it calls the
	// model, the loop emits each again as a tool_call, gives it its verdict
	// from the Dispatcher, and answers it in a tool message; a call the
	// Dispatcher pauses again ends the turn paused without a model call.
	// Unlike a model step, the answered calls run even when another one
	// pauses: a person approved them, and nothing is left to wait for.
	// The result the loop adds is what the model reads for each: it
	// replaces any other answer Messages holds for the call (a browser's
	// output block) and approval blocks are never shown to the model.
	Parked []runnel.Block
	// MaxSteps caps model calls (default 50).
	MaxSteps int
	// MaxTokens caps one model answer (0: the adapter's default).
	MaxTokens int
	// MaxStepBytes and MaxRunBytes cap what the model may stream, in one
	// step and over the whole run: text, reasoning and tool arguments
	// (defaults DefaultMaxStepBytes, DefaultMaxRunBytes). A model that
	// goes past either fails the run: without a cap, a provider that
	// streams without end grows memory until the run's deadline.
	MaxStepBytes int64
	MaxRunBytes  int64
	// Parallel caps the tool calls of one step that run at once (default 4).
	Parallel int
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Outcome is what a run of the loop added and how it ended.
type Outcome struct {
	// Messages are the assistant and tool messages this turn added.
	Messages []runnel.Message
	// Output is the last assistant text of the turn.
	Output string
	// Usage is the sum over every model call.
	Usage runnel.Usage
	// StopReason is runnel.StopEndTurn, StopMaxSteps or StopPaused (empty
	// when the run failed).
	StopReason string
	// Steps counts model calls.
	Steps int
	// Interactions are what a paused turn waits for.
	Interactions []runnel.Interaction
}
