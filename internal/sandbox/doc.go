// Package sandbox gives a run its workspace and runs commands in it
// (DESIGN §6, the "local" sandbox).
//
// A Workspace is a fresh private directory per run. Every path a model or a
// request supplies goes through Resolve (or Rel), which follows symlinks
// and refuses anything that ends up outside the directory; file operations
// then go through Root, an *os.Root, so a symlink swapped in between the
// check and the use still cannot lead outside. RunCommand runs /bin/sh -c
// in the workspace in its own process group, with a scrubbed environment,
// a timeout and capped output, and kills the whole group when it is done.
//
//	ws, err := sandbox.NewWorkspace("", nil)
//	if err != nil {
//		return err
//	}
//	defer ws.Close()
//	if err := ws.WriteFiles(req.HarnessFiles); err != nil {
//		return err // a sentence naming the file and why
//	}
//	res, err := sandbox.RunCommand(ctx, ws, "go test ./...", &sandbox.CommandOptions{Timeout: time.Minute})
//
// The isolated sandbox (namespaces, landlock) is not built yet; on "local"
// a command runs on the host with the runnel process's user.
package sandbox
