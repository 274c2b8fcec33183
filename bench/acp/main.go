// Command acp measures what runnel costs when it runs an external coding
// agent over ACP (docs/benchmarks.md, "Benchmark 3"), with two benchmarks
// in one invocation, each against a peer measured alongside it:
//
//   - first text: for each installed agent among -harness, the time from
//     starting a turn to the agent's first text and to the turn's end,
//     "alone" (this program starts the agent with runnel's own launch
//     recipe and speaks ACP to it directly) against "through runnel" (a
//     POST /run to `runnel serve`, read as NDJSON). The model is the
//     scripted internal/llmtest server, on loopback.
//   - tool call: one MCP tool round trip from inside the agent to the
//     platform's tool callback and back, through runnel's own MCP server
//     (the fake ACP agent makes -calls sequential calls in one turn)
//     against an emulation of Agenta's file relay, which polls a directory
//     every 300 ms on both sides.
//
// Contestants alternate within each round, the order rotating from round
// to round; every figure is reported beside its peer's from the same
// invocation, CPU time beside wall time.
//
// The real agents must not reach the network: run it through
// bench/acp.sh, which builds runnel and the fake agent and runs this
// program inside a network namespace holding only loopback. By hand:
//
//	go build -o /tmp/b/runnel ./cmd/runnel
//	go build -o /tmp/b/fakeagent ./internal/harness/acp/fakeagent
//	go build -o /tmp/b/acpbench ./bench/acp
//	unshare -n sh -c 'ip link set lo up && exec /tmp/b/acpbench -runnel /tmp/b/runnel -fakeagent /tmp/b/fakeagent'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

type config struct {
	runnelBin, fakeAgentBin string
	agentsDir               string
	harnesses               []string
	benches                 []string
	rounds                  int // first text: timed turns per contestant and agent
	toolRounds, calls       int // tool call: rounds, and calls per turn
	poll                    time.Duration
	jsonOut                 string
	timeout                 time.Duration
	requireNetns            bool
}

// The two benchmarks, as -bench names them.
const (
	benchFirstText = "first-text"
	benchToolCall  = "tool-call"
	benchIsolated  = "isolated"
)

func main() {
	var cfg config
	var harnesses, benches string
	relayRole := flag.Bool("relay-serve", false, "internal: run the file-relay emulation, driven over stdin and stdout")
	relayDir := flag.String("relay-dir", "", "internal: the relay directory (with -relay-serve)")
	callback := flag.String("callback", "", "internal: the tool callback URL (with -relay-serve)")
	flag.StringVar(&cfg.runnelBin, "runnel", "", "runnel binary (required)")
	flag.StringVar(&cfg.fakeAgentBin, "fakeagent", "", "fake ACP agent binary, go build ./internal/harness/acp/fakeagent (required for tool-call)")
	flag.StringVar(&cfg.agentsDir, "agents", os.Getenv("RUNNEL_AGENTS_DIR"), "agents directory (`runnel agents install` puts them there); nothing is installed")
	flag.StringVar(&harnesses, "harness", "claude,codex,pi", "agents to time for first-text; missing ones are skipped")
	flag.StringVar(&benches, "bench", benchFirstText+","+benchToolCall, "benchmarks to run ("+benchIsolated+": each agent through runnel on the local sandbox against the isolated one)")
	flag.IntVar(&cfg.rounds, "rounds", 5, "first-text: timed turns per agent and contestant (after one untimed)")
	flag.IntVar(&cfg.toolRounds, "tool-rounds", 5, "tool-call: rounds (a turn per contestant each, after one untimed)")
	flag.IntVar(&cfg.calls, "calls", 20, "tool-call: sequential tool calls per turn")
	flag.DurationVar(&cfg.poll, "poll", 300*time.Millisecond, "tool-call: the relay's poll interval (Agenta's RELAY_POLL_MS)")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "give up after this long")
	flag.BoolVar(&cfg.requireNetns, "require-netns", true, "refuse to start real agents unless this network namespace holds only loopback")
	flag.Parse()
	cfg.harnesses = splitList(harnesses)
	cfg.benches = splitList(benches)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *relayRole {
		if err := serveRelay(ctx, *relayDir, *callback, cfg.poll, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "acp relay:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := bench(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "acp:", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, cfg config) error {
	for _, b := range cfg.benches {
		if b != benchFirstText && b != benchToolCall && b != benchIsolated {
			return fmt.Errorf("unknown -bench %q (want %s, %s, %s)", b, benchFirstText, benchToolCall, benchIsolated)
		}
	}
	switch {
	case cfg.runnelBin == "":
		return errors.New("-runnel is required")
	case cfg.rounds < 1 || cfg.toolRounds < 1 || cfg.calls < 1 || cfg.poll <= 0:
		return errors.New("-rounds, -tool-rounds, -calls and -poll must be positive")
	}
	tmp, err := os.MkdirTemp("", "runnel-bench-acp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	rep := &report{}
	if slices.Contains(cfg.benches, benchFirstText) {
		if rep.FirstText, err = runFirstText(ctx, cfg, tmp); err != nil {
			return fmt.Errorf("first text: %w", err)
		}
	}
	if slices.Contains(cfg.benches, benchIsolated) {
		if rep.Isolated, err = runIsolated(ctx, cfg, tmp); err != nil {
			return fmt.Errorf("isolated: %w", err)
		}
	}
	if slices.Contains(cfg.benches, benchToolCall) {
		if cfg.fakeAgentBin == "" {
			return errors.New("tool call: -fakeagent is required")
		}
		if rep.ToolCall, err = runToolCall(ctx, cfg, tmp); err != nil {
			return fmt.Errorf("tool call: %w", err)
		}
	}
	if cfg.jsonOut != "" {
		if err := benchkit.WriteJSON(cfg.jsonOut, rep); err != nil {
			return err
		}
	}
	return nil
}

// checkLoopbackOnly refuses to go on when this process's network
// namespace has an interface besides lo: the real agents it starts must
// not be able to send anything off the machine. /proc/net/dev lists the
// reading process's own namespace (/sys/class/net would show the one
// sysfs was mounted in).
func checkLoopbackOnly() error {
	raw, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return fmt.Errorf("list network interfaces: %w", err)
	}
	var others []string
	for _, line := range strings.Split(string(raw), "\n") {
		name, _, ok := strings.Cut(line, ":")
		if name = strings.TrimSpace(name); ok && name != "lo" {
			others = append(others, name)
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("this network namespace has interfaces besides loopback (%s), and the real agents must not reach the network: run bench/acp.sh, or wrap this program in `unshare -n sh -c 'ip link set lo up && exec …'`", strings.Join(others, ", "))
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
