package acp

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/runnel/runnel/internal/harness"
)

// namer tells, from what an agent says of a call (its programmatic name,
// its title, its kind and arguments), whose tool it is and what the
// permission plan calls it. Every agent spells runnel's tools its own way
// (ACP-AGENTS.md): mcp__runnel__x (Claude), namespace mcp__runnel + x
// (Codex), mcp_runnel_x (Gemini), runnel_x (opencode), x (Pi's
// extension), and titles such as "x (runnel MCP Server)" or "Tool:
// runnel/x".
type namer struct {
	tools   map[string]bool // the run's tools, served by runnel
	servers map[string]bool // the user's MCP servers
	// workspace is the agent's working directory: paths inside it are
	// shown to rules relative to it, as runnel's own builtins show them.
	workspace string
	// The shapes a (server, tool) pair takes in names and titles:
	// mcp__s__t, "t (s MCP Server)", "Tool: s/t", "mcp.s.t" (Codex).
	doubleUnderscore, serverTitle, toolColon, dotted *regexp.Regexp
}

// newNamer is a namer for a run with these tools and user MCP servers.
func newNamer(tools []Tool, servers []Server, workspace string) *namer {
	n := &namer{tools: map[string]bool{}, servers: map[string]bool{}, workspace: workspace,
		doubleUnderscore: regexp.MustCompile(`^mcp__(.+?)__(.+)$`),
		serverTitle:      regexp.MustCompile(`^(.+?) \((.+?) MCP Server\)$`),
		toolColon:        regexp.MustCompile(`^(?:Tool|MCP tool|Approve):?\s+(.+?)[/.](.+)$`),
		dotted:           regexp.MustCompile(`^mcp\.([^.]+)\.(.+)$`),
	}
	for _, t := range tools {
		n.tools[t.Name] = true
	}
	for _, s := range servers {
		n.servers[s.Name] = true
	}
	return n
}

// builtinRule is the rule name (DESIGN §5.2, and Claude's own names) of
// an agent's own tool, by its name in any case; "" for none.
func builtinRule(name string) string {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "bash", "shell", "exec_command", "run_shell_command":
		return "Bash"
	case "read", "notebookread", "read_file", "read_many_files":
		return "Read"
	case "write", "write_file":
		return "Write"
	case "edit", "multiedit", "notebookedit", "replace", "patch", "apply_patch":
		return "Edit"
	case "glob", "find":
		return "Find"
	case "grep", "search_file_content":
		return "Grep"
	case "ls", "list", "list_directory":
		return "Ls"
	case "webfetch", "web_fetch":
		return "WebFetch"
	case "websearch", "google_web_search":
		return "WebSearch"
	}
	return ""
}

// kindRule is the rule name of an agent's own tool that only says what
// kind of thing it does (Codex's exec and patch calls have no name).
func kindRule(kind string) string {
	switch kind {
	case "execute":
		return "Bash"
	case "read":
		return "Read"
	case "edit", "delete", "move":
		return "Edit"
	case "search":
		return "Grep"
	case "fetch":
		return "WebFetch"
	}
	return ""
}

// readOnlyRule reports the builtins allow_reads lets run unasked.
func readOnlyRule(rule string) bool {
	switch rule {
	case "Read", "Ls", "Find", "Grep":
		return true
	}
	return false
}

// identify names a call. frameName is the agent's programmatic name
// (toolCall.name or Claude's _meta toolName), which is trusted over the
// title; kind and input are as the agent sent them.
func (n *namer) identify(frameName, title, kind string, input json.RawMessage) harness.AgentCall {
	// Codex describes an MCP call by its input: {server, tool, arguments}.
	var mcpCall struct {
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(input, &mcpCall) == nil && mcpCall.Server != "" && mcpCall.Tool != "" {
		if c, ok := n.serverTool("mcp__" + mcpCall.Server + "__" + mcpCall.Tool); ok {
			c.Title = title
			c.Input = objectOrEmpty(mcpCall.Arguments)
			return c
		}
	}
	for _, candidate := range []string{frameName, title} {
		candidate = strings.TrimSpace(candidate)
		if candidate == "" {
			continue
		}
		if c, ok := n.serverTool(candidate); ok {
			c.Title = title
			c.Input = objectOrEmpty(input)
			return c
		}
	}
	// The programmatic name first, then what the call does (a title may be
	// the command itself: Pi titles bash "ls"), then the title.
	if rule := builtinRule(frameName); rule != "" {
		return n.builtin(rule, title, input)
	}
	if n.tools[strings.TrimSpace(frameName)] {
		return harness.AgentCall{Call: harness.Call{Name: strings.TrimSpace(frameName), Input: objectOrEmpty(input)},
			Owner: harness.OwnerRunnel, Title: title}
	}
	if rule := kindRule(kind); rule != "" {
		return n.builtin(rule, title, input)
	}
	if rule := builtinRule(title); rule != "" {
		return n.builtin(rule, title, input)
	}
	if n.tools[strings.TrimSpace(title)] {
		return harness.AgentCall{Call: harness.Call{Name: strings.TrimSpace(title), Input: objectOrEmpty(input)},
			Owner: harness.OwnerRunnel, Title: title}
	}
	name := strings.TrimSpace(frameName)
	if name == "" {
		name = strings.TrimSpace(title)
	}
	if name == "" {
		name = "unknown"
	}
	return harness.AgentCall{Call: harness.Call{Name: name, Input: objectOrEmpty(input)}, Owner: harness.OwnerAgent, Title: title}
}

// serverTool recognises a tool of runnel's server or of a user MCP server
// in one of the agents' spellings.
func (n *namer) serverTool(s string) (harness.AgentCall, bool) {
	var pairs [][2]string
	if m := n.doubleUnderscore.FindStringSubmatch(s); m != nil {
		pairs = append(pairs, [2]string{m[1], m[2]})
	}
	if m := n.serverTitle.FindStringSubmatch(s); m != nil {
		pairs = append(pairs, [2]string{m[2], m[1]})
	}
	if m := n.toolColon.FindStringSubmatch(s); m != nil {
		pairs = append(pairs, [2]string{m[1], m[2]})
	}
	if m := n.dotted.FindStringSubmatch(s); m != nil {
		pairs = append(pairs, [2]string{m[1], m[2]})
	}
	// mcp_<server>_<tool> and <server>_<tool>: the server names are known,
	// so the split is not a guess.
	for _, server := range n.serverNames() {
		for _, prefix := range []string{"mcp_" + server + "_", server + "_", server + "__", server + "/"} {
			if tool, ok := strings.CutPrefix(s, prefix); ok && tool != "" {
				pairs = append(pairs, [2]string{server, tool})
			}
		}
	}
	for _, p := range pairs {
		server, tool := p[0], p[1]
		switch {
		case server == ServerName && n.tools[tool]:
			return harness.AgentCall{Call: harness.Call{Name: tool}, Owner: harness.OwnerRunnel}, true
		case n.servers[server]:
			return harness.AgentCall{Call: harness.Call{Name: "mcp__" + server + "__" + tool}, Owner: harness.OwnerServer, Server: server}, true
		}
	}
	return harness.AgentCall{}, false
}

// serverNames are runnel's server and the user's, longest first, so
// that a server whose name extends another's is tried first.
func (n *namer) serverNames() []string {
	names := []string{ServerName}
	for s := range n.servers {
		names = append(names, s)
	}
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && len(names[j]) > len(names[j-1]); j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return names
}

// builtin is a call of the agent's own tool rule, with its arguments in
// the shape the rule reads: the command of Bash, the path of a file tool.
func (n *namer) builtin(rule, title string, input json.RawMessage) harness.AgentCall {
	c := harness.AgentCall{Call: harness.Call{Name: rule, Input: n.builtinArgs(rule, input)}, Owner: harness.OwnerAgent, Title: title}
	if readOnlyRule(rule) {
		ro := true
		c.ReadOnly = &ro
	}
	return c
}

// pathKeys are the names agents give a file tool's path.
func pathKeys() []string {
	return []string{"path", "file_path", "filePath", "absolute_path", "dir_path", "directory", "notebook_path", "file"}
}

func (n *namer) builtinArgs(rule string, input json.RawMessage) json.RawMessage {
	var args map[string]json.RawMessage
	if json.Unmarshal(input, &args) != nil || args == nil {
		return json.RawMessage(`{}`)
	}
	if rule == "Bash" {
		cmd, ok := commandOf(args)
		if !ok {
			return json.RawMessage(`{}`)
		}
		out, _ := json.Marshal(map[string]string{"command": cmd})
		return out
	}
	for _, k := range pathKeys() {
		var p string
		if json.Unmarshal(args[k], &p) != nil || p == "" {
			continue
		}
		for _, k := range pathKeys() {
			delete(args, k)
		}
		rel, _ := json.Marshal(n.relative(p))
		args["path"] = rel
		break
	}
	out, err := json.Marshal(args)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return out
}

// commandOf is the shell command of an agent's exec call: a string, or an
// argv whose script is behind sh -c / bash -lc (Codex), or else its words
// joined.
func commandOf(args map[string]json.RawMessage) (string, bool) {
	for _, k := range []string{"command", "cmd"} {
		raw, ok := args[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		var argv []string
		if json.Unmarshal(raw, &argv) == nil && len(argv) > 0 {
			if len(argv) == 3 && (argv[1] == "-c" || argv[1] == "-lc") && strings.HasSuffix(argv[0], "sh") {
				return argv[2], true
			}
			return strings.Join(argv, " "), true
		}
	}
	return "", false
}

// relative is p relative to the workspace when it is inside it.
func (n *namer) relative(p string) string {
	if n.workspace == "" || !filepath.IsAbs(p) {
		return p
	}
	rel, err := filepath.Rel(n.workspace, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return rel
}

// objectOrEmpty is input when it is a JSON object, else {}.
func objectOrEmpty(input json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) != nil || m == nil {
		return json.RawMessage(`{}`)
	}
	return input
}
