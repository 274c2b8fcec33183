package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
)

// cluster is what the phases act on.
type cluster struct {
	cfg      config
	client   *client
	fakes    *fakes
	lb       *balancer
	replicas []*replica
}

// loadSummary is the load of a phase, seen from the client.
type loadSummary struct {
	Runs       int            `json:"runs"`
	Errors     int            `json:"errors"`
	ErrorKinds map[string]int `json:"errorKinds,omitempty"`
	PerReplica map[string]int `json:"perReplica"`
}

func summarize(outs []outcome) loadSummary {
	s := loadSummary{Runs: len(outs), PerReplica: map[string]int{}}
	for _, o := range outs {
		s.PerReplica[o.replica]++
		if !o.ok() {
			s.Errors++
			if s.ErrorKinds == nil {
				s.ErrorKinds = map[string]int{}
			}
			s.ErrorKinds[o.err]++
		}
	}
	return s
}

// loadReport is phase a.
type loadReport struct {
	loadSummary
	Workers         int     `json:"workers"`
	WindowS         float64 `json:"windowS"`
	ElapsedS        float64 `json:"elapsedS"`
	RunsPerS        float64 `json:"runsPerS"`
	P50Ms           float64 `json:"latencyP50Ms"`
	P99Ms           float64 `json:"latencyP99Ms"`
	FirstEventP50Ms float64 `json:"firstEventP50Ms"`
	// SpanP50Ms is from a run's first record to its last, as the client
	// read them: a balancer that held the stream back would shrink it.
	SpanP50Ms     float64            `json:"firstToLastRecordP50Ms"`
	RecordsPerRun float64            `json:"recordsPerRun"`
	Skew          float64            `json:"skewMaxOverMin"`
	ReplicaCPUMs  map[string]float64 `json:"replicaCpuMs"`
	BalancerCPUMs float64            `json:"haproxyCpuMs"`
	DriverCPUMs   float64            `json:"driverCpuMs"`
	// ReplicasOverBalancer is the replicas' CPU, all three together, over
	// HAProxy's in the same window.
	ReplicasOverBalancer float64 `json:"replicasCpuOverHaproxyCpu"`
}

// phaseLoad is phase a: the load alone, with the CPU time of every
// process read around it.
func (c *cluster) phaseLoad(ctx context.Context) (*loadReport, error) {
	before, err := c.cpu()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	outs := c.client.load(ctx, c.lb.url, c.cfg.workers, c.cfg.duration, c.cfg.runLength())
	elapsed := time.Since(start)
	after, err := c.cpu()
	if err != nil {
		return nil, err
	}
	rep := &loadReport{loadSummary: summarize(outs), Workers: c.cfg.workers, WindowS: c.cfg.duration.Seconds(),
		ElapsedS: elapsed.Seconds(), ReplicaCPUMs: map[string]float64{}}
	var lat, first, span []time.Duration
	records := 0
	for _, o := range outs {
		if o.ok() {
			lat = append(lat, o.end.Sub(o.start))
			first = append(first, o.firstEvent.Sub(o.start))
			span = append(span, o.end.Sub(o.firstEvent))
			records += o.records
		}
	}
	ok := rep.Runs - rep.Errors
	rep.RunsPerS = float64(ok) / elapsed.Seconds()
	rep.P50Ms, rep.P99Ms = ms(benchkit.Quantile(lat, 0.5)), ms(benchkit.Quantile(lat, 0.99))
	rep.FirstEventP50Ms, rep.SpanP50Ms = ms(benchkit.Median(first)), ms(benchkit.Median(span))
	if ok > 0 {
		rep.RecordsPerRun = float64(records) / float64(ok)
	}
	lo, hi := 0, 0
	var replicasCPU time.Duration
	for i, r := range c.replicas {
		n := rep.PerReplica[r.name]
		if i == 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
		d := after.replicas[i] - before.replicas[i]
		replicasCPU += d
		rep.ReplicaCPUMs[r.name] = ms(d)
	}
	if lo > 0 {
		rep.Skew = float64(hi) / float64(lo)
	}
	rep.BalancerCPUMs = ms(after.balancer - before.balancer)
	rep.DriverCPUMs = ms(after.driver - before.driver)
	if after.balancer > before.balancer {
		rep.ReplicasOverBalancer = float64(replicasCPU) / float64(after.balancer-before.balancer)
	}
	return rep, nil
}

type cpuReading struct {
	replicas []time.Duration
	balancer time.Duration
	driver   time.Duration
}

func (c *cluster) cpu() (cpuReading, error) {
	var r cpuReading
	for _, rep := range c.replicas {
		t, err := benchkit.ReadCPU(rep.pid())
		if err != nil {
			return r, err
		}
		r.replicas = append(r.replicas, t.Self)
	}
	t, err := benchkit.ReadCPU(c.lb.pid())
	if err != nil {
		return r, err
	}
	r.balancer = t.Self
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return r, err
	}
	r.driver = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return r, nil
}

// resumeReport is phase b.
type resumeReport struct {
	Flows int `json:"flows"`
	// Paused: paused through the balancer with one approval, the tool not
	// run. Resumed: completed on another replica, sent straight to its
	// port, with the tool's result in the output.
	Paused   int            `json:"paused"`
	Resumed  int            `json:"resumedOnAnotherReplica"`
	Once     int            `json:"toolExecutedOnce"`
	Executed int            `json:"toolExecutionsInAll"`
	Failures map[string]int `json:"failures,omitempty"`
	PausedOn map[string]int `json:"pausedOn"`
	PauseP50 float64        `json:"pauseP50Ms"`
	ResumeMs float64        `json:"resumeP50Ms"`
	Load     loadSummary    `json:"load"`
}

// phaseResume is phase b: approvals paused on one replica and resumed on
// another, all at once, a quarter into the load.
func (c *cluster) phaseResume(ctx context.Context) *resumeReport {
	type flow struct {
		pause, resume outcome
		err           string
	}
	flows := make([]flow, c.cfg.approvals)
	var outs []outcome
	var wg sync.WaitGroup
	wg.Go(func() { outs = c.client.load(ctx, c.lb.url, c.cfg.workers, c.cfg.window, c.cfg.runLength()) })
	if benchkit.Sleep(ctx, c.cfg.window/4) == nil {
		for i := range flows {
			wg.Go(func() {
				p, r, err := c.approvalFlow(ctx, i)
				flows[i] = flow{p, r, err}
			})
		}
	}
	wg.Wait()
	rep := &resumeReport{Flows: len(flows), PausedOn: map[string]int{}, Load: summarize(outs)}
	var pauses, resumes []time.Duration
	for _, f := range flows {
		if f.pause.replica != "" {
			rep.PausedOn[f.pause.replica]++
		}
		if f.err != "" {
			rep.Failures = count(rep.Failures, f.err)
			if !strings.HasPrefix(f.err, "pause:") {
				rep.Paused++
			}
			continue
		}
		rep.Paused++
		rep.Resumed++
		rep.Once++
		pauses = append(pauses, f.pause.end.Sub(f.pause.start))
		resumes = append(resumes, f.resume.end.Sub(f.resume.start))
	}
	rep.Executed = c.fakes.tools.executed(deleteTool)
	rep.PauseP50, rep.ResumeMs = ms(benchkit.Median(pauses)), ms(benchkit.Median(resumes))
	return rep
}

// approvalFlow pauses one run through the balancer, checks that its tool
// did not run, resumes it on the next replica (by the balancer's name for
// the one that paused it) with the approval in the replayed conversation,
// and checks that the tool ran exactly once. err says what went wrong.
func (c *cluster) approvalFlow(ctx context.Context, i int) (pause, resume outcome, err string) {
	prompt := runnel.UserText(fmt.Sprintf("Please delete report.docx (flow %d).", i))
	res, pause := c.client.run(ctx, c.lb.url, "", c.client.request([]runnel.Message{prompt}))
	if !pause.ok() {
		return pause, resume, "pause: " + pause.err
	}
	if res.Status != runnel.StatusPaused || len(res.Interactions) != 1 {
		pause.err = fmt.Sprintf("pause: status %s with %d interactions (%s)", res.Status, len(res.Interactions), res.Error)
		return pause, resume, pause.err
	}
	it := res.Interactions[0]
	if n := c.fakes.tools.executions(deleteTool, it.ToolCallID); n != 0 {
		return pause, resume, fmt.Sprintf("pause: the tool ran %d times before the approval", n)
	}
	next := c.otherReplica(pause.replica)
	if next == nil {
		return pause, resume, fmt.Sprintf("pause: served by %q, not a replica", pause.replica)
	}
	approval, _ := json.Marshal(map[string]any{"approved": true, "interactionId": it.ID, "signature": it.Signature})
	messages := append([]runnel.Message{prompt}, res.Messages...)
	messages = append(messages, runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{{
		Type: runnel.BlockToolResult, ToolCallID: it.ToolCallID, ToolName: it.ToolName,
		Kind: runnel.ResultKindApproval, Output: approval}}})
	res, resume = c.client.run(ctx, next.url, next.name, c.client.request(messages))
	if !resume.ok() {
		return pause, resume, "resume: " + resume.err
	}
	if err := checkCompleted(res, "Done: deleted report.docx for call "+it.ToolCallID); err != nil {
		resume.err = "resume: " + err.Error()
		return pause, resume, resume.err
	}
	if n := c.fakes.tools.executions(deleteTool, it.ToolCallID); n != 1 {
		return pause, resume, fmt.Sprintf("resume: the tool ran %d times", n)
	}
	return pause, resume, ""
}

// otherReplica is the replica after the one named (round the ring).
func (c *cluster) otherReplica(name string) *replica {
	for i, r := range c.replicas {
		if r.name == name {
			return c.replicas[(i+1)%len(c.replicas)]
		}
	}
	return nil
}

// downReport is how a replica left the balancer: when it was signalled,
// and how long until HAProxy marked it DOWN.
type downReport struct {
	Victim      string  `json:"victim"`
	SignalAtS   float64 `json:"signalAtS"`
	DownAfterMs float64 `json:"markedDownAfterMs"`
	// Retries and Redispatches are HAProxy's counts over the phase (wretr,
	// wredis): requests whose connection to the victim failed and that it
	// tried on the victim again, or sent to another server instead. Those
	// are failures its retries kept from the clients.
	Retries      int64 `json:"haproxyRetries"`
	Redispatches int64 `json:"haproxyRedispatches"`
}

// killReport is phase c.
type killReport struct {
	downReport
	// InFlight are the runs open at the kill on the killed replica: those
	// whose answer named it, and those that got no answer at all (HAProxy
	// names the server on every answer it sends, its own 502 included, so
	// a run with none was cut before its first byte; the other replicas'
	// runs are counted apart). Seen is what their clients saw.
	InFlight       int            `json:"inFlightOnVictim"`
	InFlightFailed int            `json:"inFlightOnVictimFailed"`
	Seen           map[string]int `json:"inFlightOnVictimSaw,omitempty"`
	// Others are the runs the other replicas answered, the whole phase.
	Others       int `json:"otherReplicasRuns"`
	OthersErrors int `json:"otherReplicasErrors"`
	// Between started after the kill and before HAProxy marked it down;
	// After started once it was down.
	Between       int            `json:"startedBeforeMarkedDown"`
	BetweenErrors int            `json:"startedBeforeMarkedDownErrors"`
	After         int            `json:"startedAfterMarkedDown"`
	AfterErrors   int            `json:"startedAfterMarkedDownErrors"`
	Elsewhere     map[string]int `json:"otherFailures,omitempty"`
	BackUpAfterMs float64        `json:"restartedAndUpAfterMs"`
	Load          loadSummary    `json:"load"`
}

// phaseKill is phase c: SIGKILL one replica a third into the load, then
// restart it once the load is over.
func (c *cluster) phaseKill(ctx context.Context) (*killReport, error) {
	victim := c.replicas[1]
	var outs []outcome
	var wg sync.WaitGroup
	counters := c.retried(victim)
	start := time.Now()
	wg.Go(func() { outs = c.client.load(ctx, c.lb.url, c.cfg.workers, c.cfg.window, c.cfg.runLength()) })
	down, err := c.takeDown(ctx, victim, syscall.SIGKILL, start)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	after := c.retried(victim)
	down.Retries, down.Redispatches = after.Retries-counters.Retries, after.Redispatches-counters.Redispatches
	rep := &killReport{downReport: down, Load: summarize(outs)}
	at := start.Add(time.Duration(down.SignalAtS * float64(time.Second)))
	downAt := at.Add(time.Duration(down.DownAfterMs * float64(time.Millisecond)))
	for _, o := range outs {
		switch {
		case o.inFlightAt(at) && (o.replica == victim.name || (o.replica == "" && !o.ok())):
			rep.InFlight++
			if !o.ok() {
				rep.InFlightFailed++
				rep.Seen = count(rep.Seen, o.err)
			}
		case o.replica != "" && o.replica != victim.name:
			rep.Others++
			if !o.ok() {
				rep.OthersErrors++
				rep.Elsewhere = count(rep.Elsewhere, o.replica+": "+o.err)
			}
		case !o.ok():
			rep.Elsewhere = count(rep.Elsewhere, fmt.Sprintf("%s, started %+.0f ms after the kill: %s",
				orNone(o.replica), ms(o.start.Sub(at)), o.err))
		}
		switch {
		case o.start.After(downAt):
			rep.After++
			if !o.ok() {
				rep.AfterErrors++
			}
		case o.start.After(at):
			rep.Between++
			if !o.ok() {
				rep.BetweenErrors++
			}
		}
	}
	restart := time.Now()
	if err := victim.start(ctx); err != nil {
		return rep, err
	}
	up, err := c.lb.waitStatus(ctx, victim.name, "UP", 30*time.Second)
	if err != nil {
		return rep, err
	}
	rep.BackUpAfterMs = ms(up.Sub(restart))
	return rep, nil
}

// retried reads HAProxy's retry counters of victim (zero when the stats
// socket does not answer; the phase's checks do not depend on them).
func (c *cluster) retried(victim *replica) serverStat {
	st, err := c.lb.stats()
	if err != nil {
		return serverStat{}
	}
	return st[victim.name]
}

// takeDown signals victim a third into the phase's window and waits until
// HAProxy marks it DOWN.
func (c *cluster) takeDown(ctx context.Context, victim *replica, sig syscall.Signal, start time.Time) (downReport, error) {
	rep := downReport{Victim: victim.name}
	if err := benchkit.Sleep(ctx, c.cfg.window/3); err != nil {
		return rep, err
	}

	at := time.Now()
	if err := victim.cmd.Process.Signal(sig); err != nil {
		return rep, fmt.Errorf("signal %s: %w", victim.name, err)
	}
	rep.SignalAtS = at.Sub(start).Seconds()
	downAt, err := c.lb.waitStatus(ctx, victim.name, "DOWN", 30*time.Second)
	if err != nil {
		return rep, err
	}
	rep.DownAfterMs = ms(downAt.Sub(at))
	return rep, nil
}

// drainReport is phase d.
type drainReport struct {
	downReport
	Grace string `json:"shutdownGrace"`
	// InFlight are the runs the replica was serving at SIGTERM.
	InFlight       int            `json:"inFlightOnVictim"`
	InFlightOK     int            `json:"inFlightOnVictimCompleted"`
	InFlightErrors map[string]int `json:"inFlightOnVictimErrors,omitempty"`
	// LastInFlightMs is when the last of them ended, after SIGTERM;
	// ExitMs when the process exited (the drain's length).
	LastInFlightMs float64 `json:"lastInFlightEndedAfterMs"`
	ExitMs         float64 `json:"exitedAfterMs"`
	// LateStarts are runs that started after SIGTERM and still reached the
	// draining replica.
	LateStarts int         `json:"startedAfterSigtermOnVictim"`
	Log        []string    `json:"victimLog"`
	Load       loadSummary `json:"load"`
}

// phaseDrain is phase d: SIGTERM one replica a third into the load.
func (c *cluster) phaseDrain(ctx context.Context) (*drainReport, error) {
	victim := c.replicas[2]
	var outs []outcome
	var wg sync.WaitGroup
	counters := c.retried(victim)
	start := time.Now()
	wg.Go(func() { outs = c.client.load(ctx, c.lb.url, c.cfg.workers, c.cfg.window, c.cfg.runLength()) })
	down, err := c.takeDown(ctx, victim, syscall.SIGTERM, start)
	if err != nil {
		wg.Wait()
		return nil, err
	}
	at := start.Add(time.Duration(down.SignalAtS * float64(time.Second)))
	exitedAt, exited := victim.wait(c.cfg.stopDelay + c.cfg.grace + 15*time.Second)
	wg.Wait()
	after := c.retried(victim)
	down.Retries, down.Redispatches = after.Retries-counters.Retries, after.Redispatches-counters.Redispatches
	rep := &drainReport{downReport: down, Grace: c.cfg.grace.String(), Load: summarize(outs)}
	if exited {
		rep.ExitMs = ms(exitedAt.Sub(at))
	} else {
		rep.ExitMs = -1
		victim.kill()
	}
	for _, o := range outs {
		if o.replica != victim.name {
			continue
		}
		if o.start.After(at) {
			rep.LateStarts++
		}
		if !o.inFlightAt(at) {
			continue
		}
		rep.InFlight++
		if o.ok() {
			rep.InFlightOK++
		} else {
			rep.InFlightErrors = count(rep.InFlightErrors, o.err)
		}
		rep.LastInFlightMs = max(rep.LastInFlightMs, ms(o.end.Sub(at)))
	}
	rep.Log = drainLog(victim)
	return rep, nil
}

// drainLog is what the drained replica logged about its shutdown.
func drainLog(r *replica) []string {
	raw, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", r.name, r.gen)))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		var l struct {
			Msg      string `json:"msg"`
			Inflight *int   `json:"inflight"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch {
		case strings.Contains(l.Msg, "drain"), strings.Contains(l.Msg, "grace"), l.Msg == "stopped",
			strings.Contains(l.Msg, "closing connections"):
			if l.Inflight != nil {
				out = append(out, fmt.Sprintf("%s (inflight %d)", l.Msg, *l.Inflight))
			} else {
				out = append(out, l.Msg)
			}
		}
	}
	return out
}

func orNone(replica string) string {
	if replica == "" {
		return "no answer"
	}
	return replica
}

func count(m map[string]int, k string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k]++
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
