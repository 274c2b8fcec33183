package sandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a helper process when a test asks for
// one (helpers_test.go), as the isolated sandbox's Init when bwrap runs
// it, and as the tests otherwise.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == InitCommand {
		os.Exit(Init(os.Args[2:])) // the isolated sandbox's init (isolate_linux_test.go)
	}
	if name, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(runHelper(name, os.Getenv(helperArgEnv)))
	}
	goleak.VerifyTestMain(m)
}
