package agenttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// The environment this package's tests read.
const (
	// envAgentsDir names the installed agents (RUNNEL_AGENTS_DIR of the
	// runnel processes under test).
	envAgentsDir = "RUNNEL_TEST_AGENTS_DIR"
	// envInNetns marks the test process re-executed inside its network
	// namespace; envRunnel names the runnel binary built for it.
	envInNetns = "RUNNEL_TEST_IN_NETNS"
	envRunnel  = "RUNNEL_TEST_RUNNEL_BIN"
)

// TestMain runs the tests inside a new network namespace with only
// loopback up, so that nothing an agent does can reach beyond this host,
// and with the runnel binary built once for all of them.
func TestMain(m *testing.M) {
	if os.Getenv(envAgentsDir) == "" || os.Getenv(envInNetns) != "" {
		goleak.VerifyTestMain(m)
	}
	dir, err := os.MkdirTemp("", "runnel-agenttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(runInNetns(dir))
}

// runInNetns builds runnel into dir and runs this test binary again, with
// the same arguments, inside `unshare -n`; it returns its exit code.
func runInNetns(dir string) int {
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "runnel")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/runnel/runnel/cmd/runnel").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "agenttest: building runnel: %v\n%s", err, out)
		return 1
	}
	args := append([]string{"-n", "--", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0]}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), envInNetns+"=1", envRunnel+"="+bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "agenttest: the real-agent tests run in a loopback-only network namespace, and `unshare -n` failed (%v); run them as root or where user namespaces are allowed\n", err)
		return 1
	}
	return 0
}
