package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// report is what -json writes.
type report struct {
	FirstText []firstTextRow  `json:"firstText,omitempty"`
	ToolCall  *toolCallReport `json:"toolCall,omitempty"`
	Isolated  []isolatedRow   `json:"isolated,omitempty"`
}

// spread is a median with the smallest and largest value, in ms.
type spread struct {
	Median float64 `json:"medianMs"`
	Min    float64 `json:"minMs"`
	Max    float64 `json:"maxMs"`
}

func spreadOf(d []time.Duration) spread {
	if len(d) == 0 {
		return spread{}
	}
	return spread{Median: ms(benchkit.Median(d)), Min: ms(slices.Min(d)), Max: ms(slices.Max(d))}
}

func (s spread) String() string {
	return fmt.Sprintf("%7.0f ms (%.0f–%.0f)", s.Median, s.Min, s.Max)
}

// firstTextRow is one agent's first-text result.
type firstTextRow struct {
	Harness string `json:"harness"`
	Turns   int    `json:"turns"`

	AloneFirstText  spread `json:"aloneFirstText"`
	AloneEnd        spread `json:"aloneEnd"`
	AloneGone       spread `json:"aloneGone"`
	AloneSetup      spread `json:"aloneSetup"`
	AloneCPU        spread `json:"aloneCpu"`
	RunnelFirstText spread `json:"runnelFirstText"`
	RunnelEnd       spread `json:"runnelEnd"`
	RunnelCPU       spread `json:"runnelCpu"`      // runnel and its agent
	RunnelOwnCPU    spread `json:"runnelOwnCpu"`   // runnel alone
	RunnelAgentCPU  spread `json:"runnelAgentCpu"` // the agent runnel ran

	// Overheads are runnel's median minus alone's median, in ms; ratios
	// runnel's median over alone's.
	FirstTextOverheadMs float64 `json:"firstTextOverheadMs"`
	FirstTextRatio      float64 `json:"firstTextRatio"`
	EndOverheadMs       float64 `json:"endOverheadMs"`
	EndRatio            float64 `json:"endRatio"`
	// EndOverGoneMs is runnel's end against the alone agent's whole exit:
	// what runnel adds beyond ending the agent the same way.
	EndOverGoneMs float64 `json:"endOverGoneMs"`
	CPURatio      float64 `json:"cpuRatio"`

	Alone  []turnTimes `json:"alone"`
	Runnel []turnTimes `json:"runnel"`
}

func newFirstTextRow(harness string, alone, served []turnTimes) firstTextRow {
	pick := func(ts []turnTimes, f func(turnTimes) time.Duration) []time.Duration {
		out := make([]time.Duration, 0, len(ts))
		for _, t := range ts {
			out = append(out, f(t))
		}
		return out
	}
	r := firstTextRow{
		Harness: harness, Turns: len(alone), Alone: alone, Runnel: served,
		AloneFirstText:  spreadOf(pick(alone, func(t turnTimes) time.Duration { return t.FirstText })),
		AloneEnd:        spreadOf(pick(alone, func(t turnTimes) time.Duration { return t.End })),
		AloneGone:       spreadOf(pick(alone, func(t turnTimes) time.Duration { return t.Gone })),
		AloneSetup:      spreadOf(pick(alone, func(t turnTimes) time.Duration { return t.Setup })),
		AloneCPU:        spreadOf(pick(alone, func(t turnTimes) time.Duration { return t.CPU.Total() })),
		RunnelFirstText: spreadOf(pick(served, func(t turnTimes) time.Duration { return t.FirstText })),
		RunnelEnd:       spreadOf(pick(served, func(t turnTimes) time.Duration { return t.End })),
		RunnelCPU:       spreadOf(pick(served, func(t turnTimes) time.Duration { return t.CPU.Total() })),
		RunnelOwnCPU:    spreadOf(pick(served, func(t turnTimes) time.Duration { return t.CPU.Self })),
		RunnelAgentCPU:  spreadOf(pick(served, func(t turnTimes) time.Duration { return t.CPU.Children })),
	}
	r.FirstTextOverheadMs = r.RunnelFirstText.Median - r.AloneFirstText.Median
	r.FirstTextRatio = r.RunnelFirstText.Median / r.AloneFirstText.Median
	r.EndOverheadMs = r.RunnelEnd.Median - r.AloneEnd.Median
	r.EndRatio = r.RunnelEnd.Median / r.AloneEnd.Median
	r.EndOverGoneMs = r.RunnelEnd.Median - r.AloneGone.Median
	r.CPURatio = r.RunnelCPU.Median / r.AloneCPU.Median
	return r
}

func (r firstTextRow) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s, %d turns each (median, min–max)\n", r.Harness, r.Turns)
	fmt.Fprintf(w, "  %-15s %-24s %-24s %-24s %s\n", "", "first text", "turn end", "agent gone", "CPU")
	fmt.Fprintf(w, "  %-15s %-24s %-24s %-24s %s (the agent's tree); launch recipe before the clock: %.1f ms\n",
		"alone", r.AloneFirstText, r.AloneEnd, r.AloneGone, r.AloneCPU, r.AloneSetup.Median)
	fmt.Fprintf(w, "  %-15s %-24s %-24s %-24s %s (runnel's own %.0f ms, its agent's %.0f ms)\n",
		"through runnel", r.RunnelFirstText, r.RunnelEnd, "(before the end)", r.RunnelCPU, r.RunnelOwnCPU.Median, r.RunnelAgentCPU.Median)
	fmt.Fprintf(w, "  runnel − alone: first text %+.0f ms (×%.2f), turn end %+.0f ms (×%.2f; %+.0f ms over the agent gone), CPU ×%.2f\n",
		r.FirstTextOverheadMs, r.FirstTextRatio, r.EndOverheadMs, r.EndRatio, r.EndOverGoneMs, r.CPURatio)
}

// toolCallReport is the tool-call result.
type toolCallReport struct {
	CallsPerTurn int     `json:"callsPerTurn"`
	Turns        int     `json:"turns"`
	PollMs       float64 `json:"relayPollMs"`

	RunnelCall spread  `json:"runnelCall"`
	RunnelP90  float64 `json:"runnelCallP90Ms"`
	RelayCall  spread  `json:"relayCall"`
	RelayP90   float64 `json:"relayCallP90Ms"`
	// RunnelTurn and RunnelEmptyTurn are whole turns, with the calls and
	// with none; RelayTurn the relay's calls from the first write to the
	// runner loop's stop.
	RunnelTurn      spread `json:"runnelTurn"`
	RunnelEmptyTurn spread `json:"runnelEmptyTurn"`
	RelayTurn       spread `json:"relayTurn"`

	// CPU per call, in µs. For runnel, the marginal cost: (CPU of the
	// turns with calls − CPU of as many turns with none) / calls, runnel's
	// own and runnel's plus the agent's; the raw figures divide the turns
	// with calls by their calls, the turn's fixed cost included.
	RunnelOwnCPUPerCallUs      float64 `json:"runnelOwnCpuPerCallUs"`
	RunnelTotalCPUPerCallUs    float64 `json:"runnelTotalCpuPerCallUs"`
	RunnelOwnCPUPerCallRawUs   float64 `json:"runnelOwnCpuPerCallRawUs"`
	RunnelTotalCPUPerCallRawUs float64 `json:"runnelTotalCpuPerCallRawUs"`
	RelayCPUPerCallUs          float64 `json:"relayCpuPerCallUs"`

	// Ratios: relay over runnel.
	CallRatio     float64 `json:"callRatio"`
	P90Ratio      float64 `json:"p90Ratio"`
	CPURatioOwn   float64 `json:"cpuRatioOwn"`
	CPURatioTotal float64 `json:"cpuRatioTotal"`

	Runnel      []toolTurn `json:"runnel"`
	RunnelEmpty []toolTurn `json:"runnelEmpty"`
	Relay       []toolTurn `json:"relay"`
}

func newToolCallReport(cfg config, withCalls, empty, relay []toolTurn) *toolCallReport {
	calls := func(ts []toolTurn) []time.Duration {
		var out []time.Duration
		for _, t := range ts {
			out = append(out, t.Calls...)
		}
		return out
	}
	walls := func(ts []toolTurn) []time.Duration {
		var out []time.Duration
		for _, t := range ts {
			out = append(out, t.Wall)
		}
		return out
	}
	cpu := func(ts []toolTurn) (c benchkit.CPU) {
		for _, t := range ts {
			c.Self += t.CPU.Self
			c.Children += t.CPU.Children
		}
		return c
	}
	rc, xc := calls(withCalls), calls(relay)
	r := &toolCallReport{
		CallsPerTurn: cfg.calls, Turns: len(withCalls), PollMs: ms(cfg.poll),
		RunnelCall: spreadOf(rc), RunnelP90: ms(benchkit.Quantile(rc, 0.9)),
		RelayCall: spreadOf(xc), RelayP90: ms(benchkit.Quantile(xc, 0.9)),
		RunnelTurn: spreadOf(walls(withCalls)), RunnelEmptyTurn: spreadOf(walls(empty)), RelayTurn: spreadOf(walls(relay)),
		Runnel: withCalls, RunnelEmpty: empty, Relay: relay,
	}
	// Every contestant ran the same number of turns (one per round).
	n := float64(len(rc))
	full, none := cpu(withCalls), cpu(empty)
	r.RunnelOwnCPUPerCallUs = us(full.Self-none.Self) / n
	r.RunnelTotalCPUPerCallUs = us(full.Total()-none.Total()) / n
	r.RunnelOwnCPUPerCallRawUs = us(full.Self) / n
	r.RunnelTotalCPUPerCallRawUs = us(full.Total()) / n
	r.RelayCPUPerCallUs = us(cpu(relay).Self) / float64(len(xc))
	r.CallRatio = r.RelayCall.Median / r.RunnelCall.Median
	r.P90Ratio = r.RelayP90 / r.RunnelP90
	r.CPURatioOwn = r.RelayCPUPerCallUs / r.RunnelOwnCPUPerCallUs
	r.CPURatioTotal = r.RelayCPUPerCallUs / r.RunnelTotalCPUPerCallUs
	return r
}

func (r *toolCallReport) print(w io.Writer) {
	fmt.Fprintf(w, "%d turns × %d calls each\n", r.Turns, r.CallsPerTurn)
	fmt.Fprintf(w, "  %-34s %-14s %-12s %-20s %s\n", "", "call median", "call p90", "call min–max", "CPU per call")
	fmt.Fprintf(w, "  %-34s %10.3f ms %8.3f ms %9.3f–%.3f ms  runnel %.0f µs, runnel + agent %.0f µs (over a turn with no call; raw %.0f / %.0f µs)\n",
		"runnel MCP server (fake agent)", r.RunnelCall.Median, r.RunnelP90, r.RunnelCall.Min, r.RunnelCall.Max,
		r.RunnelOwnCPUPerCallUs, r.RunnelTotalCPUPerCallUs, r.RunnelOwnCPUPerCallRawUs, r.RunnelTotalCPUPerCallRawUs)
	fmt.Fprintf(w, "  %-34s %10.3f ms %8.3f ms %9.3f–%.3f ms  relay process %.0f µs\n",
		fmt.Sprintf("file relay, %.0f ms poll", r.PollMs), r.RelayCall.Median, r.RelayP90, r.RelayCall.Min, r.RelayCall.Max, r.RelayCPUPerCallUs)
	fmt.Fprintf(w, "  relay / runnel: call median ×%.0f, p90 ×%.0f; CPU per call ×%.1f over runnel's own, ×%.1f over runnel + agent\n",
		r.CallRatio, r.P90Ratio, r.CPURatioOwn, r.CPURatioTotal)
	fmt.Fprintf(w, "  whole turns: runnel %s with the calls, %s with none; relay %s (its random waits included)\n",
		r.RunnelTurn, r.RunnelEmptyTurn, r.RelayTurn)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
