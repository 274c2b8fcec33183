//go:build !race

package codemode

// The size of the search in TestRunLongBuiltin (see race_test.go): about
// half a second without the race detector.
const (
	longHaystack = 1_000_000
	longNeedle   = 500
)
