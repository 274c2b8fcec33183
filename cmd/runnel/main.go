// Command runnel is the agent-runner sidecar: `runnel serve` is the HTTP
// daemon, `runnel run` runs one request from a file or stdin, `runnel
// mockllm` serves a scripted fake model, `runnel version` prints the
// version. Configuration comes from flags and RUNNEL_* variables, read
// once in Main (see `runnel help`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/runnel/runnel/internal/sandbox"
)

// version is set at build time with -ldflags "-X main.version=…"; the
// linker can only set a variable, so this is the one package variable.
var version = "0.1.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		// Inside an isolated sandbox, before anything else: bwrap runs
		// runnel's own binary as the sandbox's init.
		os.Exit(sandbox.Init(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a drain, a second one kills the process
	// the default way, for when the drain takes too long for the operator.
	context.AfterFunc(ctx, stop)
	if err := makeUndumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "runnel:", err)
		os.Exit(exitFailure)
	}
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	code := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
