// Package proctest finds processes for tests that check a run left
// nothing running.
package proctest

import (
	"os"
	"strconv"
	"strings"
)

// Naming are the live processes whose command line holds s, each as its
// pid and command line. A zombie has no command line left, so it is not
// among them: a test that cares about zombies looks for them itself.
func Naming(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && len(cmdline) > 0 && strings.Contains(string(cmdline), s) {
			out = append(out, e.Name()+" "+strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return out
}
