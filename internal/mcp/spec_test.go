package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func decodeServers(t *testing.T, js string) []runnel.McpServer {
	t.Helper()
	var s []runnel.McpServer
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNormalizeAccepts(t *testing.T) {
	tests := []struct {
		name, servers string
		want          []ServerSpec
	}{
		{"nested", `[{"name":"memory","connection":{"type":"http","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer t"}},
			"policy":{"tools":{"mode":"include","names":["read","read"," write "]},"permission":"Ask"}}]`,
			[]ServerSpec{{Name: "memory", Transport: TransportHTTP, URL: "https://mcp.example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer t"}, ToolMode: ToolsInclude, Include: []string{"read", "write"}, Permission: "ask"}}},
		{"flat", `[{"name":"docs","transport":"sse","url":"https://docs.example.com/sse","headers":{"X-Key":"k"}}]`,
			[]ServerSpec{{Name: "docs", Transport: TransportSSE, URL: "https://docs.example.com/sse",
				Headers: map[string]string{"X-Key": "k"}, ToolMode: ToolsAll}}},
		{"nested wins over flat", `[{"name":"a","url":"https://flat.example.com/","connection":{"url":"https://nested.example.com/mcp"}}]`,
			[]ServerSpec{{Name: "a", Transport: TransportHTTP, URL: "https://nested.example.com/mcp", ToolMode: ToolsAll}}},
		{"streamable spellings", `[{"name":"a","connection":{"type":"streamable-http","url":"https://a.example.com/"}},
			{"name":"b","connection":{"type":"streamableHttp","url":"https://b.example.com/"}}]`,
			[]ServerSpec{{Name: "a", Transport: TransportHTTP, URL: "https://a.example.com/", ToolMode: ToolsAll},
				{Name: "b", Transport: TransportHTTP, URL: "https://b.example.com/", ToolMode: ToolsAll}}},
		{"names without a mode mean include", `[{"name":"a","url":"https://a.example.com/","policy":{"tools":{"names":["x"]}}}]`,
			[]ServerSpec{{Name: "a", Transport: TransportHTTP, URL: "https://a.example.com/", ToolMode: ToolsInclude, Include: []string{"x"}}}},
		{"an unknown permission asks", `[{"name":"a","url":"https://a.example.com/","policy":{"permission":"alow"}}]`,
			[]ServerSpec{{Name: "a", Transport: TransportHTTP, URL: "https://a.example.com/", ToolMode: ToolsAll, Permission: "ask"}}},
		{"allowlisted http on loopback", `[{"name":"local","url":"http://127.0.0.1:8080/mcp"}]`,
			[]ServerSpec{{Name: "local", Transport: TransportHTTP, URL: "http://127.0.0.1:8080/mcp", ToolMode: ToolsAll}}},
		{"allowlisted name", `[{"name":"local","url":"http://MCP.internal./mcp"}]`,
			[]ServerSpec{{Name: "local", Transport: TransportHTTP, URL: "http://MCP.internal./mcp", ToolMode: ToolsAll}}},
	}
	opts := GuardOptions{HostAllowlist: []string{"127.0.0.1:8080", "mcp.internal"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(decodeServers(t, tt.servers), opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("specs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeRefuses(t *testing.T) {
	const public = "runnel only connects to public addresses unless the host is in RUNNEL_MCP_HOST_ALLOWLIST."
	tests := []struct {
		name, servers string
		code          runnel.ErrorCode
		want          string
	}{
		{"no name", `[{"url":"https://a.example.com/"}]`, runnel.CodeInvalidRequest,
			`mcpServers[0] has no name; every MCP server needs one.`},
		{"bad name", `[{"name":"my server","url":"https://a.example.com/"}]`, runnel.CodeInvalidRequest,
			`MCP server name "my server" is not allowed: use 1 to 40 letters, digits, '_' or '-', so its tools can be named mcp__<server>__<tool>.`},
		{"long name", `[{"name":"` + strings.Repeat("a", 41) + `","url":"https://a.example.com/"}]`, runnel.CodeInvalidRequest,
			`MCP server name "` + strings.Repeat("a", 41) + `" is not allowed: use 1 to 40 letters, digits, '_' or '-', so its tools can be named mcp__<server>__<tool>.`},
		{"double underscore", `[{"name":"a__b","url":"https://a.example.com/"}]`, runnel.CodeInvalidRequest,
			`MCP server name "a__b" is not allowed: it contains "__", which separates server and tool in mcp__<server>__<tool>.`},
		{"reserved", `[{"name":"Runnel","url":"https://a.example.com/"}]`, runnel.CodeInvalidRequest,
			`MCP server name "Runnel" is reserved for runnel's own MCP server; choose another name.`},
		{"duplicate", `[{"name":"mem","url":"https://a.example.com/"},{"name":"MEM","url":"https://b.example.com/"}]`, runnel.CodeInvalidRequest,
			`MCP server names must be unique; "mem" and "MEM" are the same name.`},
		{"stdio without a command", `[{"name":"fs","connection":{"type":"stdio"}}]`, runnel.CodeInvalidRequest,
			`MCP server "fs" is a stdio server with no command; set connection.command to the program to start.`},
		{"stdio with a URL", `[{"name":"fs","connection":{"type":"stdio","command":"npx","url":"https://a.example.com/"}}]`, runnel.CodeInvalidRequest,
			`MCP server "fs" has both a command and a URL; a stdio server has only a command, an http one only a URL.`},
		{"stdio with headers", `[{"name":"fs","command":"node","headers":{"Authorization":"Bearer x"}}]`, runnel.CodeInvalidRequest,
			`MCP server "fs" is a stdio server, which takes no headers; pass its credentials in connection.env, or as credentials bound to an environment variable.`},
		{"stdio bad env name", `[{"name":"fs","command":"node","env":{"A=B":"x"}}]`, runnel.CodeInvalidRequest,
			`MCP server "fs" has an environment variable "A=B" that is not NAME=value with a name of letters, digits and '_'.`},
		{"stdio header credential", `[{"name":"fs","connection":{"type":"stdio","command":"node","credentials":[{"binding":{"kind":"header","name":"X-Key"},"value":"v"}]}}]`, runnel.CodeInvalidRequest,
			`MCP server "fs" is a stdio server with a credential bound to "header" "X-Key"; a stdio server's credentials must be bound to an environment variable (binding.kind "environment").`},
		{"stdio env twice", `[{"name":"fs","connection":{"type":"stdio","command":"node","env":{"KEY":""},"credentials":[{"binding":{"kind":"environment","name":"KEY"},"value":"v"}]}}]`, runnel.CodeInvalidRequest,
			`MCP server "fs" sets the environment variable "KEY" twice (in env and credentials); set it once.`},
		{"unknown type", `[{"name":"ws","connection":{"type":"websocket","url":"wss://a.example.com/"}}]`, runnel.CodeInvalidRequest,
			`MCP server "ws" has connection type "websocket"; runnel supports "http" (streamable HTTP) and "sse".`},
		{"no url", `[{"name":"a","connection":{"type":"http"}}]`, runnel.CodeInvalidRequest,
			`MCP server "a" has no URL; set connection.url.`},
		{"relative url", `[{"name":"a","url":"/mcp"}]`, runnel.CodeInvalidRequest,
			`MCP server "a" has a URL that is not an absolute http(s) URL.`},
		{"ftp", `[{"name":"a","url":"ftp://a.example.com/mcp"}]`, runnel.CodeRefused,
			`MCP server "a": ftp://a.example.com is not an http(s) URL.`},
		{"http", `[{"name":"a","url":"http://a.example.com/mcp?key=secret"}]`, runnel.CodeRefused,
			`MCP server "a": http://a.example.com uses http; runnel only connects to MCP servers over https unless the host is in RUNNEL_MCP_HOST_ALLOWLIST.`},
		{"allowlisted host, other port", `[{"name":"a","url":"http://127.0.0.1:9090/mcp"}]`, runnel.CodeRefused,
			`MCP server "a": http://127.0.0.1:9090 uses http; runnel only connects to MCP servers over https unless the host is in RUNNEL_MCP_HOST_ALLOWLIST.`},
		{"include without names", `[{"name":"a","url":"https://a.example.com/","policy":{"tools":{"mode":"include"}}}]`, runnel.CodeInvalidRequest,
			`MCP server "a" has policy.tools.mode "include" but no policy.tools.names; list the tools to include, or use mode "all".`},
		{"unknown mode", `[{"name":"a","url":"https://a.example.com/","policy":{"tools":{"mode":"exclude","names":["x"]}}}]`, runnel.CodeInvalidRequest,
			`MCP server "a" has policy.tools.mode "exclude"; use "all" or "include".`},
		{"bad header name", `[{"name":"a","url":"https://a.example.com/","headers":{"Bad Header":"v"}}]`, runnel.CodeInvalidRequest,
			`MCP server "a" has a header named "Bad Header", which is not a valid HTTP header name.`},
		{"header value with a newline", `[{"name":"a","url":"https://a.example.com/","headers":{"Authorization":"Bearer tok\r\nX: y"}}]`, runnel.CodeInvalidRequest,
			`MCP server "a" has a value for header "Authorization" that contains a line break or NUL byte.`},
	}
	for _, host := range []struct{ url, shown, kind string }{
		{"https://127.0.0.1/mcp", "127.0.0.1", kindLoopback},
		{"https://127.9.9.9/mcp", "127.9.9.9", kindLoopback},
		{"https://[::1]/mcp", "::1", kindLoopback},
		{"https://10.0.0.5/mcp", "10.0.0.5", kindPrivate},
		{"https://172.16.3.4/mcp", "172.16.3.4", kindPrivate},
		{"https://192.168.1.1/mcp", "192.168.1.1", kindPrivate},
		{"https://[fd12::1]/mcp", "fd12::1", kindPrivate},
		{"https://169.254.1.1/mcp", "169.254.1.1", kindLinkLocal},
		{"https://[fe80::1]/mcp", "fe80::1", kindLinkLocal},
		{"https://169.254.169.254/latest", "169.254.169.254", kindMetadata},
		{"https://[fd00:ec2::254]/", "fd00:ec2::254", kindMetadata},
		{"https://100.100.100.200/", "100.100.100.200", kindMetadata},
		{"https://0.0.0.0/mcp", "0.0.0.0", kindUnspecified},
		{"https://[::]/mcp", "::", kindUnspecified},
		{"https://100.64.0.1/mcp", "100.64.0.1", kindCGNAT},
		{"https://224.0.0.1/mcp", "224.0.0.1", kindMulticast},
		{"https://[ff02::1]/mcp", "ff02::1", kindMulticast},
		{"https://[::ffff:127.0.0.1]/mcp", "::ffff:127.0.0.1", kindLoopback},
		{"https://[::ffff:a00:5]/mcp", "::ffff:10.0.0.5", kindPrivate},
		{"https://[::ffff:169.254.169.254]/mcp", "::ffff:169.254.169.254", kindMetadata},
		{"https://[64:ff9b::7f00:1]/mcp", "64:ff9b::7f00:1", kindLoopback},
	} {
		tests = append(tests, struct {
			name, servers string
			code          runnel.ErrorCode
			want          string
		}{"address " + host.url, `[{"name":"m","url":"` + host.url + `"}]`, runnel.CodeRefused,
			`MCP server "m": ` + originOf(host.url) + ` points at ` + host.shown + `, ` + host.kind + `; ` + public})
	}
	for _, host := range []struct{ url, name, kind string }{
		{"https://localhost/mcp", "localhost", kindLoopback},
		{"https://api.LOCALHOST./mcp", "api.LOCALHOST.", kindLoopback},
		{"https://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal", kindMetadata},
		{"https://metadata.goog/", "metadata.goog", kindMetadata},
	} {
		tests = append(tests, struct {
			name, servers string
			code          runnel.ErrorCode
			want          string
		}{"name " + host.url, `[{"name":"m","url":"` + host.url + `"}]`, runnel.CodeRefused,
			`MCP server "m": ` + originOf(host.url) + ` names ` + host.name + `, ` + host.kind + `; ` + public})
	}
	opts := GuardOptions{HostAllowlist: []string{"127.0.0.1:8080"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs, err := Normalize(decodeServers(t, tt.servers), opts)
			var rerr *runnel.Error
			if !errors.As(err, &rerr) {
				t.Fatalf("Normalize = %v, %v; want a *runnel.Error", specs, err)
			}
			if diff := cmp.Diff(struct {
				Code runnel.ErrorCode
				Msg  string
			}{tt.code, tt.want}, struct {
				Code runnel.ErrorCode
				Msg  string
			}{rerr.Code, rerr.Message}); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			for _, secret := range []string{"secret", "Bearer tok"} {
				if strings.Contains(rerr.Message, secret) {
					t.Errorf("the message shows %q", secret)
				}
			}
		})
	}
}

// originOf is a URL as messages show it: scheme://host[:port], so that a
// credential in the path or query never shows.
func originOf(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}
