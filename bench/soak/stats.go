package main

import "math"

// fit is a least-squares line y = intercept + slope·x through points.
type fit struct {
	N         int     `json:"n"`
	Slope     float64 `json:"slope"`
	Intercept float64 `json:"intercept"`
	// SlopeErr is the slope's standard error: a slope within about two
	// of these of zero is no trend the samples can tell from noise.
	SlopeErr float64 `json:"slopeStdErr"`
	Mean     float64 `json:"meanY"`
	Min      float64 `json:"minY"`
	Max      float64 `json:"maxY"`
}

// fitLine fits a line through (xs[i], ys[i]). With fewer than two points,
// or every x the same, the slope is 0; with fewer than three the standard
// error is 0 (two points fit exactly).
func fitLine(xs, ys []float64) fit {
	n := min(len(xs), len(ys))
	f := fit{N: n}
	if n == 0 {
		return f
	}
	var sx, sy float64
	f.Min, f.Max = math.Inf(1), math.Inf(-1)
	for i := range n {
		sx += xs[i]
		sy += ys[i]
		f.Min, f.Max = min(f.Min, ys[i]), max(f.Max, ys[i])
	}
	mx, my := sx/float64(n), sy/float64(n)
	f.Mean, f.Intercept = my, my
	var sxx, sxy float64
	for i := range n {
		dx := xs[i] - mx
		sxx += dx * dx
		sxy += dx * (ys[i] - my)
	}
	if n < 2 || sxx == 0 {
		return f
	}
	f.Slope = sxy / sxx
	f.Intercept = my - f.Slope*mx
	if n > 2 {
		var sse float64
		for i := range n {
			r := ys[i] - (f.Intercept + f.Slope*xs[i])
			sse += r * r
		}
		f.SlopeErr = math.Sqrt(sse / float64(n-2) / sxx)
	}
	return f
}

// percentPer is the slope as a percentage of the mean over span units of
// x: how much the fitted line rises over span, relative to the mean.
func (f fit) percentPer(span float64) float64 {
	if f.Mean == 0 {
		return 0
	}
	return f.Slope * span / f.Mean * 100
}

// interval is what happened between two samples: the runs finished per
// second and where the host's CPU went, in cores (1.0 is one CPU busy
// the whole interval).
type interval struct {
	From      float64 `json:"from"` // seconds since the load started
	To        float64 `json:"to"`
	RunsPerS  float64 `json:"runsPerS"`
	Serve     float64 `json:"serve"`     // runnel serve
	Driver    float64 `json:"driver"`    // this process: fake model, tools, client
	Others    float64 `json:"others"`    // every other process on the host
	IRQ       float64 `json:"irq"`       // interrupts and softirqs (the loopback network)
	Steal     float64 `json:"steal"`     // taken by the hypervisor
	Pressure  float64 `json:"pressure"`  // share of the time some task waited for a CPU (PSI)
	FailedNow int64   `json:"failedNow"` // runs that failed in the interval
}

func between(a, b sample) interval {
	secs := b.At - a.At
	in := interval{From: a.At, To: b.At, FailedNow: b.Errors - a.Errors}
	if secs <= 0 {
		return in
	}
	cores := func(ms int64) float64 { return float64(ms) / 1000 / secs }
	in.RunsPerS = float64(b.Completed-a.Completed) / secs
	in.Serve, in.Driver = cores(b.ServeCPUMs-a.ServeCPUMs), cores(b.DriverCPUMs-a.DriverCPUMs)
	in.Others = max(0, cores(b.Host.BusyMs-a.Host.BusyMs)-in.Serve-in.Driver)
	in.IRQ, in.Steal = cores(b.Host.IRQMs-a.Host.IRQMs), cores(b.Host.StealMs-a.Host.StealMs)
	in.Pressure = float64(b.Host.PressureUs-a.Host.PressureUs) / 1e6 / secs
	return in
}

// slowest is the interval among samples, from the one at or after
// `after` seconds on, in which the fewest runs finished per second.
func slowest(samples []sample, after float64) (interval, bool) {
	var worst interval
	found := false
	for i := 1; i < len(samples); i++ {
		if samples[i-1].At < after {
			continue
		}
		in := between(samples[i-1], samples[i])
		if !found || in.RunsPerS < worst.RunsPerS {
			worst, found = in, true
		}
	}
	return worst, found
}
