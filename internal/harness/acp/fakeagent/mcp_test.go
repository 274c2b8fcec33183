package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolServer is a real MCP server (go-sdk, streamable HTTP) that wants
// "Authorization: Bearer tok" and pauses a "pause" call the way runnel
// does: the connection closes with no response at all.
type toolServer struct {
	url string
	// started is closed when a "slow" or "wait" call starts; stopped when a
	// "slow" call sees its context end.
	started, stopped chan struct{}
	// release lets a "wait" call answer.
	release chan struct{}

	mu      sync.Mutex
	methods []string
}

func startToolServer(t *testing.T, stateless bool) *toolServer {
	t.Helper()
	ts := &toolServer{started: make(chan struct{}), stopped: make(chan struct{}), release: make(chan struct{})}
	var startOnce sync.Once
	server := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "0.0.0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echoes text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	type cityIn struct {
		City string `json:"city"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "get_weather", Description: "The weather in a city."},
		func(_ context.Context, _ *mcp.CallToolRequest, in cityIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Sunny in " + in.City}}}, nil, nil
		})
	type pathIn struct {
		Path string `json:"path"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "delete_file", Description: "Deletes a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Path + " deleted"}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "pause", Description: "Needs approval."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("a paused call must never run")
		})
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Runs until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			startOnce.Do(func() { close(ts.started) })
			<-ctx.Done()
			close(ts.stopped)
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(server, &mcp.Tool{Name: "wait", Description: "Answers when released."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			startOnce.Do(func() { close(ts.started) })
			select {
			case <-ts.release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		if m.Method != "" {
			ts.mu.Lock()
			ts.methods = append(ts.methods, m.Method)
			ts.mu.Unlock()
		}
		if m.Method == "tools/call" && m.Params.Name == "pause" {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ts.url = srv.URL
	return ts
}

func (ts *toolServer) seen() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.methods)
}

func (ts *toolServer) entry(name, token string) msg {
	return msg{"type": "http", "name": name, "url": ts.url,
		"headers": []msg{{"name": "Authorization", "value": "Bearer " + token}}}
}

// callResult is the part of a "mcp tools/call result" note the tests check.
type callResult struct {
	Tool                        string
	Text                        string
	Error                       string
	Closed, Cancelled, TimedOut bool
}

func TestMCP(t *testing.T) {
	bin := buildAgent(t)

	t.Run("tools over streamable HTTP with the session's headers", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, false)
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [{"steps": [
			{"mcpListTools": {"server": "runnel"}},
			{"mcpCall": {"server": "runnel", "tool": "echo", "arguments": {"text": "hi"}}},
			{"text": "got {{last_tool_result}}"},
			{"mcpCall": {"server": "runnel", "tool": "pause", "timeout": "60s"}},
			{"text": "then {{last_tool_result}}"},
			{"mcpCall": {"server": "runnel", "tool": "echo", "arguments": {"text": "again"}}},
			{"mcpCall": {"server": "runnel", "tool": "slow", "timeout": "100ms"}},
			{"mcpCall": {"server": "bad", "tool": "echo", "arguments": {"text": "x"}}},
			{"mcpCall": {"server": "local", "tool": "echo"}},
			{"mcpCall": {"server": "nowhere", "tool": "echo"}}
		]}]}`))
		sid := f.handshake(ts.entry("runnel", "tok"), ts.entry("bad", "wrong"),
			msg{"name": "local", "command": "/bin/false", "args": []string{}, "env": []msg{}})
		resp, before := f.call("session/prompt", promptParams(sid, "go"))
		if stopReason(t, resp) != "end_turn" {
			t.Errorf("prompt answered %s", resp.raw)
		}
		got := texts(before)
		if len(got) != 2 || got[0] != "got echo: hi" || !strings.HasPrefix(got[1], "then error: "+closedPrefix) {
			t.Errorf("texts = %q", got)
		}

		results := notes[callResult](f, "mcp tools/call result")
		if len(results) != 7 {
			t.Fatalf("results = %+v", results)
		}
		if diff := cmp.Diff(callResult{Tool: "echo", Text: "echo: hi"}, results[0]); diff != "" {
			t.Errorf("echo (-want +got):\n%s", diff)
		}
		// The paused call fails at once, not when its timeout ends.
		if r := results[1]; !r.Closed || r.TimedOut || !strings.HasPrefix(r.Error, closedPrefix) {
			t.Errorf("paused call = %+v", r)
		}
		if diff := cmp.Diff(callResult{Tool: "echo", Text: "echo: again"}, results[2]); diff != "" {
			t.Errorf("call after the pause (-want +got):\n%s", diff)
		}
		if r := results[3]; !r.TimedOut {
			t.Errorf("call past its timeout = %+v", r)
		}
		waitFor(t, ts.stopped, "the server to see the timed-out call cancelled")
		for i, want := range []string{"Unauthorized", "stdio server", `no MCP server "nowhere"`} {
			if r := results[4+i]; !strings.Contains(r.Error, want) {
				t.Errorf("result %d = %+v, want an error with %q", 4+i, r, want)
			}
		}

		type listed struct {
			Tools []struct {
				Name        string
				InputSchema map[string]any
			}
		}
		list := notes[listed](f, "mcp tools/list result")
		if len(list) != 1 || len(list[0].Tools) != 6 {
			t.Fatalf("tools/list notes = %+v", list)
		}
		for _, tool := range list[0].Tools {
			if tool.Name == "echo" && tool.InputSchema["properties"] == nil {
				t.Errorf("echo's schema = %v", tool.InputSchema)
			}
		}
		// A real client's handshake first, then the calls.
		if seen := ts.seen(); len(seen) < 3 || !slices.Equal(seen[:3], []string{"initialize", "notifications/initialized", "tools/list"}) {
			t.Errorf("server saw %q", seen)
		}
	})

	t.Run("session/cancel abandons an async call", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, false)
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [{"steps": [
			{"toolCall": {"toolCallId": "s1", "title": "mcp__runnel__slow", "status": "in_progress"}},
			{"mcpCall": {"server": "runnel", "tool": "slow", "async": true}},
			{"waitCancel": {}}
		]}]}`))
		sid := f.handshake(ts.entry("runnel", "tok"))
		id := f.request("session/prompt", promptParams(sid, "go"))
		waitFor(t, ts.started, "the slow call to start")
		f.notify("session/cancel", msg{"sessionId": sid})
		rest := f.until(isResponse(id))
		if got := stopReason(t, rest[len(rest)-1]); got != "cancelled" {
			t.Errorf("stopReason = %q", got)
		}
		waitFor(t, ts.stopped, "the server to see the call cancelled")
		if r := waitNote[callResult](f, "mcp tools/call result"); !r.Cancelled {
			t.Errorf("result = %+v, want cancelled", r)
		}
		if !slices.Contains(ts.seen(), "notifications/cancelled") {
			t.Errorf("server saw %q, want notifications/cancelled", ts.seen())
		}
	})

	t.Run("ignoreCancel keeps an async call past its turn", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, false)
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [
			{"whenPromptContains": "first", "steps": [
				{"mcpCall": {"server": "runnel", "tool": "wait", "async": true, "ignoreCancel": true}},
				{"waitCancel": {}}]},
			{"whenPromptContains": "second", "steps": [{"text": "{{last_tool_result}}"}]}
		]}`))
		sid := f.handshake(ts.entry("runnel", "tok"))
		id := f.request("session/prompt", promptParams(sid, "first"))
		waitFor(t, ts.started, "the call to start")
		f.notify("session/cancel", msg{"sessionId": sid})
		rest := f.until(isResponse(id))
		if got := stopReason(t, rest[len(rest)-1]); got != "cancelled" {
			t.Errorf("stopReason = %q", got)
		}
		close(ts.release)
		if r := waitNote[callResult](f, "mcp tools/call result"); r.Text != "released" {
			t.Errorf("result = %+v", r)
		}
		if _, before := f.call("session/prompt", promptParams(sid, "second")); !slices.Equal(texts(before), []string{"released"}) {
			t.Errorf("texts = %q", texts(before))
		}
	})

	t.Run("server/discover first on 2026-07-28", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, true)
		f := startFake(t, bin, scenarioJSON(t, `{"mcpProtocolVersion": "2026-07-28", "turns": [{"steps": [
			{"mcpCall": {"server": "runnel", "tool": "echo", "arguments": {"text": "v2"}}}
		]}]}`))
		sid := f.handshake(ts.entry("runnel", "tok"))
		f.call("session/prompt", promptParams(sid, "go"))
		type connected struct{ ProtocolVersion string }
		if c := notes[connected](f, "mcp connected"); len(c) != 1 || c[0].ProtocolVersion != "2026-07-28" {
			t.Errorf("connected notes = %+v", c)
		}
		if r := notes[callResult](f, "mcp tools/call result"); len(r) != 1 || r[0].Text != "echo: v2" {
			t.Errorf("results = %+v", r)
		}
		if seen := ts.seen(); len(seen) == 0 || seen[0] != "server/discover" {
			t.Errorf("server saw %q", seen)
		}
	})
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(readTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}
