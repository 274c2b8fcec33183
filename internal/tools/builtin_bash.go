package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/runnel/runnel/internal/sandbox"
)

func (b *builtins) bash() BuiltinTool {
	maxT := b.command.MaxTimeout
	if maxT <= 0 {
		maxT = sandbox.DefaultMaxCommandTimeout
	}
	defT := b.command.Timeout
	if defT <= 0 {
		defT = sandbox.DefaultCommandTimeout
	}
	defT = min(defT, maxT)
	return BuiltinTool{
		Name: "bash",
		Description: fmt.Sprintf("Run a shell command with /bin/sh -c in the workspace directory and return its "+
			"combined stdout and stderr and its exit code. Each call is a fresh shell: cd and variables do not carry "+
			"over, stdin is empty (nothing interactive), and background processes are killed when the command "+
			"returns. The timeout is %s unless timeout_ms says otherwise (at most %s); on timeout the command and "+
			"everything it started are killed. Long output keeps its beginning and end. Prefer read, edit, ls, find "+
			"and grep for files when they are available.", defT, maxT),
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","description":"The shell command to run."},` +
			`"timeout_ms":{"type":"integer","minimum":1,"description":"How long the command may run, in milliseconds."}` +
			`},"required":["command"]}`),
		Run: b.runBash,
		Subject: func(input json.RawMessage) *string {
			var args bashArgs
			if _, ok := decodeBuiltinArgs("bash", input, &args); !ok {
				return nil
			}
			return &args.Command
		},
	}
}

// bashArgs are bash's arguments, for Run and Subject alike.
type bashArgs struct {
	Command   string  `json:"command"`
	TimeoutMs flexInt `json:"timeout_ms"`
}

func (b *builtins) runBash(ctx context.Context, input json.RawMessage) Result {
	var args bashArgs
	if r, ok := decodeBuiltinArgs("bash", input, &args); !ok {
		return r
	}
	if strings.TrimSpace(args.Command) == "" {
		return missingArgs("bash", "command")
	}
	opts := b.command
	if args.TimeoutMs > 0 {
		opts.Timeout = time.Duration(args.TimeoutMs) * time.Millisecond
	}
	res, err := sandbox.RunCommand(ctx, b.ws, args.Command, &opts)
	switch {
	case err != nil && ctx.Err() != nil:
		return toolErrorf("The command was cancelled because the run ended; everything it started was killed.")
	case errors.Is(err, sandbox.ErrNotEnded):
		return textResult(appendNote(res.Output, "Some processes the command started could not be ended (they run as another user); the command's result is incomplete."), true)
	case err != nil:
		return toolErrorf("The command could not be started: %v.", err)
	}
	out := res.Output
	switch {
	case res.TimedOut:
		return textResult(appendNote(out, fmt.Sprintf("The command timed out after %s and was killed, with every process it started. "+
			"Give a longer timeout_ms (at most %s) or split the work into shorter commands.", res.Timeout, maxCommandTimeout(b.command))), true)
	case res.ExitCode != 0:
		return textResult(appendNote(out, fmt.Sprintf("Exit code: %d", res.ExitCode)), true)
	case out == "":
		return textResult("(no output)", false)
	}
	return textResult(out, false)
}

func maxCommandTimeout(o sandbox.CommandOptions) time.Duration {
	if o.MaxTimeout <= 0 {
		return sandbox.DefaultMaxCommandTimeout
	}
	return o.MaxTimeout
}

// appendNote appends a note after the output, on a line of its own.
func appendNote(out, note string) string {
	switch {
	case out == "":
		return note
	case strings.HasSuffix(out, "\n"):
		return out + "\n" + note
	}
	return out + "\n\n" + note
}
