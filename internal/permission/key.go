package permission

import (
	"bytes"
	"encoding/json"
	"strings"
)

// KeyOptions says how calls are keyed.
type KeyOptions struct {
	// Servers are the run's MCP server names (runnel's own included): the
	// agent prefixes built from them are stripped from tool names. An
	// underscore prefix that is not a known server is never stripped.
	Servers []string
	// BoundPaths are the dotted argument paths the tool's contextBindings
	// set. They are removed before keying: the model's value there is
	// overwritten anyway, so it must not change the key.
	BoundPaths []string
}

// Key returns the call key of DESIGN §5.2:
//
//	canonicalName + "#" + canonicalJSON(normalizeJSONish(args ?? {}))
//
// ok is false when the call cannot be keyed (arguments that are not JSON, a
// number that overflows, an empty name); a call without a key always asks
// again. Keys are only ever compared with keys, so the exact text matters
// for equality, not for display.
func Key(name string, args json.RawMessage, opts KeyOptions) (string, bool) {
	canonical := CanonicalName(name, opts.Servers)
	if canonical == "" {
		return "", false
	}
	v, err := parseArgs(args)
	if err != nil {
		return "", false
	}
	v = normalizeJSONish(v)
	if canonical == "Bash" {
		v = bashCommandOnly(v)
	}
	for _, path := range opts.BoundPaths {
		v = removePath(v, strings.Split(path, "."))
	}
	b, err := appendCanonical([]byte(canonical+"#"), v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// CanonicalJSON returns raw as JSON.stringify would write it with every
// object's keys sorted by UTF-16 code units: no whitespace, numbers in
// JavaScript's shortest form, strings escaped only where JSON requires. A
// repeated key keeps its last value, as JSON.parse does. Empty input is {}.
// It fails on invalid JSON and on numbers that overflow float64. Unlike
// Key it keeps a top-level null and reads no strings as JSON.
func CanonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	v, err := parseJSON(string(raw))
	if err != nil {
		return nil, err
	}
	return appendCanonical(nil, v)
}

// parseArgs parses tool arguments, reading absent or null arguments as {}
// (the "args ?? {}" of the key).
func parseArgs(raw json.RawMessage) (jsonValue, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return jsonValue{kind: jsonObject}, nil
	}
	return parseJSON(string(raw))
}

// builtinName returns the canonical spelling of a builtin tool name, so
// "bash", "BASH" and Claude's "Bash" are one tool, and any other name
// unchanged.
func builtinName(name string) string {
	switch strings.ToLower(name) {
	case "read":
		return "Read"
	case "write":
		return "Write"
	case "edit":
		return "Edit"
	case "ls":
		return "Ls"
	case "find":
		return "Find"
	case "grep":
		return "Grep"
	case "bash":
		return "Bash"
	}
	return name
}

// CanonicalName is a tool name as keys see it: an agent prefix for a
// known server removed (mcp__<server>__, mcp_<server>_ or <server>_; when
// several servers fit, the longest prefix wins), then builtin names
// spelled Read, Write, Edit, Ls, Find, Grep or Bash whatever their case.
// A prefix is only removed when something is left after it.
func CanonicalName(name string, servers []string) string {
	return builtinName(StripServerPrefix(name, servers))
}

// StripServerPrefix removes the agent prefix of a known server from name,
// leaving the tool's spec name; see CanonicalName.
func StripServerPrefix(name string, servers []string) string {
	best := ""
	for _, s := range servers {
		if s == "" {
			continue
		}
		for _, prefix := range []string{"mcp__" + s + "__", "mcp_" + s + "_", s + "_"} {
			if len(prefix) > len(best) && len(name) > len(prefix) && strings.HasPrefix(name, prefix) {
				best = prefix
			}
		}
	}
	return name[len(best):]
}

// normalizeJSONish replaces every string that holds a JSON object or array
// with the parsed value, recursively, so a harness that stringifies nested
// arguments keys the same as one that does not.
func normalizeJSONish(v jsonValue) jsonValue {
	switch v.kind {
	case jsonString:
		if parsed, ok := parseJSONish(v.text); ok {
			return normalizeJSONish(parsed)
		}
	case jsonArray:
		items := make([]jsonValue, len(v.items))
		for i, item := range v.items {
			items[i] = normalizeJSONish(item)
		}
		v.items = items
	case jsonObject:
		members := make([]jsonMember, len(v.members))
		for i, m := range v.members {
			members[i] = jsonMember{key: m.key, value: normalizeJSONish(m.value)}
		}
		v.members = members
	}
	return v
}

// parseJSONish parses s when it holds a JSON object or array. Models often
// close a stringified object with one brace too many, so when s does not
// parse as it is, up to three trailing '}' or ']' (and the whitespace
// around them) are removed, one at a time, until it does. A string that
// parses as it is is never trimmed, and a string that parses to a scalar
// ("42", "true", "\"x\"") is not JSON-ish and stays a string.
func parseJSONish(s string) (jsonValue, bool) {
	container := func(s string) (jsonValue, bool) {
		v, err := parseJSON(s)
		return v, err == nil && (v.kind == jsonObject || v.kind == jsonArray)
	}
	if v, err := parseJSON(s); err == nil {
		return v, v.kind == jsonObject || v.kind == jsonArray
	}
	t := strings.TrimRight(s, " \t\n\r")
	for range 3 {
		if t == "" || (t[len(t)-1] != '}' && t[len(t)-1] != ']') {
			break
		}
		t = strings.TrimRight(t[:len(t)-1], " \t\n\r")
		if v, ok := container(t); ok {
			return v, true
		}
	}
	return jsonValue{}, false
}

// bashCommandOnly reduces Bash arguments to {command}: descriptions and
// timeouts an agent adds differ between re-issues of the same command.
// Arguments without a command member are left whole, so a harness with a
// different argument name never collapses every call into one key.
func bashCommandOnly(v jsonValue) jsonValue {
	if v.kind != jsonObject {
		return v
	}
	command, ok := v.member("command")
	if !ok {
		return v
	}
	return jsonValue{kind: jsonObject, members: []jsonMember{{key: "command", value: command}}}
}

// removePath deletes the member at a dotted path. A path that does not
// reach an object member changes nothing.
func removePath(v jsonValue, path []string) jsonValue {
	if v.kind != jsonObject || len(path) == 0 {
		return v
	}
	members := make([]jsonMember, 0, len(v.members))
	for _, m := range v.members {
		if m.key != path[0] {
			members = append(members, m)
			continue
		}
		if len(path) > 1 {
			members = append(members, jsonMember{key: m.key, value: removePath(m.value, path[1:])})
		}
	}
	v.members = members
	return v
}
