package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/runnel/runnel/internal/run"
	"github.com/runnel/runnel/internal/server"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the run failed, or serving stopped on an error
	exitUsage   = 2 // bad arguments or configuration
)

// Runner is what the commands need of the run manager.
type Runner interface {
	server.Runner
	Harnesses() []string
}

// Main is the whole program behind its process edges, so tests can run
// the real commands in-process (a daemon on 127.0.0.1:0 included).
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment; nil reads nothing.
	Getenv func(string) string
	// Listening, if set, is told the address `serve` listens on once it
	// accepts connections.
	Listening func(net.Addr)
	// NewRunner builds the runner; nil means internal/run's Manager.
	NewRunner func(*run.Options) Runner
}

// Run runs the command in args (without the program name) and returns the
// exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Getenv == nil {
		m.Getenv = func(string) string { return "" }
	}
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return m.serve(ctx, args[1:])
	case "run":
		return m.run(ctx, args[1:])
	case "mockllm":
		return m.mockllm(ctx, args[1:])
	case "demo":
		return m.demo(ctx, args[1:])
	case "agents":
		return m.agents(ctx, args[1:])
	case "version", "-version", "--version":
		fmt.Fprintln(m.Stdout, version)
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(m.Stdout, usage)
		return exitOK
	}
	fmt.Fprintf(m.Stderr, "runnel: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

func (m *Main) newRunner(o *run.Options) Runner {
	if m.NewRunner != nil {
		return m.NewRunner(o)
	}
	return run.NewManager(o)
}

func (m *Main) flagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("runnel "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "usage: %s\n\nflags (a flag wins over its variable):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, allowing flags after positional arguments (`runnel
// run req.json --stream`), and returns the positional arguments. done
// means the caller should exit with code (after -h, or a bad flag).
func parse(fs *flag.FlagSet, args []string) (positional []string, code int, done bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, true
			}
			return nil, exitUsage, true // the flag package has said why
		}
		if fs.NArg() == 0 {
			return positional, 0, false
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// fail reports a start-up error, one line per problem.
func (m *Main) fail(cmd string, err error) int {
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(m.Stderr, "runnel %s: %s", cmd, strings.TrimSuffix(line, "\n")+"\n")
	}
	return exitUsage
}

const usage = `runnel — an agent runner sidecar

usage:
  runnel demo [--addr ADDR] [--no-open] the whole main job in a browser, with a scripted model: no key, no network
  runnel serve [--playground] [flags]   serve POST /run, POST /stream, POST /v1/chat, GET /health, GET /v1/capabilities
  runnel run [FILE|-] [--stream] [--remote URL] [flags]
                                        run one request from FILE or stdin (on the runnel at URL with
                                        --remote); the result on stdout (NDJSON records with --stream);
                                        exit 0 when ok, 1 otherwise
  runnel mockllm [--script FILE] [--addr ADDR] [--tls-cert FILE --tls-key FILE]
                                        serve a scripted fake model (OpenAI, Anthropic and Gemini APIs)
  runnel agents list [--json]           the ACP agents runnel knows, and which are installed
  runnel agents install NAME...         install an agent's pinned npm package (claude, codex, gemini, opencode, pi)
  runnel version                        print the version
  runnel help                           print this help

Each flag has a RUNNEL_* variable; a flag wins over its variable. ` + "`runnel CMD -h`" + ` lists a command's flags.
  RUNNEL_HOST                 address to listen on (127.0.0.1); a non-loopback address requires a token
  RUNNEL_PORT                 port (8765)
  RUNNEL_TOKEN                bearer token required on every route but /health
  RUNNEL_TOKEN_FILE           file holding the token instead
  RUNNEL_PROFILES_FILE        run profiles a POST /v1/chat request may name (keys by reference)
  RUNNEL_CONCURRENCY_LIMIT    concurrent runs before 429 (64)
  RUNNEL_MAX_BODY_BYTES       largest request body (8MiB)
  RUNNEL_MAX_STEPS            model steps per run (50)
  RUNNEL_RUN_TIMEOUT          deadline of a whole run (10m)
  RUNNEL_IDLE_TIMEOUT         longest silence from the model within a step (2m)
  RUNNEL_FIRST_TOKEN_TIMEOUT  longest wait for a step's first chunk (2m)
  RUNNEL_TOOL_TIMEOUT         callback tool timeout when its spec sets none (30s)
  RUNNEL_MCP_CALL_TIMEOUT     MCP tool call timeout (2m)
  RUNNEL_SHUTDOWN_GRACE       time in-flight runs get to finish after SIGTERM (30s)
  RUNNEL_SHUTDOWN_DELAY       time to go on accepting after SIGTERM while /health answers 503 (0s)
  RUNNEL_WORKSPACE_ROOT       directory holding per-run workspaces (a private dir under the temp dir)
  RUNNEL_KEEP_WORKSPACES      keep workspaces after their runs (false)
  RUNNEL_INTERACTION_SECRET   sign interactions and refuse resumes that do not match (off)
  RUNNEL_MCP_HOST_ALLOWLIST   MCP hosts (host or host:port, comma-separated) allowed over http and on private addresses
  RUNNEL_AGENTS_DIR           where ACP agents are installed (~/.local/share/runnel/agents)
  RUNNEL_HARNESS_<NAME>_COMMAND
                              the command line of one ACP agent instead of the installed one
  RUNNEL_LOG_LEVEL            debug, info, warn or error (info)
  RUNNEL_LOG_FORMAT           json or text (json)
Durations are Go durations: 30s, 5m, 1h30m.
`
