package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// setChildSubreaper makes this process the reaper of its orphaned
// descendants (prctl PR_SET_CHILD_SUBREAPER), for good.
func setChildSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}
