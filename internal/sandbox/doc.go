// Package sandbox gives a run its workspace and runs commands in it
// (DESIGN §6).
//
// A Workspace is a fresh private directory per run. Every path a model or a
// request supplies goes through Resolve (or Rel), which follows symlinks
// and refuses anything that ends up outside the directory; file operations
// then go through Root, an *os.Root, so a symlink swapped in between the
// check and the use still cannot lead outside. RunCommand runs /bin/sh -c
// in the workspace with a scrubbed environment, a timeout and capped
// output, and ends everything the command started when it is done, as far
// as the Containment reaches: a cgroup v2 per command where runnel can
// create one, else runnel as child subreaper with a sweep of what
// commands leave behind, else the process group (which setsid escapes).
//
// At start-up, main probes the containment once and sweeps what a runnel
// that crashed left behind, then hands the containment to every workspace:
//
//	c, err := sandbox.ProbeContainment(nil)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	log.Info("process containment", "guarantee", c.Guarantee(), "detail", c.Detail())
//	_, err = c.SweepStaleCgroups()     // first: kills what could hold a workspace
//	_, err = sandbox.SweepWorkspaces(root) // unless workspaces are kept on purpose
//
// and per run:
//
//	ws, err := sandbox.NewWorkspace(root, &sandbox.WorkspaceOptions{Containment: c})
//	if err != nil {
//		return err
//	}
//	defer ws.Close()
//	if err := ws.WriteFiles(req.HarnessFiles); err != nil {
//		return err // a sentence naming the file and why
//	}
//	res, err := sandbox.RunCommand(ctx, ws, "go test ./...", &sandbox.CommandOptions{Timeout: time.Minute})
//
// On "local" a command runs on the host with the runnel process's user.
// A workspace with an Isolation (WorkspaceOptions) runs its commands and
// programs in the isolated sandbox instead: bubblewrap's namespaces and
// mounts, then Init (runnel's own binary, re-executed inside) for the
// rlimits, the loopback forwarders to the egress proxy and landlock.
// ProbeIsolator, once at start-up, says whether this host can.
package sandbox
