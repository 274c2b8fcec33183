// Command scaleout shows runnel scaling out statelessly behind a real load
// balancer on one machine (docs/benchmarks.md, benchmark 5): three
// `runnel serve` replicas on loopback behind HAProxy (round robin, HTTP
// mode, health checks on /health), driven by this load client, which also
// serves the fake model (internal/llmtest, streaming with a delay between
// pieces) and the platform's tool endpoint (counting executions per call).
//
// Four phases, each with a fixed size and duration:
//
//	a. load: -workers streaming runs in flight for -duration (a tool call,
//	   its result, a streamed answer); throughput, latency, which replica
//	   served each run (HAProxy's X-Served-By header), CPU of the replicas
//	   against HAProxy's;
//	b. pause and resume: -approvals runs that pause for an approval through
//	   HAProxy and are resumed, the approval in the replayed conversation, on
//	   another replica's port, all at once during the load; the tool must
//	   run once each;
//	c. SIGKILL one replica a third into the load: what the clients of its
//	   runs see, and that every other run succeeds; then restart it;
//	d. SIGTERM another a third into the load: it goes on serving for the
//	   shutdown delay while HAProxy's checks see /health answer 503, then
//	   its runs must finish within the shutdown grace; no client may see an
//	   error.
//
// Phases b to d run the load for -window each. Everything listens on and
// talks to 127.0.0.1 only; every process is a child of this one (killed
// with it) and the temporary directory is removed at the end.
//
//	go build -o /tmp/runnel ./cmd/runnel
//	go run ./bench/scaleout -runnel /tmp/runnel -haproxy /usr/sbin/haproxy
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

type config struct {
	runnelBin  string
	haproxyBin string
	workers    int
	approvals  int
	duration   time.Duration
	window     time.Duration
	delay      time.Duration
	grace      time.Duration
	stopDelay  time.Duration
	jsonOut    string
	keepLogs   bool
}

// runLength is about how long a load run takes: the fake model's reply
// pieces (modelScript), each delay apart, and the hops between them.
func (c config) runLength() time.Duration { return 24 * c.delay }

func main() {
	var cfg config
	flag.StringVar(&cfg.runnelBin, "runnel", "", "runnel binary (required)")
	flag.StringVar(&cfg.haproxyBin, "haproxy", "haproxy", "HAProxy binary")
	flag.IntVar(&cfg.workers, "workers", 200, "streaming runs kept in flight by the load")
	flag.IntVar(&cfg.approvals, "approvals", 100, "runs paused on one replica and resumed on another in phase b")
	flag.DurationVar(&cfg.duration, "duration", 60*time.Second, "length of phase a's load")
	flag.DurationVar(&cfg.window, "window", 0, "length of the load in phases b, c and d (default: half of -duration)")
	flag.DurationVar(&cfg.delay, "delay", 100*time.Millisecond, "the fake model's delay between streamed pieces (a load run lasts about 24 of them)")
	flag.DurationVar(&cfg.grace, "shutdown-grace", 30*time.Second, "the replicas' RUNNEL_SHUTDOWN_GRACE")
	// HAProxy checks every 1 s, 250 ms apart once one failed, and takes a
	// server out after 2 failures: 1.25 s at most, and 3 s is past it.
	flag.DurationVar(&cfg.stopDelay, "shutdown-delay", 3*time.Second, "the replicas' RUNNEL_SHUTDOWN_DELAY")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.BoolVar(&cfg.keepLogs, "keep-logs", false, "keep the replicas' logs and HAProxy's configuration (the directory is printed)")
	flag.Parse()
	if cfg.window <= 0 {
		cfg.window = cfg.duration / 2
	}
	if cfg.runnelBin == "" || cfg.workers < 1 || cfg.approvals < 0 || cfg.duration <= 0 {
		fmt.Fprintln(os.Stderr, "scaleout: -runnel BIN is required; -workers and -duration must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Every phase stops by itself; this bounds the whole in case one hangs.
	limit := cfg.duration + 3*cfg.window + cfg.stopDelay + cfg.grace + 3*time.Minute
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ok, err := bench(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// report is everything the run measured, as -json writes it.
type report struct {
	Date     string        `json:"date"`
	Machine  machine       `json:"machine"`
	Settings settings      `json:"settings"`
	Load     *loadReport   `json:"a_load"`
	Resume   *resumeReport `json:"b_pauseResume"`
	Kill     *killReport   `json:"c_sigkill"`
	Drain    *drainReport  `json:"d_sigterm"`
	Checks   []check       `json:"checks"`
}

type machine struct {
	CPUs        int    `json:"cpus"`
	Go          string `json:"go"`
	HAProxy     string `json:"haproxy"`
	Runnel      string `json:"runnel"`
	LoadAvgFrom string `json:"loadAvgBefore"`
	LoadAvgTo   string `json:"loadAvgAfter"`
}

type settings struct {
	Workers   int    `json:"workers"`
	Approvals int    `json:"approvals"`
	Duration  string `json:"duration"`
	Window    string `json:"window"`
	Delay     string `json:"modelDelay"`
	Grace     string `json:"shutdownGrace"`
	StopDelay string `json:"shutdownDelay"`
}

func bench(ctx context.Context, cfg config) (bool, error) {
	dir, err := os.MkdirTemp("", "runnel-scaleout-")
	if err != nil {
		return false, err
	}
	if cfg.keepLogs {
		fmt.Fprintln(os.Stderr, "scaleout: logs and configuration in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	rep := report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine{CPUs: runtime.NumCPU(), Go: runtime.Version(),
		HAProxy: firstOutputLine(ctx, cfg.haproxyBin, "-v"), Runnel: firstOutputLine(ctx, cfg.runnelBin, "version"),
		LoadAvgFrom: loadAvg()},
		Settings: settings{cfg.workers, cfg.approvals, cfg.duration.String(), cfg.window.String(), cfg.delay.String(), cfg.grace.String(), cfg.stopDelay.String()}}
	c, err := startCluster(ctx, cfg, dir)
	if err != nil {
		return false, err
	}
	defer c.close()

	fmt.Fprintln(os.Stderr, "scaleout: warming up for 3 s")
	if s := summarize(c.client.load(ctx, c.lb.url, c.cfg.workers, 3*time.Second, c.cfg.runLength())); s.Errors > 0 {
		return false, fmt.Errorf("warm-up: %d of %d runs failed: %v", s.Errors, s.Runs, s.ErrorKinds)
	}
	fmt.Fprintf(os.Stderr, "scaleout: a. load, %d runs in flight for %s\n", cfg.workers, cfg.duration)
	if rep.Load, err = c.phaseLoad(ctx); err != nil {
		return false, fmt.Errorf("phase a: %w", err)
	}
	fmt.Fprintf(os.Stderr, "scaleout: b. %d pauses resumed on another replica, during %s of load\n", cfg.approvals, cfg.window)
	rep.Resume = c.phaseResume(ctx)
	fmt.Fprintf(os.Stderr, "scaleout: c. SIGKILL of %s during %s of load\n", c.replicas[1].name, cfg.window)
	if rep.Kill, err = c.phaseKill(ctx); err != nil {
		return false, fmt.Errorf("phase c: %w", err)
	}
	fmt.Fprintf(os.Stderr, "scaleout: d. SIGTERM of %s during %s of load\n", c.replicas[2].name, cfg.window)
	if rep.Drain, err = c.phaseDrain(ctx); err != nil {
		return false, fmt.Errorf("phase d: %w", err)
	}
	rep.Machine.LoadAvgTo = loadAvg()
	rep.Checks = checks(&rep)
	printReport(os.Stdout, &rep)
	if cfg.jsonOut != "" {
		if err := benchkit.WriteJSON(cfg.jsonOut, rep); err != nil {
			return false, err
		}
	}
	for _, ch := range rep.Checks {
		if !ch.OK {
			return false, nil
		}
	}
	return true, nil
}

// startCluster starts the fakes, three replicas with the same token and
// interaction secret, and HAProxy in front of them.
func startCluster(ctx context.Context, cfg config, dir string) (c *cluster, err error) {
	c = &cluster{cfg: cfg}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.fakes, err = startFakes(cfg.delay); err != nil {
		return c, err
	}
	const token = "scaleout-token-0123456789abcdef"
	env := []string{
		"RUNNEL_TOKEN=" + token,
		"RUNNEL_INTERACTION_SECRET=scaleout-interaction-secret-0123456789",
		// Room for the whole load on two replicas, plus the approvals.
		fmt.Sprintf("RUNNEL_CONCURRENCY_LIMIT=%d", cfg.workers+cfg.approvals+100),
		"RUNNEL_SHUTDOWN_GRACE=" + cfg.grace.String(),
		"RUNNEL_SHUTDOWN_DELAY=" + cfg.stopDelay.String(),
		"RUNNEL_LOG_LEVEL=info",
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RUNNEL_") {
			env = append(env, kv)
		}
	}
	for _, name := range []string{"r1", "r2", "r3"} {
		r, err := newReplica(name, cfg.runnelBin, dir, env)
		if err != nil {
			return c, err
		}
		c.replicas = append(c.replicas, r)
		if err := r.start(ctx); err != nil {
			return c, err
		}
	}
	if c.lb, err = startBalancer(ctx, cfg.haproxyBin, dir, c.replicas); err != nil {
		return c, err
	}
	c.client = newClient(token, c.fakes)
	return c, nil
}

// close stops the balancer, the replicas and the fakes, in that order.
func (c *cluster) close() {
	if c.lb != nil {
		c.lb.close()
	}
	for _, r := range c.replicas {
		r.stop(c.cfg.stopDelay + c.cfg.grace + 5*time.Second)
	}
	if c.fakes != nil {
		c.fakes.close()
	}
}

func firstOutputLine(ctx context.Context, bin string, args ...string) string {
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return firstLine(out)
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}
