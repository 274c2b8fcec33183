package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// check is one claim the benchmark makes, and whether this run bore it out.
type check struct {
	What string `json:"what"`
	OK   bool   `json:"ok"`
	Got  string `json:"got"`
}

// checks are the claims of the four phases.
func checks(r *report) []check {
	var out []check
	add := func(what string, ok bool, format string, args ...any) {
		out = append(out, check{what, ok, fmt.Sprintf(format, args...)})
	}
	a, b, c, d := r.Load, r.Resume, r.Kill, r.Drain
	grace, _ := time.ParseDuration(d.Grace)
	stopDelay, _ := time.ParseDuration(r.Settings.StopDelay)
	add("a. no run of the load fails", a.Errors == 0, "%d of %d failed", a.Errors, a.Runs)
	add("b. every pause resumes on another replica", b.Resumed == b.Flows, "%d of %d", b.Resumed, b.Flows)
	add("b. each approved tool ran exactly once", b.Once == b.Flows && b.Executed == b.Flows,
		"%d ran once; %d executions for %d flows", b.Once, b.Executed, b.Flows)
	add("b. no run of the load fails", b.Load.Errors == 0, "%d of %d failed", b.Load.Errors, b.Load.Runs)
	add("c. runs on the other replicas do not fail", c.OthersErrors == 0, "%d of %d failed", c.OthersErrors, c.Others)
	add("c. runs started after HAProxy marked the replica down do not fail", c.AfterErrors == 0,
		"%d of %d failed", c.AfterErrors, c.After)
	add("d. no run fails while a replica drains", d.Load.Errors == 0, "%d of %d failed", d.Load.Errors, d.Load.Runs)
	add("d. the runs in flight on the drained replica complete", d.InFlight > 0 && d.InFlightOK == d.InFlight,
		"%d of %d", d.InFlightOK, d.InFlight)
	add("d. the drained replica exits within the delay and the grace", d.ExitMs >= 0 && d.ExitMs <= ms(stopDelay+grace),
		"exited after %.0f ms (delay %s, grace %s)", d.ExitMs, r.Settings.StopDelay, d.Grace)
	return out
}

// printReport writes the summary tables.
func printReport(w io.Writer, r *report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	a := r.Load
	fmt.Fprintf(tw, "\nmachine: %d CPUs, %s, %s, %s; load average %s → %s\n", r.Machine.CPUs, r.Machine.Go,
		r.Machine.HAProxy, r.Machine.Runnel, r.Machine.LoadAvgFrom, r.Machine.LoadAvgTo)
	fmt.Fprintf(tw, "\na. load: %d streaming runs in flight for %s through HAProxy\n", a.Workers, r.Settings.Duration)
	fmt.Fprintf(tw, "runs\terrors\truns/s\tp50\tp99\tfirst record p50\tfirst to last record p50\trecords/run\n")
	fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\t%.1f\n", a.Runs, a.Errors, a.RunsPerS, a.P50Ms, a.P99Ms,
		a.FirstEventP50Ms, a.SpanP50Ms, a.RecordsPerRun)
	fmt.Fprintf(tw, "\nprocess\truns served\tshare\tCPU\tCPU per run\tCPU ÷ HAProxy's\n")
	var replicasCPU float64
	for _, name := range slices.Sorted(maps.Keys(a.ReplicaCPUMs)) {
		n, cpu := a.PerReplica[name], a.ReplicaCPUMs[name]
		replicasCPU += cpu
		fmt.Fprintf(tw, "runnel %s\t%d\t%.1f %%\t%.2f s\t%.2f ms\t%.2f\n", name, n, pct(n, a.Runs), cpu/1000,
			perRun(cpu, n), ratio(cpu, a.BalancerCPUMs))
	}
	fmt.Fprintf(tw, "3 replicas\t%d\t\t%.2f s\t%.2f ms\t%.2f\n", a.Runs, replicasCPU/1000, perRun(replicasCPU, a.Runs),
		ratio(replicasCPU, a.BalancerCPUMs))
	fmt.Fprintf(tw, "HAProxy 2 threads\t%d\t\t%.2f s\t%.2f ms\t1\n", a.Runs, a.BalancerCPUMs/1000, perRun(a.BalancerCPUMs, a.Runs))
	fmt.Fprintf(tw, "driver (client, fake model, tool endpoint)\t\t\t%.2f s\t%.2f ms\t%.2f\n", a.DriverCPUMs/1000,
		perRun(a.DriverCPUMs, a.Runs), ratio(a.DriverCPUMs, a.BalancerCPUMs))
	fmt.Fprintf(tw, "distribution skew (most ÷ fewest runs served): %.3f\n", a.Skew)
	if len(a.ErrorKinds) > 0 {
		fmt.Fprintf(tw, "errors: %s\n", kinds(a.ErrorKinds))
	}

	b := r.Resume
	fmt.Fprintf(tw, "\nb. %d pauses through HAProxy, each resumed on the next replica's port, during %s of load\n", b.Flows, r.Settings.Window)
	fmt.Fprintf(tw, "paused\tresumed elsewhere\ttool ran once\ttool executions\tpause p50\tresume p50\tpaused on\tload runs\tload errors\n")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.0f ms\t%.0f ms\t%s\t%d\t%d\n", b.Paused, b.Resumed, b.Once, b.Executed, b.PauseP50,
		b.ResumeMs, kinds(b.PausedOn), b.Load.Runs, b.Load.Errors)
	printErrors(tw, "failures", b.Failures, b.Load.ErrorKinds)

	c := r.Kill
	fmt.Fprintf(tw, "\nc. SIGKILL of %s at %.1f s into %s of load; HAProxy marked it DOWN %.0f ms later; back UP %.0f ms after its restart\n",
		c.Victim, c.SignalAtS, r.Settings.Window, c.DownAfterMs, c.BackUpAfterMs)
	fmt.Fprintf(tw, "runs\tin flight on %s\tof which failed\ton the other replicas\tfailed\tstarted before DOWN\tfailed\tstarted after DOWN\tfailed\n", c.Victim)
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Load.Runs, c.InFlight, c.InFlightFailed, c.Others, c.OthersErrors,
		c.Between, c.BetweenErrors, c.After, c.AfterErrors)
	fmt.Fprintf(tw, "HAProxy sent %d requests whose connection to %s failed to another replica (wredis); retried %d on %s itself (wretr)\n",
		c.Redispatches, c.Victim, c.Retries, c.Victim)
	printErrors(tw, "what the clients of "+c.Victim+"'s runs saw", c.Seen)
	printErrors(tw, "other failures", c.Elsewhere)

	d := r.Drain
	fmt.Fprintf(tw, "\nd. SIGTERM of %s at %.1f s into %s of load (shutdown delay %s, grace %s)\n", d.Victim, d.SignalAtS, r.Settings.Window, r.Settings.StopDelay, d.Grace)
	fmt.Fprintf(tw, "runs\terrors\tin flight on %s\tcompleted\tlast ended after\tmarked DOWN after\texited after\tnew runs it got after SIGTERM\n", d.Victim)
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.0f ms\t%.0f ms\t%.0f ms\t%d\n", d.Load.Runs, d.Load.Errors, d.InFlight, d.InFlightOK,
		d.LastInFlightMs, d.DownAfterMs, d.ExitMs, d.LateStarts)
	fmt.Fprintf(tw, "HAProxy sent %d requests whose connection to %s failed to another replica (wredis); retried %d on %s itself (wretr)\n",
		d.Redispatches, d.Victim, d.Retries, d.Victim)
	printErrors(tw, "errors", d.InFlightErrors, d.Load.ErrorKinds)
	fmt.Fprintf(tw, "%s's log: %s\n", d.Victim, strings.Join(d.Log, "; "))

	fmt.Fprintf(tw, "\ncheck\tresult\tgot\n")
	for _, ch := range r.Checks {
		res := "ok"
		if !ch.OK {
			res = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.What, res, ch.Got)
	}
}

func printErrors(w io.Writer, title string, ms ...map[string]int) {
	all := map[string]int{}
	for _, m := range ms {
		for k, v := range m {
			all[k] += v
		}
	}
	if len(all) > 0 {
		fmt.Fprintf(w, "%s: %s\n", title, kinds(all))
	}
}

// kinds lists a count map, biggest first.
func kinds(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %q", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func perRun(ms float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return ms / float64(n)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
