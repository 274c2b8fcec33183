package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The JSON the drivers write, as far as the summary reads it.
type (
	steploopReport struct {
		Steps           int     `json:"toolStepsPerTurn"`
		ModelCalls      int     `json:"modelCallsPerTurn"`
		Rounds          int     `json:"rounds"`
		RunsEach        int     `json:"turnsPerRound"`
		Warmup          int     `json:"warmupTurns"`
		HistoryMessages int     `json:"historyMessages"`
		HistoryBytes    int     `json:"historyBytes"`
		FakesPeakRSSKiB int64   `json:"fakesPeakRssKiB"`
		Contestants     []slRow `json:"contestants"`
		Ratios          []struct {
			Of       string    `json:"of"`
			Over     string    `json:"over"`
			Ratio    float64   `json:"ratio"`
			PerRound []float64 `json:"perRound"`
		} `json:"ratios"`
	}
	slRow struct {
		Name            string    `json:"name"`
		Turns           int       `json:"turns"`
		MedianTurnMs    float64   `json:"medianTurnMs"`
		P90TurnMs       float64   `json:"p90TurnMs"`
		OverheadStepUs  float64   `json:"overheadStepUs"`
		CPUStepUs       float64   `json:"cpuStepUs"`
		RoundOverheadUs []float64 `json:"roundOverheadStepUs"`
	}
	memPoint struct {
		Upstream   string  `json:"upstream"`
		RequestKiB float64 `json:"requestKiB"`
		Runs       int     `json:"runs"`
		IdleRSSKiB int64   `json:"idleRssKiB"`
		LoadRSSKiB int64   `json:"loadRssKiB"`
		PerRunKiB  float64 `json:"perRunKiB"`
		FirstAllMs float64 `json:"allFirstEventsMs"`
	}
	footprintReport struct {
		Runs     int `json:"runs"`
		Binaries []struct {
			Name        string  `json:"name"`
			SizeBytes   int64   `json:"sizeBytes"`
			StartRSSKiB int64   `json:"startRssKiB"`
			RunsRSSKiB  int64   `json:"afterRunsRssKiB"`
			HWMKiB      int64   `json:"hwmKiB"`
			RunWallMs   float64 `json:"medianRunWallMs"`
			RunCPUMs    float64 `json:"runCpuMs"`
		} `json:"binaries"`
		Stripped *struct {
			Size     float64 `json:"size"`
			StartRSS float64 `json:"startRss"`
			RunsRSS  float64 `json:"afterRunsRss"`
			RunWall  float64 `json:"runWall"`
			RunCPU   float64 `json:"runCpu"`
		} `json:"strippedOverPlain"`
	}
)

func footprintSection(b *bytes.Buffer, r *results) error {
	b.WriteString("## Footprint: binary size and idle memory → docs/benchmarks.md, \"Benchmark 2\" (\"Results\": the idle VmRSS column and the sentence on the binary's size)\n\n")
	var rep footprintReport
	ok, err := r.json("footprint", &rep)
	if err != nil || !ok {
		verbatim(b, r, "footprint")
		return err
	}
	fmt.Fprintf(b, "`runnel serve` on 127.0.0.1, VmRSS read 2 s after start-up and 2 s after %d streaming runs one after another (a callback tool call, then text).\n\n", rep.Runs)
	b.WriteString("| binary | size | VmRSS after start-up | VmRSS after the runs | VmHWM | run, median wall | runnel CPU per run |\n|---|---|---|---|---|---|---|\n")
	for _, x := range rep.Binaries {
		fmt.Fprintf(b, "| %s | %.1f MiB (%d bytes) | %.1f MiB | %.1f MiB | %.1f MiB | %.2f ms | %.2f ms |\n", x.Name,
			float64(x.SizeBytes)/(1<<20), x.SizeBytes, kib2mib(x.StartRSSKiB), kib2mib(x.RunsRSSKiB), kib2mib(x.HWMKiB), x.RunWallMs, x.RunCPUMs)
	}
	if s := rep.Stripped; s != nil {
		fmt.Fprintf(b, "| **stripped ÷ plain** | **%.2f** | %.2f | %.2f | | %.2f | %.2f |\n", s.Size, s.StartRSS, s.RunsRSS, s.RunWall, s.RunCPU)
	}
	b.WriteString("\n")
	verbatim(b, r, "footprint")
	return nil
}

// The step-loop invocations all.sh makes, and where each belongs.
var steploopRuns = []struct{ name, where string }{
	{"steploop-20", "\"Benchmark 1\", \"Results\" (the 20-step table and its ratios)"},
	{"steploop-200", "\"Benchmark 1\": no table yet (a new \"Longer turns and replayed history\" subsection)"},
	{"steploop-20-h400", "\"Benchmark 1\": no table yet (same new subsection)"},
	{"steploop-200-h400", "\"Benchmark 1\": no table yet (same new subsection)"},
}

func steploopSection(b *bytes.Buffer, r *results) error {
	b.WriteString("## Step loop → docs/benchmarks.md, \"Benchmark 1: per-step overhead of a 20-step tool loop\"\n\n")
	b.WriteString("Overhead per step = (median turn − the Go floor's median turn) / model calls. CPU/step is the contestant's own process's\n")
	b.WriteString("user+system CPU per model call (for the in-process contestants, the driver's, which includes its client side; for\n")
	b.WriteString("`runnel serve`, the server process alone). generateText asks the fake model for whole replies; every other\n")
	b.WriteString("contestant, the floors included, streams, so generateText's overhead over the streaming floor flatters it.\n\n")
	for _, run := range steploopRuns {
		fmt.Fprintf(b, "### %s → %s\n\n", run.name, run.where)
		var rep steploopReport
		ok, err := r.json(run.name, &rep)
		if err != nil {
			return err
		}
		if !ok {
			verbatim(b, r, run.name)
			continue
		}
		fmt.Fprintf(b, "%d tool steps a turn (%d model calls); %d warm-up turns, then %d rounds × %d turns per contestant.", rep.Steps, rep.ModelCalls, rep.Warmup, rep.Rounds, rep.RunsEach)
		if rep.HistoryBytes > 0 {
			fmt.Fprintf(b, " Every turn replays a history of %d messages, %.0f KiB as Chat Completions JSON.", rep.HistoryMessages, float64(rep.HistoryBytes)/1024)
		}
		if rep.FakesPeakRSSKiB > 0 {
			fmt.Fprintf(b, " The fakes' process peaked at %.1f MiB.", kib2mib(rep.FakesPeakRSSKiB))
		}
		b.WriteString("\n\n| contestant | turns | median turn | p90 turn | overhead/step | (per round) | CPU/step |\n|---|---|---|---|---|---|---|\n")
		for _, c := range rep.Contestants {
			fmt.Fprintf(b, "| %s | %d | %.2f ms | %.2f ms | %s | %s | %.0f µs |\n", c.Name, c.Turns, c.MedianTurnMs, c.P90TurnMs,
				overhead(c), spread(c.RoundOverheadUs), c.CPUStepUs)
		}
		b.WriteString("\n| overhead ratio (wall) | value | per round |\n|---|---|---|\n")
		for _, q := range rep.Ratios {
			fmt.Fprintf(b, "| %s / %s | **%.1f×** | %s |\n", q.Of, q.Over, q.Ratio, spreadX(q.PerRound))
		}
		cpuRatios(b, rep.Contestants)
		b.WriteString("\n")
		if st := r.status(run.name); st != "" {
			fmt.Fprintf(b, "*%s*\n\n", st)
		}
	}
	return nil
}

// cpuRatios writes each peer's CPU per step over each runnel contestant's:
// what a platform pays for, beside the wall-clock overhead ratios (on a
// shared machine the wall clock carries other work's noise, CPU time less).
func cpuRatios(b *bytes.Buffer, cs []slRow) {
	var ours, peers []slRow
	for _, c := range cs {
		switch {
		case strings.HasPrefix(c.Name, "runnel"):
			ours = append(ours, c)
		case strings.HasPrefix(c.Name, "AI SDK"):
			peers = append(peers, c)
		}
	}
	if len(ours) == 0 || len(peers) == 0 {
		return
	}
	b.WriteString("\n| CPU ratio (per step) | value |\n|---|---|\n")
	for _, p := range peers {
		for _, o := range ours {
			if o.CPUStepUs > 0 {
				fmt.Fprintf(b, "| %s / %s | **%.1f×** (%.0f µs / %.0f µs) |\n", p.Name, o.Name, p.CPUStepUs/o.CPUStepUs, p.CPUStepUs, o.CPUStepUs)
			}
		}
	}
}

func overhead(c slRow) string {
	if strings.HasPrefix(c.Name, "floor") {
		return "—"
	}
	return fmt.Sprintf("**%.0f µs**", c.OverheadStepUs)
}

func gobenchSection(b *bytes.Buffer, r *results) error {
	b.WriteString("## `go test -bench` → docs/benchmarks.md, \"Benchmark 1\", \"`go test -bench`\"\n\n")
	b.WriteString("runnel's loop and the floor in one process with the fakes (subtract the floor for runnel's own share).\n\n")
	verbatim(b, r, "gobench")
	return nil
}

func memloadSection(b *bytes.Buffer, r *results) error {
	b.WriteString("## Memory per streaming run → docs/benchmarks.md, \"Benchmark 2: memory per concurrent streaming run\", \"Results\"\n\n")
	b.WriteString("Every run counted had a healthy first event (the start of its answer); a level with a failed run reports no figure.\n")
	b.WriteString("Upstream h1: the fake model over plain HTTP/1.1, a connection per run; h2: over HTTPS with HTTP/2, as hosted providers\n")
	b.WriteString("answer, the runs sharing a connection. memload-h400: every run replays a 400 KiB history (memory against the request).\n\n")
	for _, name := range []string{"memload", "memload-h400"} {
		var pts []memPoint
		ok, err := r.json(name, &pts)
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(b, "### %s\n\n", name)
			b.WriteString("| upstream | N | request | idle VmRSS | loaded VmRSS | per run | per run ÷ request | all first events after |\n|---|---|---|---|---|---|---|---|\n")
			for _, p := range pts {
				fmt.Fprintf(b, "| %s | %d | %.1f KiB | %.1f MiB | %.1f MiB | **%.1f KiB** | %s | %.2f s |\n", cmp.Or(p.Upstream, "h1"), p.Runs, p.RequestKiB,
					kib2mib(p.IdleRSSKiB), kib2mib(p.LoadRSSKiB), p.PerRunKiB, perRequest(p), p.FirstAllMs/1000)
			}
			b.WriteString("\n")
		}
		verbatim(b, r, name)
	}
	return nil
}

func perRequest(p memPoint) string {
	if p.RequestKiB <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f×", p.PerRunKiB/p.RequestKiB)
}

// printedSection is a section whose figures are the steps' printed output:
// its heading, a sentence (if any), then each step's output as it came.
func printedSection(heading, note string, steps ...string) func(*bytes.Buffer, *results) error {
	return func(b *bytes.Buffer, r *results) error {
		fmt.Fprintf(b, "## %s\n\n", heading)
		if note != "" {
			b.WriteString(note + "\n\n")
		}
		for _, s := range steps {
			verbatim(b, r, s)
		}
		return nil
	}
}

func kib2mib(k int64) float64 { return float64(k) / 1024 }

func spread(v []float64) string { return span(v, "%.0f–%.0f µs") }

func spreadX(v []float64) string { return span(v, "%.1f–%.1f×") }

// span writes the least and greatest of v in format, or "—" for none.
func span(v []float64, format string) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf(format, slices.Min(v), slices.Max(v))
}
