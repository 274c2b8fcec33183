package tools

import (
	"slices"
	"strings"
)

// Builtins are the builtin tool names a request may grant (DESIGN §3.1).
func Builtins() []string { return []string{"read", "write", "edit", "ls", "find", "grep", "bash"} }

// DefaultBuiltins are granted when a request has no tools field.
func DefaultBuiltins() []string { return []string{"read", "bash", "edit", "write"} }

// ParseBuiltins normalizes a request's tools field: nil (absent) means
// DefaultBuiltins, [] means none, names are case-insensitive and kept once
// each. An unknown name is a *runnel.Error with code invalid_request.
func ParseBuiltins(names []string) ([]string, error) {
	if names == nil {
		return DefaultBuiltins(), nil
	}
	known := Builtins()
	out := []string{}
	for _, n := range names {
		ln := strings.ToLower(strings.TrimSpace(n))
		if !slices.Contains(known, ln) {
			return nil, invalid("Unknown builtin tool %q in tools; the builtins are %s.", n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, ln) {
			out = append(out, ln)
		}
	}
	return out, nil
}
