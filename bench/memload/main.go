// Command memload measures the memory one concurrent streaming run costs a
// `runnel serve` process (docs/benchmarks.md).
//
// It starts the fake model as its own process (`runnel mockllm --script`,
// with a script that streams a long text one piece per second, so a run
// stays open far longer than the measurement), then for each concurrency
// level a fresh `runnel serve` whose concurrency limit is raised above it.
// After a few warm-up runs it reads the server's idle VmRSS, opens that many
// streaming POST /run requests at once on loopback, waits until every one
// has received a healthy first event, lets the process settle, and reads
// VmRSS again:
//
//	memory per run = (VmRSS with N runs open − idle VmRSS) / N
//
// A healthy first event is the start of the model's answer (message_start,
// or a message or thought delta or start): the first record of every run
// of this script that is open and streaming. Any other first record (an
// error event, a done event, a notice, the result) fails the run, and so
// does an error event or a result before the load is cancelled; a level
// with a failed run reports no figure. Then it cancels every request
// (runnel cancels the runs) and stops the server. Everything stays on 127.0.0.1; every wait has a deadline.
//
//	go build -o /tmp/runnel ./cmd/runnel
//	go run ./bench/memload -runnel /tmp/runnel
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/llmtest"
)

type config struct {
	runnelBin string
	counts    []int
	upstreams []string
	historyKB int
	settle    time.Duration
	hold      time.Duration
	timeout   time.Duration
	jsonOut   string
}

func main() {
	var cfg config
	var counts string
	flag.StringVar(&cfg.runnelBin, "runnel", "", "runnel binary (required)")
	flag.StringVar(&counts, "counts", "100,1000", "concurrent run counts to measure, each on a fresh runnel serve")
	upstreams := flag.String("upstream", "h1,h2", "how runnel reaches the fake model, each measured: h1 (plain HTTP/1.1, a connection per run) or h2 (HTTPS with HTTP/2, as hosted providers: runs share a connection)")
	flag.DurationVar(&cfg.settle, "settle", 2*time.Second, "wait after the last first event before reading VmRSS")
	flag.IntVar(&cfg.historyKB, "history-kb", 0, "every run replays a history of this many KiB before its prompt (memory per run against its request's size)")
	flag.DurationVar(&cfg.hold, "hold", 0, "keep the streams open this long after measuring (time to take a profile of the server)")
	flag.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "give up after this long")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.Parse()
	for f := range strings.SplitSeq(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "memload: bad -counts entry %q\n", f)
			os.Exit(2)
		}
		cfg.counts = append(cfg.counts, n)
	}
	for u := range strings.SplitSeq(*upstreams, ",") {
		if u = strings.TrimSpace(u); u != "h1" && u != "h2" {
			fmt.Fprintf(os.Stderr, "memload: bad -upstream entry %q (h1 or h2)\n", u)
			os.Exit(2)
		}
		cfg.upstreams = append(cfg.upstreams, strings.TrimSpace(u))
	}
	if cfg.runnelBin == "" {
		fmt.Fprintln(os.Stderr, "memload: -runnel BIN is required (go build -o /tmp/runnel ./cmd/runnel)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := bench(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "memload:", err)
		os.Exit(1)
	}
}

// point is one concurrency level's measurement.
type point struct {
	Upstream    string  `json:"upstream"`
	RequestKiB  float64 `json:"requestKiB"`
	Runs        int     `json:"runs"`
	IdleRSSKiB  int64   `json:"idleRssKiB"`
	LoadRSSKiB  int64   `json:"loadRssKiB"`
	PerRunKiB   float64 `json:"perRunKiB"`
	FirstAllMs  float64 `json:"allFirstEventsMs"`
	IdleThreads int     `json:"idleThreads"`
	LoadThreads int     `json:"loadThreads"`
}

func bench(ctx context.Context, cfg config) error {
	dir, err := os.MkdirTemp("", "runnel-memload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "slow.json")
	if err := os.WriteFile(script, slowScript(), 0o600); err != nil {
		return err
	}
	var points []point
	for _, up := range cfg.upstreams {
		var tls *upstreamTLS
		if up == "h2" {
			cert, key, client, err := llmtest.SelfSignedTLS(dir)
			if err != nil {
				return err
			}
			tls = &upstreamTLS{cert: cert, key: key, client: client}
		}
		ps, err := level(ctx, cfg, script, tls)
		if err != nil {
			return fmt.Errorf("upstream %s: %w", up, err)
		}
		for _, p := range ps {
			p.Upstream = up
			fmt.Printf("%s %5d runs: idle VmRSS %7.1f MiB, loaded %7.1f MiB, %6.1f KiB per run, %.2f× its %.1f KiB request (threads %d -> %d; all first events after %.0f ms)\n",
				up, p.Runs, mib(p.IdleRSSKiB), mib(p.LoadRSSKiB), p.PerRunKiB, p.PerRunKiB/p.RequestKiB, p.RequestKiB, p.IdleThreads, p.LoadThreads, p.FirstAllMs)
			points = append(points, p)
		}
	}
	if cfg.jsonOut != "" {
		raw, err := json.MarshalIndent(points, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(cfg.jsonOut, append(raw, '\n'), 0o644)
	}
	return nil
}

// level measures every concurrency level against one fake model.
func level(ctx context.Context, cfg config, script string, tls *upstreamTLS) ([]point, error) {
	llm, err := startMockLLM(ctx, cfg.runnelBin, script, tls)
	if err != nil {
		return nil, err
	}
	defer llm.close()
	var points []point
	for _, n := range cfg.counts {
		if need, have := fdsNeeded(n, tls != nil), fdLimit(); need > have {
			fmt.Printf("skipped %d runs: runnel serve would need about %d file descriptors (%s), the hard limit here is %d\n",
				n, need, fdsWhy(tls != nil), have)
			continue
		}
		p, err := measure(ctx, cfg, llm.url, n, tls)
		if err != nil {
			return nil, fmt.Errorf("%d concurrent runs: %w", n, err)
		}
		points = append(points, p)
	}
	return points, nil
}

// measure runs one concurrency level on a fresh runnel serve.
func measure(ctx context.Context, cfg config, llmURL string, n int, tls *upstreamTLS) (point, error) {
	srv, err := startServe(ctx, cfg.runnelBin, n+100, tls)
	if err != nil {
		return point{}, err
	}
	defer srv.close()
	c := newClient(srv.url, llmURL, n)
	if cfg.historyKB > 0 {
		c.withHistory(cfg.historyKB)
	}
	defer c.close()
	// Warm-up: the first run initialises what every run shares (the model
	// adapter's client, the JSON codecs' type caches); that is not per run.
	for range 5 {
		if err := c.quickRun(ctx); err != nil {
			return point{}, fmt.Errorf("warm-up run: %w", err)
		}
	}
	c.closeIdle()
	if err := benchkit.Sleep(ctx, cfg.settle); err != nil {
		return point{}, err
	}
	p := point{Runs: n, RequestKiB: float64(len(c.body("stream slowly"))) / 1024}
	idle, err := benchkit.ReadStatus(srv.pid())
	if err != nil {
		return point{}, err
	}
	p.IdleRSSKiB, p.IdleThreads = idle.RSSKiB, idle.Threads

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	start := time.Now()
	wait, err := c.openStreams(loadCtx, n)
	if err != nil {
		stopLoad()
		return point{}, errors.Join(err, wait())
	}
	p.FirstAllMs = float64(time.Since(start)) / float64(time.Millisecond)
	if err := benchkit.Sleep(ctx, cfg.settle); err != nil {
		return point{}, err
	}
	load, err := benchkit.ReadStatus(srv.pid())
	if err != nil {
		return point{}, err
	}
	p.LoadRSSKiB, p.LoadThreads = load.RSSKiB, load.Threads
	p.PerRunKiB = float64(p.LoadRSSKiB-p.IdleRSSKiB) / float64(n)
	if cfg.hold > 0 {
		fmt.Printf("%5d runs open on runnel serve pid %d at %s; holding them for %s\n", n, srv.pid(), srv.url, cfg.hold)
		if err := benchkit.Sleep(ctx, cfg.hold); err != nil {
			return point{}, err
		}
	}
	stopLoad()
	if err := wait(); err != nil && !errors.Is(err, context.Canceled) {
		return p, err
	}
	return p, nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// fdsNeeded is about how many descriptors runnel serve holds with n runs
// open: the client's connection of each, and with HTTP/1.1 its own
// connection to the model too (HTTP/2 runs share a few), plus what the
// process holds anyway. The driver itself holds one per run.
func fdsNeeded(n int, h2 bool) int {
	if h2 {
		return n + 100
	}
	return 2*n + 100
}

func fdsWhy(h2 bool) string {
	if h2 {
		return "one per run: its client's connection; the runs share their HTTP/2 connections to the model"
	}
	return "two per run: its client's connection and its own HTTP/1.1 connection to the model"
}

// fdLimit is the hard RLIMIT_NOFILE, which a Go program raises its soft
// limit to (runnel serve does at start-up).
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1 << 20
	}
	return int(min(rl.Max, 1<<30))
}
