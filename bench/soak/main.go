// Command soak keeps -runs runs with tools in flight on one `runnel serve`
// for -duration, on loopback, and checks that nothing goes wrong and
// nothing grows (docs/benchmarks.md, benchmark 7).
//
// This process serves the fake model (internal/llmtest, streaming each
// reply with a pause between pieces, 50 to 200 ms a reply, so runs
// overlap), the platform's tool endpoints (a callback tool and a direct
// tool, counting executions by tool call id) and an MCP server (counting
// calls by session). Every run offers the model one tool; the model calls
// it, then answers "Done: " and the tool's answer. Each finished run is
// replaced at once by a new one, so exactly -runs are open until
// -duration has passed; then no run starts and the last ones finish.
//
// Every stream is read to its end and checked: one tool call, executed
// exactly once by the platform, no error event, a done event with
// end_turn, a completed result, last, whose output quotes this call's
// answer. Anything else is an error, counted by kind (the first few are
// printed). Every -sample it reads runnel's VmRSS, open descriptors and
// CPU (/proc), its goroutines, heap and GC goal (GET /metrics), and the
// host's CPU, to tell a stall of runnel from one of the shared machine.
// At the end it prints the RSS at the end of the warm-up, the
// least-squares slope of RSS after it (KiB/min, and % of the mean per
// 10 min), the same for the GC goal (the live heap's trend), the range
// and slope of descriptors and goroutines, runnel's CPU time, and what is
// left once the load has drained, -idle-wait later and after -gcs
// garbage collections: descriptors, goroutines, heap, MCP sessions,
// workspaces.
//
// Everything listens on and talks to 127.0.0.1. runnel runs in a process
// group of its own that is killed at the end, also on Ctrl-C; the whole
// soak ends by itself within -duration plus -grace.
//
//	go build -o /tmp/runnel ./cmd/runnel
//	go run ./bench/soak -runnel /tmp/runnel -runs 100 -duration 30s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	runnelBin  string
	runs       int
	duration   time.Duration
	warmup     time.Duration
	interval   time.Duration
	grace      time.Duration
	idleWait   time.Duration
	gcs        int
	runTimeout time.Duration
	delayMin   time.Duration
	delayMax   time.Duration
	paces      int
	kinds      []string
	mix        string
	jsonOut    string
	keepLogs   bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.runnelBin, "runnel", "", "runnel binary (required)")
	flag.IntVar(&cfg.runs, "runs", 1000, "runs kept in flight")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Minute, "how long runs keep being started")
	flag.DurationVar(&cfg.warmup, "warmup", 0, "samples before this are left out of the slopes (default: 20% of -duration)")
	flag.DurationVar(&cfg.interval, "sample", 5*time.Second, "time between readings of runnel's memory and descriptors")
	flag.DurationVar(&cfg.runTimeout, "run-timeout", 2*time.Minute, "a run still open after this fails")
	flag.DurationVar(&cfg.grace, "grace", 0, "hard deadline past -duration for the last runs and the measurements (default: -run-timeout + the longer of -idle-wait and 2m per -gcs, + 2m)")
	flag.DurationVar(&cfg.idleWait, "idle-wait", 100*time.Second, "after the load, wait this long before the last reading: runnel's pools drop a connection idle for 90 s")
	flag.IntVar(&cfg.gcs, "gcs", 2, "after the load, wait for this many of runnel's garbage collections before the last reading (0: none)")
	flag.DurationVar(&cfg.delayMin, "delay-min", 50*time.Millisecond, "the fake model's pauses in its fastest reply, all together")
	flag.DurationVar(&cfg.delayMax, "delay-max", 200*time.Millisecond, "the same in its slowest reply")
	flag.IntVar(&cfg.paces, "paces", 4, "reply speeds from -delay-min to -delay-max, the runs spread over them")
	flag.StringVar(&cfg.mix, "mix", "callback=2,direct=1,mcp=1", "tool kinds of the runs and their shares")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the results and every sample as JSON to this file")
	flag.BoolVar(&cfg.keepLogs, "keep-logs", false, "keep runnel's log (its directory is printed)")
	flag.Parse()
	if cfg.warmup <= 0 {
		cfg.warmup = cfg.duration / 5
	}
	if cfg.grace <= 0 {
		cfg.grace = cfg.runTimeout + max(cfg.idleWait, time.Duration(cfg.gcs)*2*time.Minute) + 2*time.Minute
	}
	kinds, err := parseMix(cfg.mix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: -mix:", err)
		os.Exit(2)
	}
	cfg.kinds = kinds
	if cfg.runnelBin == "" || cfg.runs < 1 || cfg.duration <= 0 || cfg.interval <= 0 || cfg.paces < 1 || cfg.gcs < 0 ||
		cfg.warmup >= cfg.duration || cfg.delayMin < 0 || cfg.delayMax < cfg.delayMin {
		fmt.Fprintln(os.Stderr, "soak: -runnel BIN is required; -runs, -duration, -sample and -paces must be positive, -warmup shorter than -duration, 0 ≤ -delay-min ≤ -delay-max")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Every wait below has its own bound; this one ends the whole soak.
	ctx, cancel := context.WithTimeout(ctx, cfg.duration+cfg.grace)
	defer cancel()
	ok, err := soak(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// parseMix reads "callback=2,direct=1,mcp=1" into the cycle of tool
// kinds the runs take in turn.
func parseMix(s string) ([]string, error) {
	var kinds []string
	for part := range strings.SplitSeq(s, ",") {
		name, weight, _ := strings.Cut(strings.TrimSpace(part), "=")
		n := 1
		if weight != "" {
			var err error
			if n, err = strconv.Atoi(weight); err != nil || n < 0 || n > 100 {
				return nil, fmt.Errorf("share %q of %s: want 0 to 100", weight, name)
			}
		}
		switch name {
		case kindCallback, kindDirect, kindMCP:
		default:
			return nil, fmt.Errorf("unknown tool kind %q: want callback, direct or mcp", name)
		}
		for range n {
			kinds = append(kinds, name)
		}
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("no tool kind has a share")
	}
	// Interleave, so consecutive runs differ: c,c,d,m → c,d,m,c.
	return interleave(kinds), nil
}

// interleave orders kinds round-robin by name, first appearance first.
func interleave(kinds []string) []string {
	var order []string
	left := map[string]int{}
	for _, k := range kinds {
		if left[k] == 0 {
			order = append(order, k)
		}
		left[k]++
	}
	out := make([]string, 0, len(kinds))
	for len(out) < len(kinds) {
		for _, k := range order {
			if left[k] > 0 {
				out = append(out, k)
				left[k]--
			}
		}
	}
	return out
}
