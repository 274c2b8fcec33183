package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testHeader is the header the fixtures check for; its value stands in for
// a secret and is never printed.
const testHeader = "X-Test-Token"

// fixture is a real MCP server built with the go-sdk, served over a real
// loopback socket by httptest. It counts live sessions from the server's
// side, records whether every request carried the configured header, and
// has a slow tool that reports when it starts and when its context ends.
type fixture struct {
	t        *testing.T
	url      string
	sessions *sessionTracker

	slowStarted   chan struct{} // receives when the slow tool starts
	slowCancelled chan struct{} // receives when the slow tool's ctx ends

	mu              sync.Mutex
	requests        int
	missingHeader   int // requests that lacked the header or had another value
	methods         []string
	wantHeaderValue string
}

type fixtureOptions struct {
	sse         bool // serve the SSE transport instead of streamable HTTP
	headerValue string
	pageSize    int
	anyHost     bool // accept Host headers other than localhost on loopback
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{
		t:               t,
		sessions:        newSessionTracker(),
		slowStarted:     make(chan struct{}, 8),
		slowCancelled:   make(chan struct{}, 8),
		wantHeaderValue: o.headerValue,
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "1"}, &mcp.ServerOptions{
		PageSize: o.pageSize,
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			f.sessions.track(req.Session)
		},
	})
	addFixtureTools(server, f)
	var handler http.Handler
	if o.sse {
		handler = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.SSEOptions{DisableLocalhostProtection: o.anyHost})
	} else {
		handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{DisableLocalhostProtection: o.anyHost})
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	f.url = hs.URL + "/mcp"
	return f
}

func (f *fixture) record(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	f.methods = append(f.methods, r.Method)
	if f.wantHeaderValue != "" && r.Header.Get(testHeader) != f.wantHeaderValue {
		f.missingHeader++
	}
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

func addFixtureTools(server *mcp.Server, f *fixture) {
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Sends the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Adds two numbers.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the disk is full")
		})
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Runs until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			f.slowStarted <- struct{}{}
			<-ctx.Done()
			f.slowCancelled <- struct{}{}
			return nil, nil, ctx.Err()
		})
	server.AddTool(&mcp.Tool{Name: "media", Description: "Returns an image and a structured value.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "a note"}},
				},
				StructuredContent: map[string]any{"rows": 3},
			}, nil
		})
	server.AddTool(&mcp.Tool{Name: "big", Description: "Returns 2 MB of text.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 2_000_000)}}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "dotted.name/v2", Description: "A name providers refuse.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dotted"}}}, nil
		})
}

// headerStats returns how many requests the server saw and how many of
// them lacked the configured header value.
func (f *fixture) headerStats() (requests, missing int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.missingHeader
}

func (f *fixture) sawMethod(m string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, got := range f.methods {
		if got == m {
			return true
		}
	}
	return false
}

// await receives from ch, failing the test if nothing arrives: a guard
// against a hang, not a timing assertion.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// sessionTracker counts the server's live sessions: a session is live from
// its initialized notification until ServerSession.Wait returns, which is
// when the server has closed it.
type sessionTracker struct {
	mu      sync.Mutex
	live    int
	total   int
	changed chan struct{} // closed and replaced on every change
}

func newSessionTracker() *sessionTracker {
	return &sessionTracker{changed: make(chan struct{})}
}

func (s *sessionTracker) track(ss *mcp.ServerSession) {
	s.update(+1)
	go func() {
		_ = ss.Wait()
		s.update(-1)
	}()
}

func (s *sessionTracker) update(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live += d
	if d > 0 {
		s.total += d
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *sessionTracker) counts() (live, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, s.total
}

// waitClosed waits until the server has no live session, failing the test
// if that does not happen. Closing a streamable session is synchronous (the
// DELETE), but an SSE session ends when the server notices the stream
// closed, so this waits on the tracker's change signal.
func (s *sessionTracker) waitClosed(t *testing.T) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		live, total, changed := s.live, s.total, s.changed
		s.mu.Unlock()
		if total == 0 {
			t.Fatal("the server never saw a session; the check would prove nothing")
		}
		if live == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the server still has %d live MCP session(s) after Close", live)
		}
	}
}

// allowLoopback is the guard configuration of tests: their servers listen
// on 127.0.0.1, which only an allowlist lets runnel reach.
func allowLoopback() *Options {
	return &Options{Guard: GuardOptions{HostAllowlist: []string{"127.0.0.1"}}}
}
