// Command sandbox times the start of a command in each of runnel's
// sandboxes, in one invocation: `bash -c true` run the way a run's bash
// builtin runs it (sandbox.RunCommand in a workspace under the host's
// containment), on the local sandbox and on the isolated one with the
// policies a run gets most (filesystem readonly, network on; network
// off; filesystem off with network off). Contestants alternate, their
// order rotating each round. Wall time per command, and CPU time: the
// driver's own (the Go side: workspace, cgroups, pipes) plus that of
// every process the command started (bwrap, runnel's init, sh, bash),
// which the driver reaps as the containment's subreaper.
//
//	go run ./bench/sandbox -rounds 200
//
// It is its own sandbox init, as runnel is (sandbox-init as its first
// argument), so it needs no runnel binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/sandbox"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.Init(os.Args[2:]))
	}
	rounds := flag.Int("rounds", 100, "timed commands per contestant (after 5 untimed)")
	command := flag.String("command", "bash -c true", "the command each contestant runs")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	flag.Parse()
	if err := bench(context.Background(), *rounds, *command, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

// contestant is one sandbox: nil Isolation is local.
type contestant struct {
	Name      string             `json:"name"`
	Isolation *sandbox.Isolation `json:"-"`
	ws        *sandbox.Workspace
	wall, cpu []time.Duration
}

// result is one contestant's figures: medians and spreads in ms, and
// the ratios of its medians over local's.
type result struct {
	Name      string  `json:"name"`
	WallMs    spread  `json:"wall"`
	CPUMs     spread  `json:"cpu"`
	WallRatio float64 `json:"wallRatio"`
	CPURatio  float64 `json:"cpuRatio"`
}

type spread struct {
	Median float64 `json:"medianMs"`
	Min    float64 `json:"minMs"`
	P90    float64 `json:"p90Ms"`
}

func spreadOf(d []time.Duration) spread {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return spread{Median: ms(benchkit.Median(d)), Min: ms(slices.Min(d)), P90: ms(benchkit.Quantile(d, 0.9))}
}

func bench(ctx context.Context, rounds int, command, jsonOut string) error {
	if rounds < 1 {
		return errors.New("-rounds must be positive")
	}
	iso, err := sandbox.ProbeIsolator(ctx, nil)
	if err != nil {
		return err
	}
	defer iso.Close()
	if !iso.Supported() {
		return fmt.Errorf("no isolated sandbox here: %s", iso.Detail())
	}
	containment, err := sandbox.ProbeContainment(nil)
	if err != nil {
		return err
	}
	defer containment.Close()
	root, err := os.MkdirTemp("", "runnel-bench-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// The limits runnel's defaults set, so the isolated contestants pay
	// for their cgroups as a run does.
	limits := sandbox.Limits{Processes: 1024, Memory: 4 << 30, CPU: 10 * time.Minute}
	cs := []*contestant{
		{Name: "local"},
		{Name: "isolated (filesystem readonly, network on)", Isolation: &sandbox.Isolation{Isolator: iso, Limits: limits}},
		{Name: "isolated (readonly, network off)", Isolation: &sandbox.Isolation{Isolator: iso, Network: sandbox.NetworkOff, Limits: limits}},
		{Name: "isolated (filesystem off, network off)", Isolation: &sandbox.Isolation{Isolator: iso, Filesystem: sandbox.FilesystemOff, Network: sandbox.NetworkOff, Limits: limits}},
	}
	for _, c := range cs {
		c.ws, err = sandbox.NewWorkspace(root, &sandbox.WorkspaceOptions{Containment: containment, Isolation: c.Isolation})
		if err != nil {
			return err
		}
		defer c.ws.Close()
	}
	fmt.Printf("%q: %d timed commands per contestant after 5 untimed, alternating; %s; containment %s\n",
		command, rounds, iso.Detail(), containment.Mechanism())
	for range 5 {
		for _, c := range cs {
			if _, _, err := runOnce(ctx, c, command); err != nil {
				return err
			}
		}
	}
	for round := range rounds {
		for i := range cs {
			c := cs[(i+round)%len(cs)]
			wall, cpu, err := runOnce(ctx, c, command)
			if err != nil {
				return err
			}
			c.wall, c.cpu = append(c.wall, wall), append(c.cpu, cpu)
		}
	}
	var out []result
	for _, c := range cs {
		r := result{Name: c.Name, WallMs: spreadOf(c.wall), CPUMs: spreadOf(c.cpu)}
		r.WallRatio = r.WallMs.Median / spreadOf(cs[0].wall).Median
		r.CPURatio = r.CPUMs.Median / spreadOf(cs[0].cpu).Median
		out = append(out, r)
		fmt.Printf("  %-44s wall %6.2f ms (min %.2f, p90 %.2f)  CPU %6.2f ms (min %.2f, p90 %.2f)  ×%.1f wall, ×%.1f CPU\n",
			r.Name, r.WallMs.Median, r.WallMs.Min, r.WallMs.P90, r.CPUMs.Median, r.CPUMs.Min, r.CPUMs.P90, r.WallRatio, r.CPURatio)
	}
	if jsonOut != "" {
		return benchkit.WriteJSON(jsonOut, out)
	}
	return nil
}

// runOnce runs the command once and returns its wall time and the CPU
// time it cost: this process's and every reaped child's.
func runOnce(ctx context.Context, c *contestant, command string) (wall, cpu time.Duration, err error) {
	cpu0 := cpuTime()
	start := time.Now()
	res, err := sandbox.RunCommand(ctx, c.ws, command, nil)
	wall = time.Since(start)
	cpu = cpuTime() - cpu0
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%s: exit %d: %s", c.Name, res.ExitCode, res.Output)
	}
	return wall, cpu, err
}

// cpuTime is the user and system time of this process and of every child
// it has waited for.
func cpuTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}
