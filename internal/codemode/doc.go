// Package codemode is code mode (DESIGN §4.7): the JavaScript sandbox that
// runs a model-written script over a run's MCP tools, and the listing that
// tells the model what it can call.
//
//	limiter := codemode.NewLimiter(0)     // once, in main, shared by every run
//	warm := codemode.NewWarm(nil)         // likewise; warm.Close() at shutdown
//	listing := codemode.ListTools(tools)  // the list_mcp_tools output
//	out := codemode.Run(ctx, in.Script, tools, caller, &codemode.Options{
//		Timeout: time.Duration(in.TimeoutMs) * time.Millisecond,
//		Limiter: limiter,
//		Warm:    warm,
//	})
//	// out is {result, logs, error?}: the run_mcp_script output
//
// The package knows nothing of MCP: tools are names and schemas, and the run
// passes a Caller that applies its permission gates and calls the server.
//
// # The sandbox
//
// Every Run gets a new QuickJS VM (modernc.org/quickjs, pure Go), which no
// other script ever sees. Without a Warm it is built when Run starts and
// closed before Run returns; a Warm builds it before the script asks for it
// and closes it right after Run returns, in its own goroutine, so that
// neither is on the script's path. Before the script runs, every global not
// on an allow-list of pure built-ins is deleted (eval, SharedArrayBuffer,
// Atomics, WeakRef and FinalizationRegistry among them; QuickJS brings no
// require, process, fetch, timers or WebAssembly), the Function,
// AsyncFunction, GeneratorFunction and AsyncGeneratorFunction constructors
// are replaced by throwers wherever they are reachable, and the module loader
// refuses every import(). quickjs exposes no switch to build a context
// without eval, so this happens in a prelude script; see prelude.
// What is left is tools.<server>.<tool>(args), a console whose output is
// captured and capped, and the language.
//
// # One budget
//
// Options.Timeout is one wall-clock budget for the whole script. Go drives
// the event loop: it runs the script's synchronous part, then the job queue,
// then waits for a tool call to finish, settles its promise, and drains the
// queue again. Each entry into JS gets what is left of the budget as the
// engine's eval timeout, which interrupts a synchronous loop, an async loop
// that never yields to Go, and a catastrophic regular expression alike; the
// waits between entries end with the budget's context, which also cancels
// the tool calls. The memory limit is the engine's: a script that exceeds it
// fails with an error, and the process is not at risk.
//
// # Nothing outlives the script
//
// When the script's promise settles, no further call starts (a promise chain
// still running gets a rejection instead), the calls in flight are cancelled
// through their context and waited for, and the VM is closed. The one
// exception is a VM stuck in a single long built-in call, which the engine
// cannot interrupt: Run returns without it after Options.AbandonGrace, and
// its goroutine closes it when the built-in ends. A Limiter, shared by the
// process, bounds how many of those there are by refusing new scripts
// (FailureBusy) while they are at its bound. A Caller that
// refuses a call because it would need a person (approval, a client tool)
// returns a *Refusal, and the call rejects in the script with a sentence
// telling the model to make that call directly: a script cannot pause.
package codemode
