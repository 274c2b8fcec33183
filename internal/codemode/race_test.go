//go:build race

package codemode

// The size of the search in TestRunLongBuiltin: a naive indexOf of a needle
// of longNeedle characters in longHaystack characters takes about
// longHaystack × longNeedle steps. The race detector slows the engine about
// sixty times: this is about a second with it, where the test needs the
// search to last until its watch, every millisecond, sees it.
const (
	longHaystack = 1_000_000
	longNeedle   = 25
)
