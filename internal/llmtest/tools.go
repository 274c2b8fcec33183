package llmtest

import (
	"errors"
	"slices"
	"strings"
)

// MCP tool references.
//
// Every agent offers an MCP server's tools to the model under its own
// spelling: tool "echo" of server "runnel" is mcp__runnel__echo to Claude
// Code, tool echo in the Responses namespace mcp__runnel to Codex,
// mcp_runnel_echo to Gemini CLI, runnel_echo to opencode, and plain echo to
// an agent that registers the tool itself (Pi's extension). A script that
// names the reference "runnel/echo" instead of one spelling works with all
// of them: the slash cannot occur in a tool name of any of the four APIs, so
// a reference is never mistaken for a name.

// A spelling is one way an agent writes tool t of server s. ns is the
// Responses namespace it sits in, "" for a plain tool name.
type spelling struct{ ns, name string }

// spellings lists the ways tool t of server s may be offered, most specific
// first: when a request offers several, the first one it offers wins.
func spellings(s, t string) []spelling {
	return []spelling{
		{ns: "mcp__" + s, name: t},     // Codex
		{name: "mcp__" + s + "__" + t}, // Claude Code
		{name: "mcp_" + s + "_" + t},   // Gemini CLI
		{name: s + "_" + t},            // opencode
		{name: t},                      // an agent's own registration (Pi)
	}
}

// splitToolRef splits a reference "server/tool"; ok is false for a plain
// tool name.
func splitToolRef(ref string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(ref, "/")
	if !ok || server == "" || tool == "" || strings.Contains(tool, "/") {
		return "", "", false
	}
	return server, tool, true
}

// checkToolRef refuses a name that has a slash but is no reference: no
// API allows a slash in a tool name, so it can only be a mistyped one.
func checkToolRef(name string) error {
	if !strings.Contains(name, "/") {
		return nil
	}
	if _, _, ok := splitToolRef(name); !ok {
		return errors.New(`"` + name + `": a tool reference is "server/tool", both parts non-empty`)
	}
	return nil
}

// sanitizeToolName maps every character outside [A-Za-z0-9_-] to "_", as
// the agents do when they build a tool name from a server name, so a
// server called "my.server" still matches mcp__my_server__x.
func sanitizeToolName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// ResolveTool finds how the request offers the tool a reply names. A plain
// name (no slash) comes back as it is, ok telling whether it is offered. A
// reference "server/tool" is looked up, in this order, as tool in the
// Responses namespace mcp__server (Codex), mcp__server__tool (Claude Code),
// mcp_server_tool (Gemini CLI), server_tool (opencode) and tool itself,
// comparing names after replacing every character outside [A-Za-z0-9_-]
// with "_"; the first spelling the request offers is returned, as the
// request spells it. When it offers none, the reference comes back
// unchanged with ok false.
func (c *Conversation) ResolveTool(name string) (namespace, resolved string, ok bool) {
	server, tool, isRef := splitToolRef(name)
	if !isRef {
		return "", name, slices.Contains(c.Tools, name)
	}
	for _, sp := range spellings(server, tool) {
		if ns, n, ok := c.offeredSpelling(sp); ok {
			return ns, n, true
		}
	}
	return "", name, false
}

// offeredSpelling returns the request's own spelling of sp, which may differ
// from sp in the characters sanitising replaces.
func (c *Conversation) offeredSpelling(sp spelling) (namespace, name string, ok bool) {
	want, wantNS := sanitizeToolName(sp.name), sanitizeToolName(sp.ns)
	for _, offered := range c.Tools {
		ns, n := c.splitOffered(offered)
		if sanitizeToolName(ns) == wantNS && sanitizeToolName(n) == want {
			return ns, n, true
		}
	}
	return "", "", false
}

// splitOffered splits an entry of Tools into its Responses namespace and
// tool name. Only the Responses API has namespaces, and its tool names
// cannot contain the separator, so there the separator is unambiguous;
// elsewhere (a Gemini name may contain a dot) the entry is a plain name.
func (c *Conversation) splitOffered(offered string) (namespace, name string) {
	if c.API == APIResponses {
		if ns, n, ok := strings.Cut(offered, namespaceSep); ok {
			return ns, n
		}
	}
	return "", offered
}

// namespaceSep joins a Responses namespace and one of its tools in
// [Conversation.Tools].
const namespaceSep = "."
