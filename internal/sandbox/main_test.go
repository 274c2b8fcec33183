package sandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a helper process when a test asks for
// one (helpers_test.go), and as the tests otherwise.
func TestMain(m *testing.M) {
	if name, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(runHelper(name, os.Getenv(helperArgEnv)))
	}
	goleak.VerifyTestMain(m)
}
