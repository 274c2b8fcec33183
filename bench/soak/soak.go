package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// settle is the shortest wait after the load before the last reading:
// time for runnel to finish closing what the last runs used.
const settle = 5 * time.Second

// rig is what a soak starts: the fakes, runnel serve, the client and
// the sampler, and the temporary directory runnel works in.
type rig struct {
	dir, workspaces string
	logFile         *os.File
	fakes           *fakes
	serve           *serve
	stopped         bool
	client          *client
	sampler         *sampler
}

func soak(ctx context.Context, cfg config) (ok bool, err error) {
	rep := &report{Date: time.Now().UTC().Format(time.RFC3339), Machine: readMachine(cfg.runnelBin), Settings: settingsOf(cfg)}
	soft, hard, err := raiseFileLimit()
	if err != nil {
		return false, err
	}
	needRunnel, needDriver := fdNeeds(cfg.runs)
	rep.FDLimit = fdLimit{Soft: soft, Hard: hard, NeedRunnel: needRunnel, NeedDriver: needDriver}
	fmt.Printf("open-file limit %d (hard %d), for runnel serve and this driver; %d runs in flight need about %d in runnel and %d here\n",
		soft, hard, cfg.runs, needRunnel, needDriver)
	if need := uint64(max(needRunnel, needDriver)); soft < need {
		return false, fmt.Errorf("the open-file limit %d is below the %d needed; raise the hard limit (ulimit -Hn, LimitNOFILE) or lower -runs", soft, need)
	}
	fmt.Printf("%d CPUs, %s, load average %s; ephemeral ports %s, tcp_tw_reuse %s\n",
		rep.Machine.CPUs, rep.Machine.Go, rep.Machine.LoadAvgFrom, rep.Machine.PortRange, rep.Machine.TWReuse)

	r, err := setUp(ctx, cfg)
	if r != nil {
		defer r.close(cfg.keepLogs)
	}
	if err != nil {
		return false, err
	}
	if err := r.measure(ctx, cfg, rep); err != nil {
		return false, err
	}
	rep.Results.ServeExit = errString(r.stopServe())
	rep.Machine.LoadAvgTo = loadAvg()
	rep.Results.LogLines, rep.Results.LogProblems = scanLog(r.logFile.Name())

	if ctx.Err() != nil {
		rep.CutShort = context.Cause(ctx).Error()
	}
	rep.print(os.Stdout)
	if cfg.jsonOut != "" {
		if err := benchkit.WriteJSON(cfg.jsonOut, rep); err != nil {
			return false, err
		}
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("the soak was cut short: %w", context.Cause(ctx))
	}
	return rep.Results.clean(), nil
}

// setUp starts the fakes and runnel serve, and makes one run of each
// kind: a mistake in the set-up shows at once, with its reason, not as
// ten minutes of identical failures. The rig it returns, even with an
// error, is the caller's to close.
func setUp(ctx context.Context, cfg config) (*rig, error) {
	dir, err := os.MkdirTemp("", "runnel-soak-")
	if err != nil {
		return nil, err
	}
	r := &rig{dir: dir, workspaces: filepath.Join(dir, "workspaces")}
	if cfg.keepLogs {
		fmt.Printf("runnel's log and workspaces: %s\n", dir)
	}
	if err := os.Mkdir(r.workspaces, 0o700); err != nil {
		return r, err
	}
	if r.logFile, err = os.Create(filepath.Join(dir, "runnel.log")); err != nil {
		return r, err
	}
	if r.fakes, err = startFakes(paceDelays(cfg.delayMin, cfg.delayMax, cfg.paces)); err != nil {
		return r, err
	}
	r.serve, err = startServe(ctx, cfg.runnelBin, []string{
		"RUNNEL_CONCURRENCY_LIMIT=" + strconv.Itoa(cfg.runs+100),
		"RUNNEL_MCP_HOST_ALLOWLIST=" + r.fakes.mcpHost,
		"RUNNEL_WORKSPACE_ROOT=" + r.workspaces,
		"RUNNEL_SHUTDOWN_GRACE=10s",
		"RUNNEL_LOG_LEVEL=info",
		"RUNNEL_LOG_FORMAT=json",
	}, r.logFile)
	if err != nil {
		return r, err
	}
	r.client = newClient(r.serve.url, r.fakes, cfg.kinds, cfg.paces, cfg.runs, cfg.runTimeout)
	r.sampler = newSampler(r.serve.pid(), r.serve.url)
	for i, kind := range []string{kindCallback, kindDirect, kindMCP} {
		if err := r.client.run(ctx, plan{seq: -1 - int64(i), kind: kind}); err != nil {
			return r, fmt.Errorf("first %s run: %w", kind, err)
		}
	}
	return r, nil
}

// stopServe stops runnel serve once and reports how it ended.
func (r *rig) stopServe() error {
	if r.serve == nil || r.stopped {
		return nil
	}
	r.stopped = true
	return r.serve.stop(20 * time.Second)
}

// close stops everything setUp started, runnel first (its runs would
// otherwise see the fakes go), and removes the directory unless keep.
func (r *rig) close(keep bool) {
	if r.sampler != nil {
		r.sampler.close()
	}
	if r.client != nil {
		r.client.close()
	}
	_ = r.stopServe()
	if r.fakes != nil {
		r.fakes.close()
	}
	if r.logFile != nil {
		r.logFile.Close()
	}
	if !keep {
		os.RemoveAll(r.dir)
	}
}

// measure reads runnel idle, runs the load while sampling, and reads
// runnel again once drained; it fills rep's readings and results.
func (r *rig) measure(ctx context.Context, cfg config, rep *report) error {
	c, smp := r.client, r.sampler
	if err := benchkit.Sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	idle, err := smp.read(ctx, 0)
	if err != nil {
		return err
	}
	rep.Idle = idle
	fmt.Printf("runnel serve pid %d idle: VmRSS %.1f MiB, %d fds, %d goroutines\n", r.serve.pid(), mib(idle.RSSKiB), idle.FDs, idle.Goroutines)
	fmt.Printf("fake model %s, callback and direct tools %s, MCP server %s\n", r.fakes.modelURL, r.fakes.callbackURL, r.fakes.mcpURL)
	fmt.Printf("%d runs in flight for %s (tools %v, model pauses %v per event), a reading every %s, warm-up %s\n",
		cfg.runs, cfg.duration, cfg.kinds, paceDelays(cfg.delayMin, cfg.delayMax, cfg.paces), cfg.interval, cfg.warmup)

	cpuBefore, err := benchkit.ReadCPU(r.serve.pid())
	if err != nil {
		return err
	}
	selfBefore, _ := benchkit.ReadCPU(os.Getpid())
	start := time.Now()
	loadDone := make(chan struct{})
	var samples []sample
	var sampling sync.WaitGroup
	sampling.Go(func() { samples = c.sampleLoop(ctx, smp, start, cfg.interval, loadDone) })
	// A Ctrl-C or the hard deadline cuts the runs still open; they count
	// as failed, and the report still comes.
	c.load(ctx, cfg.runs, min(5*time.Second, cfg.duration/10), start.Add(cfg.duration))
	loadTime := time.Since(start)
	close(loadDone)
	sampling.Wait()
	cpuAfter, err := benchkit.ReadCPU(r.serve.pid())
	if err != nil {
		return err
	}
	selfAfter, _ := benchkit.ReadCPU(os.Getpid())

	drained, gcs, err := r.drain(ctx, cfg, start)
	if err != nil {
		return err
	}
	rep.Drained = drained
	rep.Samples = samples
	rep.Results = summarize(cfg, c, r.fakes, samples, loadTime, cpuAfter.Sub(cpuBefore), selfAfter.Sub(selfBefore))
	rep.Results.DrainGCs = gcs
	rep.Results.WorkspacesLeft = countEntries(r.workspaces)
	return nil
}

// drain reads what is left once every run has ended, the client's kept
// connections are closed (runnel's side of each would count) and
// runnel's own pools have had -idle-wait to drop their idle connections,
// after -gcs garbage collections: with nothing allocating, the Go
// runtime forces one every 2 min, and sync.Pool keeps what it holds
// through one, so the heap after two is what runnel still holds.
func (r *rig) drain(ctx context.Context, cfg config, start time.Time) (drained sample, gcs int64, err error) {
	r.client.close()
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	end, err := r.sampler.read(readCtx, time.Since(start))
	cancel()
	if err != nil {
		return sample{}, 0, err
	}
	fmt.Printf("load over; waiting %s, and for %d garbage collections of runnel's (the runtime forces one every 2 min)\n", cfg.idleWait, cfg.gcs)
	_ = benchkit.Sleep(ctx, max(settle, cfg.idleWait))
	for {
		// The last reading comes even when ctx has ended (Ctrl-C, the
		// hard deadline): its GC count tells how far the wait got.
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		smp, err := r.sampler.read(readCtx, time.Since(start))
		cancel()
		if err != nil || smp.GCs >= end.GCs+int64(cfg.gcs) || ctx.Err() != nil {
			return smp, smp.GCs - end.GCs, err
		}
		_ = benchkit.Sleep(ctx, 5*time.Second)
	}
}

// sampleLoop reads a sample every interval until loadDone is closed, and
// prints one progress line every sixth reading.
func (c *client) sampleLoop(ctx context.Context, smp *sampler, start time.Time, interval time.Duration, loadDone <-chan struct{}) []sample {
	var out []sample
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-loadDone:
			return out
		case <-tick.C:
		}
		s, err := smp.read(ctx, time.Since(start))
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak: reading runnel serve:", err)
			continue
		}
		s.Completed, s.Errors = c.tally.completed.Load(), c.tally.failed.Load()
		out = append(out, s)
		if len(out)%6 == 0 {
			fmt.Printf("  %5.0fs: %7d runs done, %d failed; VmRSS %6.1f MiB, heap %6.1f MiB, %5d fds, %6d goroutines, %4d active, %5d TIME_WAIT\n",
				s.At, s.Completed, s.Errors, mib(s.RSSKiB), mib(s.HeapInuseKiB), s.FDs, s.Goroutines, s.ActiveRuns, s.TimeWait)
		}
	}
}

// countEntries is how many entries dir holds, -1 when it cannot be read.
func countEntries(dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	return len(ents)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// machine is where the soak ran.
type machine struct {
	CPUs        int    `json:"cpus"`
	Go          string `json:"go"`
	Runnel      string `json:"runnel"`
	LoadAvgFrom string `json:"loadAvgBefore"`
	LoadAvgTo   string `json:"loadAvgAfter,omitempty"`
	// The host's TCP settings that decide whether thousands of short
	// connections a second fit: a closed connection's port stays in
	// TIME_WAIT for 60 s unless tcp_tw_reuse lets a new one take it.
	PortRange string `json:"ipLocalPortRange"`
	TWReuse   string `json:"tcpTwReuse"`
}

func readMachine(bin string) machine {
	return machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Runnel: bin, LoadAvgFrom: loadAvg(),
		PortRange: sysctl("net/ipv4/ip_local_port_range"), TWReuse: sysctl("net/ipv4/tcp_tw_reuse")}
}

// sysctl reads /proc/sys/name, "" when it cannot.
func sysctl(name string) string {
	raw, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(raw)), "-")
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	var a, b, c string
	if _, err := fmt.Sscan(string(raw), &a, &b, &c); err != nil {
		return ""
	}
	return a + " " + b + " " + c
}
