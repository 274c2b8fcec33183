package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func httpSpec(name, url string) ServerSpec {
	return ServerSpec{Name: name, Transport: TransportHTTP, URL: url, ToolMode: ToolsAll}
}

func TestToolsAreListedWithTheirSchemasAndHints(t *testing.T) {
	f := newFixture(t, fixtureOptions{pageSize: 2}) // 7 tools over 4 pages
	spec := httpSpec("mem", f.url)
	spec.Permission = "ask"
	pool := Connect(t.Context(), []ServerSpec{spec}, allowLoopback())
	defer pool.Close()
	if n := pool.Notices(); len(n) != 0 {
		t.Fatalf("notices: %q", n)
	}

	type row struct {
		Name, Qualified, Permission string
		ReadOnly                    *bool
	}
	var got []row
	for _, tool := range pool.Tools() {
		got = append(got, row{tool.Name, tool.QualifiedName, tool.ServerPermission, tool.ReadOnly})
	}
	yes := true
	want := []row{
		{"add", "mcp__mem__add", "ask", &yes},
		{"big", "mcp__mem__big", "ask", nil},
		{"dotted.name/v2", "mcp__mem__dotted_name_v2_" + hashOf("dotted.name/v2"), "ask", nil},
		{"echo", "mcp__mem__echo", "ask", nil},
		{"fail", "mcp__mem__fail", "ask", nil},
		{"media", "mcp__mem__media", "ask", nil},
		{"slow", "mcp__mem__slow", "ask", nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	// The real schema goes through: the one the SDK inferred from echoIn.
	var schema struct {
		Type       string `json:"type"`
		Required   []string
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(toolNamed(t, pool, "echo").InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || schema.Properties["text"].Type != "string" ||
		schema.Properties["text"].Description != "the text to send back" {
		t.Errorf("echo schema = %s", toolNamed(t, pool, "echo").InputSchema)
	}
	if d := toolNamed(t, pool, "echo").Description; d != "Sends the text back." {
		t.Errorf("echo description = %q", d)
	}
}

func hashOf(s string) string {
	name := qualifiedName("x", s, map[string]bool{"mcp__x__" + s: true})
	return name[strings.LastIndexByte(name, '_')+1:]
}

func toolNamed(t *testing.T, p *Pool, name string) Tool {
	t.Helper()
	for _, tool := range p.Tools() {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q", name)
	return Tool{}
}

func TestCallResults(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	pool := Connect(t.Context(), []ServerSpec{httpSpec("mem", f.url)}, allowLoopback())
	defer pool.Close()

	tests := []struct {
		tool, args string
		want       Result
	}{
		{"mcp__mem__echo", `{"text":"hi"}`, Result{Content: "echo: hi"}},
		{"mcp__mem__add", `{"a":2,"b":3}`, Result{Content: `{"sum":5}`}},
		{"mcp__mem__fail", ``, Result{Content: "the disk is full", IsError: true}},
		// No text content: the structured value first, then the summaries.
		{"mcp__mem__media", `{}`, Result{Content: "{\"rows\":3}\n[image image/png, 1234 bytes]\n[resource file:///notes.txt (text/plain)]\na note"}},
		{"mcp__mem__big", `{}`, Result{Content: strings.Repeat("x", DefaultMaxOutputBytes) + " [... 1000000 bytes omitted]"}},
		{toolNamed(t, pool, "dotted.name/v2").QualifiedName, `{}`, Result{Content: "dotted"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			got, err := pool.Call(t.Context(), tt.tool, json.RawMessage(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff[:min(len(diff), 2000)])
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		if _, err := pool.Call(t.Context(), "mcp__mem__nope", nil); err == nil {
			t.Error("an unknown tool gave no error")
		}
		if _, err := pool.Call(t.Context(), "mcp__mem__echo", json.RawMessage(`{"text":`)); err == nil {
			t.Error("invalid JSON arguments gave no error")
		}
		// The server refuses arguments that do not fit the schema.
		res, err := pool.Call(t.Context(), "mcp__mem__add", json.RawMessage(`{"a":"two"}`))
		if err == nil && !res.IsError {
			t.Errorf("a schema violation gave %+v", res)
		}
	})
}

func TestHeadersReachEveryRequest(t *testing.T) {
	const secret = "s3cret-token-value"
	f := newFixture(t, fixtureOptions{headerValue: secret})
	spec := httpSpec("mem", f.url)
	spec.Headers = map[string]string{testHeader: secret}
	pool := Connect(t.Context(), []ServerSpec{spec}, allowLoopback())
	if _, err := pool.Call(t.Context(), "mcp__mem__echo", json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	requests, missing := f.headerStats()
	if requests < 3 || missing != 0 {
		t.Errorf("%d of %d requests lacked the configured header", missing, requests)
	}
	if !f.sawMethod(http.MethodDelete) {
		t.Error("Close sent no DELETE")
	}
}

func TestIncludeList(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	spec := httpSpec("mem", f.url)
	spec.ToolMode, spec.Include = ToolsInclude, []string{"echo", "missing_tool"}
	pool := Connect(t.Context(), []ServerSpec{spec}, allowLoopback())
	defer pool.Close()
	var names []string
	for _, tool := range pool.Tools() {
		names = append(names, tool.QualifiedName)
	}
	if diff := cmp.Diff([]string{"mcp__mem__echo"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	want := []string{`MCP server "mem" has no tool named "missing_tool" (listed in policy.tools.names); it is left out.`}
	if diff := cmp.Diff(want, pool.Notices()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if _, err := pool.Call(t.Context(), "mcp__mem__add", nil); err == nil {
		t.Error("a tool left out by the include list could be called")
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableServerIsReported(t *testing.T) {
	const secret = "header-secret-value"
	f := newFixture(t, fixtureOptions{})
	down := httpSpec("down", "http://"+closedPort(t)+"/mcp?token=query-secret-value")
	down.Headers = map[string]string{"Authorization": "Bearer " + secret}
	pool := Connect(t.Context(), []ServerSpec{down, httpSpec("up", f.url)}, allowLoopback())
	defer pool.Close()

	notices := pool.Notices()
	if len(notices) != 1 {
		t.Fatalf("notices: %q", notices)
	}
	n := notices[0]
	if !strings.HasPrefix(n, `MCP server "down" is unavailable for this run: could not connect to http://127.0.0.1:`) ||
		!strings.Contains(n, "connection refused") {
		t.Errorf("notice = %q", n)
	}
	if strings.Contains(n, secret) || strings.Contains(n, "query-secret-value") {
		t.Error("the notice carries a header value or the URL's query")
	}
	if _, err := pool.Call(t.Context(), "mcp__up__echo", json.RawMessage(`{"text":"still here"}`)); err != nil {
		t.Errorf("the reachable server does not work: %v", err)
	}
}

func TestConnectFailures(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Never answers. The body is read first: Go's server notices a client
		// hanging up only once the request body has been consumed.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer hang.Close()
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer unauthorized.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	other := newFixture(t, fixtureOptions{})
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Same address, but named differently: another origin.
		http.Redirect(w, r, strings.Replace(other.url, "127.0.0.1", "localhost", 1), http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	opts := allowLoopback()
	opts.ConnectTimeout = 300 * time.Millisecond
	opts.Guard.HostAllowlist = append(opts.Guard.HostAllowlist, "localhost")

	tests := []struct {
		name, url, want string
	}{
		{"hang", hang.URL, `MCP server "hang" is unavailable for this run: ` + hang.URL + ` did not answer within the connect timeout.`},
		{"unauthorized", unauthorized.URL, `MCP server "unauthorized" is unavailable for this run: ` + unauthorized.URL + ` answered HTTP 401 Unauthorized.`},
		{"notfound", notFound.URL + "/mcp?key=query-secret", `MCP server "notfound" is unavailable for this run: streamable HTTP answered HTTP 404 and the SSE transport failed too: ` + notFound.URL + ` answered HTTP 404 Not Found.`},
		{"redirect", redirect.URL, `MCP server "redirect" is unavailable for this run: ` + redirect.URL + ` redirected to another origin (` +
			originOf(strings.Replace(other.url, "127.0.0.1", "localhost", 1)) + `); runnel only follows redirects within an MCP server's own scheme, host and port.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := Connect(t.Context(), []ServerSpec{httpSpec(tt.name, tt.url)}, opts)
			defer pool.Close()
			if diff := cmp.Diff([]string{tt.want}, pool.Notices()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			if len(pool.Tools()) != 0 {
				t.Errorf("tools from a failed server: %v", pool.Tools())
			}
		})
	}
}

func TestSSE(t *testing.T) {
	for _, transport := range []string{TransportSSE, TransportHTTP} { // direct, and as the fallback
		t.Run(transport, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{sse: true, headerValue: "sse-secret"})
			spec := ServerSpec{Name: "old", Transport: transport, URL: f.url, ToolMode: ToolsAll,
				Headers: map[string]string{testHeader: "sse-secret"}}
			pool := Connect(t.Context(), []ServerSpec{spec}, allowLoopback())
			if n := pool.Notices(); len(n) != 0 {
				t.Fatalf("notices: %q", n)
			}
			res, err := pool.Call(t.Context(), "mcp__old__echo", json.RawMessage(`{"text":"over sse"}`))
			if err != nil || res.Content != "echo: over sse" {
				t.Errorf("call = %+v, %v", res, err)
			}
			if err := pool.Close(); err != nil {
				t.Fatal(err)
			}
			f.sessions.waitClosed(t)
			if requests, missing := f.headerStats(); missing != 0 {
				t.Errorf("%d of %d requests lacked the configured header", missing, requests)
			}
		})
	}
}

func TestStatelessServer(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "stateless", Version: "1"}, nil)
	addFixtureTools(server, &fixture{})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer hs.Close()
	pool := Connect(t.Context(), []ServerSpec{httpSpec("sl", hs.URL)}, allowLoopback())
	defer pool.Close()
	res, err := pool.Call(t.Context(), "mcp__sl__echo", json.RawMessage(`{"text":"no session"}`))
	if err != nil || res.Content != "echo: no session" {
		t.Errorf("call = %+v, %v; notices %q", res, err, pool.Notices())
	}
}

// TestSessionsClosed checks, from the server's side, that Close ends every
// session whatever happened before it.
func TestSessionsClosed(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *fixture, p *Pool)
	}{
		{"success", func(t *testing.T, f *fixture, p *Pool) {
			if _, err := p.Call(t.Context(), "mcp__mem__echo", json.RawMessage(`{"text":"x"}`)); err != nil {
				t.Fatal(err)
			}
		}},
		{"tool error", func(t *testing.T, f *fixture, p *Pool) {
			if res, err := p.Call(t.Context(), "mcp__mem__fail", nil); err != nil || !res.IsError {
				t.Fatalf("call = %+v, %v", res, err)
			}
		}},
		{"timeout", func(t *testing.T, f *fixture, p *Pool) {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			_, err := p.Call(ctx, "mcp__mem__slow", nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want a deadline error", err)
			}
			await(t, f.slowCancelled, "the server to see the call cancelled")
		}},
		{"cancellation", func(t *testing.T, f *fixture, p *Pool) {
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := p.Call(ctx, "mcp__mem__slow", nil)
				errc <- err
			}()
			await(t, f.slowStarted, "the slow tool to start")
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want cancelled", err)
			}
			await(t, f.slowCancelled, "the server to see the call cancelled")
		}},
		{"cancellation, then Close at once", func(t *testing.T, f *fixture, p *Pool) {
			// The run's usual ending: its context is cancelled and the pool
			// closed straight after; the server must still hear of it.
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := p.Call(ctx, "mcp__mem__slow", nil)
				errc <- err
			}()
			await(t, f.slowStarted, "the slow tool to start")
			cancel()
			<-errc
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			await(t, f.slowCancelled, "the server to see the call cancelled")
		}},
		{"close during a call", func(t *testing.T, f *fixture, p *Pool) {
			errc := make(chan error, 1)
			go func() {
				_, err := p.Call(t.Context(), "mcp__mem__slow", nil)
				errc <- err
			}()
			await(t, f.slowStarted, "the slow tool to start")
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err == nil {
				t.Fatal("a call cut off by Close reported no error")
			}
			await(t, f.slowCancelled, "the server to see the call cancelled")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			pool := Connect(t.Context(), []ServerSpec{httpSpec("mem", f.url)}, allowLoopback())
			if live, _ := f.sessions.counts(); live != 1 {
				t.Fatalf("live sessions after Connect = %d, want 1; notices %q", live, pool.Notices())
			}
			tt.run(t, f, pool)
			if err := pool.Close(); err != nil {
				t.Fatal(err)
			}
			f.sessions.waitClosed(t)
			if err := pool.Close(); err != nil {
				t.Errorf("a second Close: %v", err)
			}
			if _, err := pool.Call(t.Context(), "mcp__mem__echo", nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Call after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestCallTimeout: a call the server never answers ends at the call
// timeout with a sentence naming the tool, not the caller's deadline, and
// the server is told to stop; the session goes on.
func TestCallTimeout(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	opts := allowLoopback()
	opts.CallTimeout = 100 * time.Millisecond
	pool := Connect(t.Context(), []ServerSpec{httpSpec("mem", f.url)}, opts)
	defer pool.Close()
	_, err := pool.Call(t.Context(), "mcp__mem__slow", nil)
	want := `MCP server "mem": the call to "slow" got no answer within 100ms; the server was asked to cancel it`
	if err == nil || err.Error() != want || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call = %v, want %q", err, want)
	}
	await(t, f.slowCancelled, "the server to see the call cancelled")
	if res, err := pool.Call(t.Context(), "mcp__mem__echo", json.RawMessage(`{"text":"still here"}`)); err != nil || res.Content != "echo: still here" {
		t.Errorf("the next call = %+v, %v", res, err)
	}
}

// TestDroppedCall: a server whose connection breaks under a call is not
// reported as having answered with an error: the SDK's own code for a
// failed exchange (-32005) is not the server's.
func TestDroppedCall(t *testing.T) {
	h := newHostile(t, hostileOptions{}, func(_ *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
		if call.Params.Name != "drop" {
			return false
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return true
	})
	pool := Connect(t.Context(), []ServerSpec{httpSpec("h", h.url)}, allowLoopback())
	defer pool.Close()
	_, err := pool.Call(t.Context(), "mcp__h__drop", nil)
	want := `MCP server "h": call to "drop" failed: the request got no answer (EOF)`
	if err == nil || err.Error() != want {
		t.Errorf("call = %v, want %q", err, want)
	}
	if res, err := pool.Call(t.Context(), "mcp__h__echo", json.RawMessage(`{"text":"after"}`)); err != nil || res.Content != "echo: after" {
		t.Errorf("the next call = %+v, %v", res, err)
	}
}
