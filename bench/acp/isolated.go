package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
)

// namedTurn is a servedTurn under a name of its own.
type namedTurn struct {
	*servedTurn
	label string
}

func (n namedTurn) name() string { return n.label }

// isolatedRow is one agent's turn through runnel on each sandbox.
type isolatedRow struct {
	Harness string `json:"harness"`
	Turns   int    `json:"turns"`
	// Sandboxes are in the order local, isolated, isolated with an
	// allowlist; ratios are each median over local's.
	Sandboxes []isolatedFigures `json:"sandboxes"`
}

type isolatedFigures struct {
	Name           string      `json:"name"`
	FirstText      spread      `json:"firstText"`
	End            spread      `json:"end"`
	CPU            spread      `json:"cpu"` // runnel's and its agent's
	FirstTextRatio float64     `json:"firstTextRatio"`
	EndRatio       float64     `json:"endRatio"`
	CPURatio       float64     `json:"cpuRatio"`
	Turns          []turnTimes `json:"turns"`
}

// runIsolated times each installed agent's turn through runnel on the
// local sandbox against the isolated one, with the network on (the
// default a request gets) and with an allowlist that admits only the
// model (the agent's model calls go through runnel's proxy), filesystem
// off; alternating, the order rotating each round.
func runIsolated(ctx context.Context, cfg config, tmp string) ([]isolatedRow, error) {
	cases, _, err := firstTextCases(cfg, tmp)
	if err != nil || len(cases) == 0 {
		return nil, err
	}
	llm, err := benchkit.ServeModel(helloScript()) // records no request
	if err != nil {
		return nil, err
	}
	defer llm.Close()
	srv, err := startAgentRunnel(ctx, cfg.runnelBin, cfg.agentsDir, tmp, []string{"RUNNEL_ALLOW_LOCAL_SANDBOX=true"}, true)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	// The cgroup's CPU time: an isolated agent's processes are reaped in
	// its own pid namespace, out of reach of runnel's cutime.
	cgroupCPU := func() (benchkit.CPU, error) {
		d, err := srv.CgroupCPU()
		return benchkit.CPU{Self: d}, err
	}
	fmt.Printf("isolated: %d timed turns per agent and sandbox after one untimed, alternating\n", cfg.rounds)
	var rows []isolatedRow
	for _, h := range cases {
		local, isolated, allowlist := h.request(llm.URL), h.request(llm.URL), h.request(llm.URL)
		local.Sandbox, isolated.Sandbox, allowlist.Sandbox = "local", "isolated", "isolated"
		allowlist.SandboxPermission = &runnel.SandboxPermission{Filesystem: "off",
			Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"127.0.0.1"}}}
		cs := []namedTurn{
			{newServedTurn(srv, local), "local"},
			{newServedTurn(srv, isolated), "isolated"},
			{newServedTurn(srv, allowlist), "isolated, allowlist, filesystem off"},
		}
		for _, c := range cs {
			c.cpu = cgroupCPU
		}
		turns := make([]firstTextContestant, len(cs))
		for i, c := range cs {
			defer c.client.CloseIdleConnections()
			turns[i] = c
		}
		res, err := alternate(ctx, h.name, cfg.rounds, turns)
		if err != nil {
			return nil, err
		}
		row := isolatedRow{Harness: h.name, Turns: cfg.rounds}
		for _, c := range cs {
			row.Sandboxes = append(row.Sandboxes, figuresOf(c.name(), res[c.name()]))
		}
		base := row.Sandboxes[0]
		fmt.Printf("\n%s, %d turns each (median, min–max)\n", h.name, cfg.rounds)
		for i := range row.Sandboxes {
			f := &row.Sandboxes[i]
			f.FirstTextRatio, f.EndRatio, f.CPURatio = f.FirstText.Median/base.FirstText.Median, f.End.Median/base.End.Median, f.CPU.Median/base.CPU.Median
			fmt.Fprintf(os.Stdout, "  %-36s first text %s  turn end %s  CPU %s  ×%.2f / ×%.2f / ×%.2f\n",
				f.Name, f.FirstText, f.End, f.CPU, f.FirstTextRatio, f.EndRatio, f.CPURatio)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func figuresOf(name string, ts []turnTimes) isolatedFigures {
	pick := func(f func(turnTimes) time.Duration) []time.Duration {
		out := make([]time.Duration, 0, len(ts))
		for _, t := range ts {
			out = append(out, f(t))
		}
		return out
	}
	return isolatedFigures{Name: name, Turns: ts,
		FirstText: spreadOf(pick(func(t turnTimes) time.Duration { return t.FirstText })),
		End:       spreadOf(pick(func(t turnTimes) time.Duration { return t.End })),
		CPU:       spreadOf(pick(func(t turnTimes) time.Duration { return t.CPU.Total() })),
	}
}
