package mcp

import (
	"strings"
	"testing"
)

func TestQualifiedName(t *testing.T) {
	long := strings.Repeat("t", 60)
	taken := map[string]bool{}
	take := func(server, tool string) string {
		n := qualifiedName(server, tool, taken)
		taken[n] = true
		return n
	}
	tests := []struct {
		server, tool string
		check        func(string) bool
	}{
		{"mem", "read_graph", func(n string) bool { return n == "mcp__mem__read_graph" }},
		{"mem", "get-sum", func(n string) bool { return n == "mcp__mem__get-sum" }},
		{"mem", "files.read", func(n string) bool {
			return strings.HasPrefix(n, "mcp__mem__files_read_") && len(n) == len("mcp__mem__files_read_")+8
		}},
		{"mem", long, func(n string) bool { return len(n) == maxToolNameLen && strings.HasPrefix(n, "mcp__mem__ttt") }},
		// "x_"/"_y" and "x"/"__y" would both be mcp__x____y.
		{"x_", "_y", func(n string) bool { return n == "mcp__x____y" }},
		{"x", "__y", func(n string) bool { return strings.HasPrefix(n, "mcp__x____y_") }},
		{"mem", "", func(n string) bool { return strings.HasPrefix(n, "mcp__mem___") }},
	}
	for _, tt := range tests {
		n := take(tt.server, tt.tool)
		if !tt.check(n) {
			t.Errorf("qualifiedName(%q, %q) = %q", tt.server, tt.tool, n)
		}
		for i := range len(n) {
			if !toolNameByte(n[i]) {
				t.Errorf("%q has a byte providers refuse", n)
				break
			}
		}
		if len(n) > maxToolNameLen {
			t.Errorf("%q is longer than %d", n, maxToolNameLen)
		}
	}
	// Stable from one run to the next: stored decisions key on the name.
	if a, b := qualifiedName("mem", "files.read", nil), qualifiedName("mem", "files.read", nil); a != b {
		t.Errorf("names differ between runs: %q, %q", a, b)
	}
}
