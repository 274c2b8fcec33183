package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// report is everything the soak measured, as -json writes it.
type report struct {
	Date     string   `json:"date"`
	Machine  machine  `json:"machine"`
	Settings settings `json:"settings"`
	FDLimit  fdLimit  `json:"fdLimit"`
	Results  results  `json:"results"`
	// CutShort says why the soak ended early (Ctrl-C, the hard deadline).
	CutShort string `json:"cutShort,omitempty"`
	// Idle is runnel before the load (after one run of each kind);
	// Drained a few seconds after its last run ended.
	Idle    sample   `json:"idle"`
	Drained sample   `json:"drained"`
	Samples []sample `json:"samples"`
}

type settings struct {
	Runs          int      `json:"runs"`
	DurationS     float64  `json:"durationS"`
	WarmupS       float64  `json:"warmupS"`
	SampleS       float64  `json:"sampleEveryS"`
	RunTimeoutS   float64  `json:"runTimeoutS"`
	ModelDelayMs  []int64  `json:"modelPauseMsPerEvent"`
	ToolKinds     []string `json:"toolKindCycle"`
	ReplyPausesMs [2]int64 `json:"replyPausesMs"`
}

func settingsOf(cfg config) settings {
	var ms []int64
	for _, d := range paceDelays(cfg.delayMin, cfg.delayMax, cfg.paces) {
		ms = append(ms, d.Milliseconds())
	}
	return settings{Runs: cfg.runs, DurationS: cfg.duration.Seconds(), WarmupS: cfg.warmup.Seconds(),
		SampleS: cfg.interval.Seconds(), RunTimeoutS: cfg.runTimeout.Seconds(), ModelDelayMs: ms, ToolKinds: cfg.kinds,
		ReplyPausesMs: [2]int64{cfg.delayMin.Milliseconds(), cfg.delayMax.Milliseconds()}}
}

type fdLimit struct {
	Soft       uint64 `json:"soft"`
	Hard       uint64 `json:"hard"`
	NeedRunnel int    `json:"needRunnel"`
	NeedDriver int    `json:"needDriver"`
}

// results are the soak's figures and checks.
type results struct {
	Runs       int64            `json:"runs"`
	Failed     int64            `json:"failed"`
	FailedBy   map[string]int64 `json:"failedByKind"`
	Examples   []string         `json:"failureExamples,omitempty"`
	GoodByTool map[string]int64 `json:"goodRunsByTool"`
	LoadS      float64          `json:"loadS"`
	RunsPerS   float64          `json:"runsPerS"`
	RunP50Ms   float64          `json:"runP50Ms"`
	RunP99Ms   float64          `json:"runP99Ms"`
	RunMaxMs   float64          `json:"runMaxMs"`
	ReplyP50Ms float64          `json:"modelReplyP50Ms"`
	ReplyP99Ms float64          `json:"modelReplyP99Ms"`

	ServeCPU    benchkit.CPU `json:"serveCPU"`
	ServeCPUPct float64      `json:"serveCPUPercentOfOneCore"`
	CPUPerRunMs float64      `json:"serveCPUPerRunMs"`
	DriverCPU   benchkit.CPU `json:"driverCPU"`

	// After the warm-up, during the load; x in minutes.
	WarmupEndRSSKiB int64   `json:"rssAtWarmupEndKiB"`
	RSS             fit     `json:"rssKiBPerMin"`
	RSSPctPer10Min  float64 `json:"rssSlopePercentOfMeanPer10Min"`
	Heap            fit     `json:"heapInuseKiBPerMin"`
	NextGC          fit     `json:"nextGCKiBPerMin"`
	FDs             fit     `json:"fdsPerMin"`
	Goroutines      fit     `json:"goroutinesPerMin"`
	MaxThreads      int     `json:"maxThreads"`
	MaxTimeWait     int     `json:"maxTcpTimeWait"`
	// Where the CPU went over the whole load, and in the interval in
	// which the fewest runs finished (after the first readings).
	CPUSplit interval `json:"cpuSplitCores"`
	Slowest  interval `json:"slowestInterval"`

	// DrainGCs is how many garbage collections runnel made between the
	// end of the load and the drained reading.
	DrainGCs int64 `json:"drainGCs"`
	// Checks after the load.
	Leftover       int    `json:"toolExecutionsUnclaimed"`
	BadToolCalls   int64  `json:"toolRequestsRefused"`
	MCPSessions    int64  `json:"mcpSessions"`
	MCPWrong       int64  `json:"mcpSessionsWithoutExactlyOneCall"`
	MCPLiveAfter   int64  `json:"mcpSessionsOpenAfterDrain"`
	WorkspacesLeft int    `json:"workspacesLeft"`
	ServeExit      string `json:"serveExit,omitempty"`
	LogLines       int    `json:"logLines"`
	LogProblems    logSum `json:"logWarningsAndErrors"`
}

// logSum counts runnel's WARN and ERROR log lines by message.
type logSum struct {
	Count    int            `json:"count"`
	ByMsg    map[string]int `json:"byMessage,omitempty"`
	Examples []string       `json:"examples,omitempty"`
}

// clean is whether the soak found nothing wrong.
func (r results) clean() bool {
	return r.Failed == 0 && r.Leftover == 0 && r.BadToolCalls == 0 && r.MCPWrong == 0 &&
		r.MCPLiveAfter == 0 && r.WorkspacesLeft == 0 && r.ServeExit == ""
}

func summarize(cfg config, c *client, f *fakes, samples []sample, load time.Duration, serveCPU, driverCPU benchkit.CPU) results {
	t := c.tally
	t.mu.Lock()
	r := results{
		Runs: t.completed.Load(), Failed: t.failed.Load(),
		FailedBy: maps.Clone(t.byKind), Examples: slices.Clone(t.examples), GoodByTool: maps.Clone(t.perTool),
		LoadS: load.Seconds(), ServeCPU: serveCPU, DriverCPU: driverCPU,
	}
	durs := slices.Clone(t.durations)
	t.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.RunsPerS = float64(r.Runs) / load.Seconds()
	r.RunP50Ms, r.RunP99Ms, r.RunMaxMs = ms(benchkit.Quantile(durs, 0.5)), ms(benchkit.Quantile(durs, 0.99)), ms(benchkit.Quantile(durs, 1))
	replies := f.model.durations()
	r.ReplyP50Ms, r.ReplyP99Ms = ms(benchkit.Quantile(replies, 0.5)), ms(benchkit.Quantile(replies, 0.99))
	r.ServeCPUPct = serveCPU.Total().Seconds() / load.Seconds() * 100
	if r.Runs > 0 {
		r.CPUPerRunMs = ms(serveCPU.Total()) / float64(r.Runs)
	}

	var xs, rss, heap, nextGC, fds, gor []float64
	for _, s := range samples {
		if s.At < cfg.warmup.Seconds() || s.At > cfg.duration.Seconds() {
			continue
		}
		if len(xs) == 0 {
			r.WarmupEndRSSKiB = s.RSSKiB
		}
		xs = append(xs, s.At/60)
		rss = append(rss, float64(s.RSSKiB))
		heap = append(heap, float64(s.HeapInuseKiB))
		nextGC = append(nextGC, float64(s.NextGCKiB))
		fds = append(fds, float64(s.FDs))
		gor = append(gor, float64(s.Goroutines))
		r.MaxThreads = max(r.MaxThreads, s.Threads)
	}
	for _, s := range samples {
		r.MaxTimeWait = max(r.MaxTimeWait, s.TimeWait)
	}
	r.RSS, r.Heap, r.NextGC = fitLine(xs, rss), fitLine(xs, heap), fitLine(xs, nextGC)
	r.FDs, r.Goroutines = fitLine(xs, fds), fitLine(xs, gor)
	if len(samples) > 1 {
		r.CPUSplit = between(samples[0], samples[len(samples)-1])
	}
	r.Slowest, _ = slowest(samples, min(30, cfg.warmup.Seconds()))
	r.RSSPctPer10Min = r.RSS.percentPer(10)

	p := f.platform
	r.Leftover = p.leftover()
	r.BadToolCalls = p.bad.Load()
	r.MCPSessions, r.MCPWrong, r.MCPLiveAfter = p.mcpSessions.Load(), p.mcpWrong.Load(), p.mcpLive.Load()
	return r
}

// scanLog counts the lines of runnel's JSON log and sums up its WARN and
// ERROR lines.
func scanLog(path string) (lines int, sum logSum) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, sum
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines++
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || (rec.Level != "WARN" && rec.Level != "ERROR") {
			continue
		}
		sum.Count++
		if sum.ByMsg == nil {
			sum.ByMsg = map[string]int{}
		}
		sum.ByMsg[rec.Level+" "+rec.Msg]++
		if len(sum.Examples) < 5 {
			sum.Examples = append(sum.Examples, fmt.Sprintf("%.400s", sc.Text()))
		}
	}
	return lines, sum
}

func (rep *report) print(w io.Writer) {
	r := rep.Results
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("runs completed      %d in %.0f s (%.1f runs/s), %d failed; good runs by tool: %v", r.Runs, r.LoadS, r.RunsPerS, r.Failed, r.GoodByTool)
	if r.Failed > 0 {
		p("failures by kind    %v", r.FailedBy)
		for _, e := range r.Examples {
			p("  %s", e)
		}
	}
	p("run duration        p50 %.0f ms, p99 %.0f ms, max %.0f ms; model reply p50 %.0f ms, p99 %.0f ms", r.RunP50Ms, r.RunP99Ms, r.RunMaxMs, r.ReplyP50Ms, r.ReplyP99Ms)
	p("runnel serve CPU    %.1f s (%.0f%% of one core), %.2f ms per run; this driver (model, tools, client) %.1f s",
		r.ServeCPU.Total().Seconds(), r.ServeCPUPct, r.CPUPerRunMs, r.DriverCPU.Total().Seconds())
	p("after warm-up (%.0f s, %d readings):", rep.Settings.WarmupS, r.RSS.N)
	p("  VmRSS             %.1f MiB at warm-up end; mean %.1f, min %.1f, max %.1f MiB", mib(r.WarmupEndRSSKiB), r.RSS.Mean/1024, r.RSS.Min/1024, r.RSS.Max/1024)
	p("  VmRSS slope       %+.1f ± %.1f KiB/min = %+.2f%% of the mean per 10 min", r.RSS.Slope, r.RSS.SlopeErr, r.RSSPctPer10Min)
	p("  heap in use       mean %.1f MiB, slope %+.1f ± %.1f KiB/min", r.Heap.Mean/1024, r.Heap.Slope, r.Heap.SlopeErr)
	p("  GC goal (2× live) mean %.1f MiB, slope %+.1f ± %.1f KiB/min = %+.2f%% of the mean per 10 min",
		r.NextGC.Mean/1024, r.NextGC.Slope, r.NextGC.SlopeErr, r.NextGC.percentPer(10))
	p("  open fds          min %.0f, max %.0f, slope %+.2f ± %.2f per min", r.FDs.Min, r.FDs.Max, r.FDs.Slope, r.FDs.SlopeErr)
	p("  goroutines        min %.0f, max %.0f, slope %+.1f ± %.1f per min; threads max %d", r.Goroutines.Min, r.Goroutines.Max, r.Goroutines.Slope, r.Goroutines.SlopeErr, r.MaxThreads)
	p("  TCP TIME_WAIT     max %d (the host's)", r.MaxTimeWait)
	cpu := func(in interval) string {
		return fmt.Sprintf("runnel %.2f, driver %.2f, other processes %.2f, irq/softirq %.2f, stolen %.2f cores; CPU pressure %.0f%%",
			in.Serve, in.Driver, in.Others, in.IRQ, in.Steal, in.Pressure*100)
	}
	p("CPU over the load   %s", cpu(r.CPUSplit))
	p("slowest interval    %.0f–%.0f s: %.0f runs/s, %d failed; %s", r.Slowest.From, r.Slowest.To, r.Slowest.RunsPerS, r.Slowest.FailedNow, cpu(r.Slowest))
	p("idle before / drained after (%d GCs later): VmRSS %.1f / %.1f MiB, heap allocated %.1f / %.1f MiB, fds %d / %d, goroutines %d / %d, active runs %d / %d",
		r.DrainGCs, mib(rep.Idle.RSSKiB), mib(rep.Drained.RSSKiB), mib(rep.Idle.HeapAllocKiB), mib(rep.Drained.HeapAllocKiB),
		rep.Idle.FDs, rep.Drained.FDs, rep.Idle.Goroutines, rep.Drained.Goroutines, rep.Idle.ActiveRuns, rep.Drained.ActiveRuns)
	p("checks              unclaimed tool executions %d, refused tool requests %d, MCP sessions %d (%d without exactly one call, %d open after the load), workspaces left %d",
		r.Leftover, r.BadToolCalls, r.MCPSessions, r.MCPWrong, r.MCPLiveAfter, r.WorkspacesLeft)
	exit := r.ServeExit
	if exit == "" {
		exit = "clean exit on SIGTERM"
	}
	p("runnel serve        %s; log %d lines, %d warnings/errors %v", exit, r.LogLines, r.LogProblems.Count, r.LogProblems.ByMsg)
	for _, e := range r.LogProblems.Examples {
		p("  %s", strings.TrimSpace(e))
	}
	verdict := "CLEAN"
	if !r.clean() {
		verdict = "NOT CLEAN"
	}
	if rep.CutShort != "" {
		verdict += ", but cut short (" + rep.CutShort + "): the figures cover only part of the soak"
	}
	p("soak: %s", verdict)
}
