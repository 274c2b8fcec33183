//go:build !linux

package main

import "errors"

// setChildSubreaper fails: only Linux has child subreapers, and this
// benchmark reads /proc anyway.
func setChildSubreaper() error {
	return errors.New("the ACP benchmark runs on Linux only (it needs a child subreaper and /proc)")
}
