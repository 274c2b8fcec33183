package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxToolNameLen is the longest tool name every provider accepts (OpenAI's
// function names: 64 characters of [A-Za-z0-9_-]).
const maxToolNameLen = 64

// toolNameByte reports whether c may appear in a provider tool name.
func toolNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// qualifiedName returns mcp__<server>__<tool>. MCP tool names may hold
// characters (".", "/") or lengths a provider refuses; such a name, or one
// that would collide with a name already taken, keeps a readable prefix
// and ends in a short hash of the original, so it is stable from one run
// to the next (stored decisions key on it) and unique within the pool.
func qualifiedName(server, tool string, taken map[string]bool) string {
	prefix := "mcp__" + server + "__"
	var b strings.Builder
	clean := tool != ""
	for i := range len(tool) {
		if c := tool[i]; toolNameByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
			clean = false
		}
	}
	name := prefix + b.String()
	if clean && len(name) <= maxToolNameLen && !taken[name] {
		return name
	}
	sum := sha256.Sum256([]byte(tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	for {
		keep := min(len(b.String()), maxToolNameLen-len(prefix)-len(suffix))
		name = prefix + b.String()[:keep] + suffix
		if !taken[name] {
			return name
		}
		// A second tool with the same hash prefix: astronomically rare, but
		// a name must never be handed out twice.
		sum = sha256.Sum256([]byte(name))
		suffix = "_" + hex.EncodeToString(sum[:4])
	}
}
