package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
)

// agents runs `runnel agents list` and `runnel agents install NAME...`:
// the ACP agents runnel knows, and installing their pinned npm packages
// into the agents directory.
func (m *Main) agents(ctx context.Context, args []string) int {
	fs := m.flagSet("agents", "runnel agents list [--json] | runnel agents install NAME...")
	asJSON := fs.Bool("json", false, "list as JSON")
	c := newConfig(fs, m.Getenv, "agents")
	pos, code, done := parse(fs, args)
	if done {
		return code
	}
	if len(pos) == 0 {
		fs.Usage()
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		return m.fail("agents", err)
	}
	reg := cfg.registry()
	switch pos[0] {
	case "list":
		list := reg.List()
		if *asJSON {
			enc := json.NewEncoder(m.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(list)
			return exitOK
		}
		fmt.Fprintf(m.Stdout, "agents directory: %s\n", cfg.AgentsDir)
		tw := tabwriter.NewWriter(m.Stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "HARNESS\tPACKAGE\tPINNED\tINSTALLED")
		for _, st := range list {
			installed := "no"
			if st.Installed {
				installed = st.Version
			}
			name := st.Name
			for _, a := range st.Aliases {
				name += ", " + a
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, st.Package, st.Pinned, installed)
		}
		_ = tw.Flush()
		return exitOK
	case "install":
		if len(pos) < 2 {
			fmt.Fprintf(m.Stderr, "runnel agents install: name an agent: %v\n", reg.Names())
			return exitUsage
		}
		for _, name := range pos[1:] {
			fmt.Fprintf(m.Stderr, "runnel agents install: installing %s into %s\n", name, cfg.AgentsDir)
			if err := reg.Install(ctx, name, m.Stderr); err != nil {
				fmt.Fprintf(m.Stderr, "runnel agents install: %v\n", err)
				return exitFailure
			}
		}
		return exitOK
	}
	fmt.Fprintf(m.Stderr, "runnel agents: unknown subcommand %q; use list or install\n", pos[0])
	return exitUsage
}
