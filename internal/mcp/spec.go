package mcp

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/runnel/runnel"
)

// ReservedServerName is the name of runnel's own internal MCP server (the
// one ACP harnesses reach runnel's tools through); no user server may take it.
const ReservedServerName = "runnel"

// The transports a ServerSpec names.
const (
	// TransportHTTP is streamable HTTP, falling back to SSE when the
	// server's answer to the first POST says it only speaks SSE.
	TransportHTTP = "http"
	// TransportSSE is the SSE transport of the 2024-11-05 spec, used
	// directly.
	TransportSSE = "sse"
)

// The tool filter modes of policy.tools.mode.
const (
	ToolsAll     = "all"
	ToolsInclude = "include"
)

// ServerSpec is one user MCP server after plan-time validation: the nested
// and flat request shapes reduced to one, names and policy checked, the URL
// through the static part of the guard.
type ServerSpec struct {
	Name      string
	Transport string // TransportHTTP, TransportSSE or TransportStdio
	URL       string
	// Command, Args and Env start a stdio server's program: Env is its
	// whole environment beside what the sandbox sets, and may carry
	// secrets (never log it).
	Command string
	Args    []string
	Env     map[string]string
	// Headers are sent with every request to the server. They carry
	// resolved secrets: never log them.
	Headers map[string]string
	// ToolMode is ToolsAll or ToolsInclude; Include lists the tool names
	// (the server's own names) kept under ToolsInclude.
	ToolMode string
	Include  []string
	// Permission is the server permission of DESIGN §5.1: "allow", "ask",
	// "deny", or "" when the policy sets none.
	Permission string
	// Required says the run fails when the server cannot be reached
	// (policy.required, or the operator's setting for every server).
	Required bool
}

// validServerName keeps a server name usable inside a provider tool name
// (mcp__<server>__<tool>, at most 64 characters of [A-Za-z0-9_-]) with
// room left for the tool: 1 to 40 of those characters.
func validServerName(name string) bool {
	if len(name) == 0 || len(name) > 40 {
		return false
	}
	for _, c := range []byte(name) {
		if !toolNameByte(c) {
			return false
		}
	}
	return true
}

// Normalize validates a request's MCP servers at plan time and returns
// them in one shape. Each failure is a *runnel.Error whose sentence names
// the server and the rule: CodeInvalidRequest for a malformed entry,
// CodeRefused for a server runnel will not connect to (a stdio server, a
// URL the guard refuses). Host names are not resolved here: the guard
// checks resolved addresses when Connect dials.
func Normalize(servers []runnel.McpServer, opts GuardOptions) ([]ServerSpec, error) {
	specs := make([]ServerSpec, 0, len(servers))
	seen := make(map[string]string, len(servers))
	for i, s := range servers {
		spec, err := normalizeOne(i, s, opts)
		if err != nil {
			return nil, err
		}
		key := strings.ToLower(spec.Name)
		if prev, dup := seen[key]; dup {
			return nil, invalid("MCP server names must be unique; %q and %q are the same name.", prev, spec.Name)
		}
		seen[key] = spec.Name
		specs = append(specs, spec)
	}
	return specs, nil
}

func invalid(format string, args ...any) *runnel.Error {
	return &runnel.Error{Code: runnel.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

func refused(format string, args ...any) *runnel.Error {
	return &runnel.Error{Code: runnel.CodeRefused, Message: fmt.Sprintf(format, args...)}
}

func normalizeOne(i int, s runnel.McpServer, opts GuardOptions) (ServerSpec, error) {
	name := s.Name
	switch {
	case strings.TrimSpace(name) == "":
		return ServerSpec{}, invalid("mcpServers[%d] has no name; every MCP server needs one.", i)
	case !validServerName(name):
		return ServerSpec{}, invalid("MCP server name %q is not allowed: use 1 to 40 letters, digits, '_' or '-', so its tools can be named mcp__<server>__<tool>.", name)
	case strings.Contains(name, "__"):
		return ServerSpec{}, invalid("MCP server name %q is not allowed: it contains \"__\", which separates server and tool in mcp__<server>__<tool>.", name)
	case strings.EqualFold(name, ReservedServerName):
		return ServerSpec{}, invalid("MCP server name %q is reserved for runnel's own MCP server; choose another name.", name)
	}
	c := connectionOf(s)
	kind := strings.ToLower(strings.TrimSpace(c.Type))
	if kind == "stdio" || kind == "" && c.Command != "" {
		return stdioSpec(ServerSpec{Name: name}, c, s.Policy)
	}
	headers, err := withCredentials(name, c)
	if err != nil {
		return ServerSpec{}, err
	}
	spec := ServerSpec{Name: name, Headers: headers}
	switch kind {
	case "", "http", "streamable-http", "streamable_http", "streamablehttp", "streamable":
		spec.Transport = TransportHTTP
	case "sse":
		spec.Transport = TransportSSE
	default:
		return ServerSpec{}, invalid("MCP server %q has connection type %q; runnel supports \"http\" (streamable HTTP) and \"sse\".", name, c.Type)
	}

	if err := checkURL(&spec, c.URL, opts); err != nil {
		return ServerSpec{}, err
	}
	if err := checkHeaders(name, headers); err != nil {
		return ServerSpec{}, err
	}
	if err := applyPolicy(&spec, s.Policy); err != nil {
		return ServerSpec{}, err
	}
	return spec, nil
}

// stdioSpec checks a stdio server: a program to start, arguments and an
// environment. Whether the run may start it (only in the isolated
// sandbox) is the caller's to decide.
func stdioSpec(spec ServerSpec, c runnel.McpConnection, policy *runnel.McpPolicy) (ServerSpec, error) {
	name := spec.Name
	spec.Transport = TransportStdio
	spec.Command = strings.TrimSpace(c.Command)
	switch {
	case spec.Command == "":
		return ServerSpec{}, invalid("MCP server %q is a stdio server with no command; set connection.command to the program to start.", name)
	case c.URL != "":
		return ServerSpec{}, invalid("MCP server %q has both a command and a URL; a stdio server has only a command, an http one only a URL.", name)
	case len(c.Headers) > 0:
		return ServerSpec{}, invalid("MCP server %q is a stdio server, which takes no headers; pass its credentials in connection.env, or as credentials bound to an environment variable.", name)
	}
	for _, a := range append([]string{spec.Command}, c.Args...) {
		if strings.ContainsRune(a, 0) {
			return ServerSpec{}, invalid("MCP server %q has a NUL byte in its command or arguments.", name)
		}
	}
	spec.Args = c.Args
	spec.Env = map[string]string{}
	for k, v := range c.Env {
		if !validEnvName(k) || strings.ContainsRune(v, 0) {
			return ServerSpec{}, invalid("MCP server %q has an environment variable %q that is not NAME=value with a name of letters, digits and '_'.", name, k)
		}
		spec.Env[k] = v
	}
	for _, cred := range c.Credentials {
		k := cred.Binding.Name
		switch {
		case !strings.EqualFold(cred.Binding.Kind, runnel.BindingEnvironment):
			return ServerSpec{}, invalid("MCP server %q is a stdio server with a credential bound to %q %q; a stdio server's credentials must be bound to an environment variable (binding.kind \"environment\").", name, cred.Binding.Kind, k)
		case !validEnvName(k):
			return ServerSpec{}, invalid("MCP server %q has a credential bound to the environment variable %q, which is not a name of letters, digits and '_'.", name, k)
		case hasKey(spec.Env, k):
			return ServerSpec{}, invalid("MCP server %q sets the environment variable %q twice (in env and credentials); set it once.", name, k)
		}
		spec.Env[k] = cred.Value
	}
	if err := applyPolicy(&spec, policy); err != nil {
		return ServerSpec{}, err
	}
	return spec, nil
}

func validEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// connectionOf merges the nested connection with the older flat fields;
// a nested field wins where both are set.
func connectionOf(s runnel.McpServer) runnel.McpConnection {
	c := runnel.McpConnection{Type: s.Transport, URL: s.URL, Headers: s.Headers, Command: s.Command, Args: s.Args, Env: s.Env}
	if n := s.Connection; n != nil {
		c.Type = cmpOr(n.Type, c.Type)
		c.URL = cmpOr(n.URL, c.URL)
		c.Command = cmpOr(n.Command, c.Command)
		if n.Headers != nil {
			c.Headers = n.Headers
		}
		if n.Args != nil {
			c.Args = n.Args
		}
		if n.Env != nil {
			c.Env = n.Env
		}
		c.Credentials = n.Credentials
	}
	return c
}

// withCredentials is the server's headers with its credentials added
// (Agenta v0.113 sends secret headers as credentials bound to a header).
// A credential bound to anything but a header, or a header named twice
// (HTTP names ignore case), is refused rather than half sent.
func withCredentials(server string, c runnel.McpConnection) (map[string]string, error) {
	if len(c.Credentials) == 0 {
		return c.Headers, nil
	}
	headers := make(map[string]string, len(c.Headers)+len(c.Credentials))
	seen := map[string]bool{}
	for name, value := range c.Headers {
		headers[name] = value
		seen[strings.ToLower(name)] = true
	}
	for _, cred := range c.Credentials {
		name := cred.Binding.Name
		switch {
		case !strings.EqualFold(cred.Binding.Kind, runnel.BindingHeader):
			return nil, invalid("MCP server %q has a credential bound to %q %q; an MCP server's credentials must be bound to a header (binding.kind \"header\").", server, cred.Binding.Kind, name)
		case seen[strings.ToLower(name)]:
			return nil, invalid("MCP server %q names the header %q twice (in headers or credentials); send it once.", server, name)
		}
		seen[strings.ToLower(name)] = true
		headers[name] = cred.Value
	}
	return headers, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func checkURL(spec *ServerSpec, raw string, opts GuardOptions) error {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return invalid("MCP server %q has no URL; set connection.url.", spec.Name)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return invalid("MCP server %q has a URL that is not an absolute http(s) URL.", spec.Name)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if msg := checkStaticURL(u, opts); msg != "" {
		return refused("MCP server %q: %s.", spec.Name, msg)
	}
	spec.URL = u.String()
	return nil
}

// checkHeaders refuses header names and values net/http would reject at
// send time, so the failure is a clear sentence at plan time. Values are
// never quoted: they hold secrets.
func checkHeaders(server string, headers map[string]string) error {
	for name, value := range headers {
		if !validHeaderName(name) {
			return invalid("MCP server %q has a header named %q, which is not a valid HTTP header name.", server, name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return invalid("MCP server %q has a value for header %q that contains a line break or NUL byte.", server, name)
		}
	}
	return nil
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// applyPolicy reads policy.tools and policy.permission. An unknown tools
// mode is refused: guessing would either hide tools or expose ones the
// caller meant to leave out. An unknown permission counts as "ask", as a
// malformed permission does everywhere else (DESIGN §5.1): bad input fails
// toward asking a person, never toward allowing.
func applyPolicy(spec *ServerSpec, p *runnel.McpPolicy) error {
	spec.ToolMode = ToolsAll
	if p == nil {
		return nil
	}
	spec.Required = p.Required
	if t := p.Tools; t != nil {
		switch mode := strings.ToLower(strings.TrimSpace(t.Mode)); mode {
		case "", ToolsAll:
			if mode == "" && len(t.Names) > 0 {
				spec.ToolMode = ToolsInclude
			}
		case ToolsInclude:
			spec.ToolMode = ToolsInclude
		default:
			return invalid("MCP server %q has policy.tools.mode %q; use \"all\" or \"include\".", spec.Name, t.Mode)
		}
		if spec.ToolMode == ToolsInclude {
			for _, n := range t.Names {
				if n = strings.TrimSpace(n); n != "" && !slices.Contains(spec.Include, n) {
					spec.Include = append(spec.Include, n)
				}
			}
			if len(spec.Include) == 0 {
				return invalid("MCP server %q has policy.tools.mode \"include\" but no policy.tools.names; list the tools to include, or use mode \"all\".", spec.Name)
			}
		}
	}
	switch perm := strings.ToLower(strings.TrimSpace(p.Permission)); perm {
	case "", "allow", "ask", "deny":
		spec.Permission = perm
	default:
		spec.Permission = "ask"
	}
	return nil
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
