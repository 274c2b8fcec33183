package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// results collects every timed batch, by contestant and round.
type results struct {
	cfg    config
	names  []string // in contestant order: floor first
	rounds map[string][]batch
}

func newResults(cs []contestant, cfg config) *results {
	r := &results{cfg: cfg, rounds: map[string][]batch{}}
	for _, c := range cs {
		r.names = append(r.names, c.name())
		r.rounds[c.name()] = make([]batch, cfg.rounds)
	}
	return r
}

func (r *results) add(name string, round int, b batch) { r.rounds[name][round] = b }

// report is what the benchmark prints, and writes with -json.
type report struct {
	Steps      int `json:"toolStepsPerTurn"`
	ModelCalls int `json:"modelCallsPerTurn"`
	Rounds     int `json:"rounds"`
	RunsEach   int `json:"turnsPerRound"`
	Warmup     int `json:"warmupTurns"`
	// HistoryMessages and HistoryBytes describe the replayed history every
	// turn starts from (-history-kb), its size as Chat Completions JSON.
	HistoryMessages int     `json:"historyMessages"`
	HistoryBytes    int     `json:"historyBytes"`
	Contestants     []row   `json:"contestants"`
	Ratios          []ratio `json:"ratios"`
	// FakesPeakRSSKiB is the fakes process's VmHWM at the end.
	FakesPeakRSSKiB int64 `json:"fakesPeakRssKiB"`
}

// row is one contestant. A "step" is one model call: a turn of S tool
// steps has S+1 of them.
type row struct {
	Name         string  `json:"name"`
	Turns        int     `json:"turns"`
	MedianTurnMs float64 `json:"medianTurnMs"`
	MeanTurnMs   float64 `json:"meanTurnMs"`
	P90TurnMs    float64 `json:"p90TurnMs"`
	StepUs       float64 `json:"medianStepUs"`
	// OverheadStepUs is (median turn − floor's median turn) / model calls.
	OverheadStepUs float64 `json:"overheadStepUs"`
	// CPUStepUs is the contestant's own process CPU per step (for the
	// in-process contestants, the benchmark process's).
	CPUStepUs float64 `json:"cpuStepUs"`
	// RoundOverheadUs is the overhead per step measured in each round
	// against that round's floor.
	RoundOverheadUs []float64 `json:"roundOverheadStepUs"`
}

// ratio compares two contestants' overheads per step.
type ratio struct {
	Of       string    `json:"of"`
	Over     string    `json:"over"`
	Ratio    float64   `json:"ratio"`
	PerRound []float64 `json:"perRound"`
}

func (r *results) report() *report {
	calls := r.cfg.steps + 1
	rep := &report{Steps: r.cfg.steps, ModelCalls: calls, Rounds: r.cfg.rounds, RunsEach: r.cfg.runs, Warmup: r.cfg.warmup}
	if h := r.cfg.hist; h != nil {
		rep.HistoryMessages, rep.HistoryBytes = len(h.chat), h.bytes()
	}
	floorName := r.names[0]
	floorAll := benchkit.Median(allRuns(r.rounds[floorName]))
	for _, name := range r.names {
		bs := r.rounds[name]
		all := allRuns(bs)
		var cpu time.Duration
		for _, b := range bs {
			cpu += b.cpu
		}
		med := benchkit.Median(all)
		row := row{
			Name:           name,
			Turns:          len(all),
			MedianTurnMs:   ms(med),
			MeanTurnMs:     ms(mean(all)),
			P90TurnMs:      ms(benchkit.Quantile(all, 0.9)),
			StepUs:         us(med) / float64(calls),
			OverheadStepUs: us(med-floorAll) / float64(calls),
			CPUStepUs:      us(cpu) / float64(len(all)*calls),
		}
		for i, b := range bs {
			row.RoundOverheadUs = append(row.RoundOverheadUs,
				us(benchkit.Median(b.runs)-benchkit.Median(r.rounds[floorName][i].runs))/float64(calls))
		}
		rep.Contestants = append(rep.Contestants, row)
	}
	// The AI SDK's overhead over a bare Node loop is the framework's own
	// cost without Node's: a stricter comparison than the one over the Go floor.
	var nodeFloor *row
	for i := range rep.Contestants {
		if strings.HasPrefix(rep.Contestants[i].Name, "Node floor") {
			nodeFloor = &rep.Contestants[i]
		}
	}
	for _, of := range rep.Contestants[1:] {
		if !strings.HasPrefix(of.Name, "AI SDK") {
			continue
		}
		for _, over := range rep.Contestants[1:] {
			if !strings.HasPrefix(over.Name, "runnel") {
				continue
			}
			q := ratio{Of: of.Name, Over: over.Name, Ratio: of.OverheadStepUs / over.OverheadStepUs}
			for i := range of.RoundOverheadUs {
				q.PerRound = append(q.PerRound, of.RoundOverheadUs[i]/over.RoundOverheadUs[i])
			}
			rep.Ratios = append(rep.Ratios, q)
			if nodeFloor == nil {
				continue
			}
			f := ratio{Of: of.Name + " over the Node floor", Over: over.Name,
				Ratio: (of.OverheadStepUs - nodeFloor.OverheadStepUs) / over.OverheadStepUs}
			for i := range of.RoundOverheadUs {
				f.PerRound = append(f.PerRound, (of.RoundOverheadUs[i]-nodeFloor.RoundOverheadUs[i])/over.RoundOverheadUs[i])
			}
			rep.Ratios = append(rep.Ratios, f)
		}
	}
	return rep
}

func (rep *report) print(w io.Writer) {
	width := 0
	for _, c := range rep.Contestants {
		width = max(width, len(c.Name))
	}
	fmt.Fprintf(w, "\nper turn = %d tool steps = %d model calls; a step below is one model call\n", rep.Steps, rep.ModelCalls)
	fmt.Fprintf(w, "%s  %8s  %10s  %10s  %10s  %10s  %12s  %10s\n", pad("contestant", width),
		"turns", "median/turn", "p90/turn", "per step", "overhead", "(per round)", "CPU/step")
	for _, c := range rep.Contestants {
		fmt.Fprintf(w, "%s  %8d  %9.2fms  %8.2fms  %8.1fµs  %8.1fµs  %12s  %8.1fµs\n", pad(c.Name, width),
			c.Turns, c.MedianTurnMs, c.P90TurnMs, c.StepUs, c.OverheadStepUs, spread(c.RoundOverheadUs), c.CPUStepUs)
	}
	fmt.Fprintln(w)
	for _, q := range rep.Ratios {
		fmt.Fprintf(w, "overhead ratio %s / %s = %.1fx  (per round %s)\n", q.Of, q.Over, q.Ratio, spread(q.PerRound))
	}
	if rep.FakesPeakRSSKiB > 0 {
		fmt.Fprintf(w, "the fakes' process peaked at %.1f MiB (its fake model records no request)\n", float64(rep.FakesPeakRSSKiB)/1024)
	}
}

// spread is "min–max" of a few values.
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f–%.0f", slices.Min(v), slices.Max(v))
}

func allRuns(bs []batch) []time.Duration {
	var all []time.Duration
	for _, b := range bs {
		all = append(all, b.runs...)
	}
	return all
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pad right-pads s to w characters.
func pad(s string, w int) string { return s + strings.Repeat(" ", max(0, w-len([]rune(s)))) }
