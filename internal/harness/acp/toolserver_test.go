package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
)

// fixedCalls answers every tools/call: "echo" with its arguments, "park"
// by pausing (no response), and counts how often each ran.
type fixedCalls struct {
	ran atomic.Int32
}

func (f *fixedCalls) serverCall(ctx context.Context, hc *httpCall, tool Tool, args json.RawMessage, _ string) (*mcp.CallToolResult, bool) {
	pauses := tool.Name == "park"
	if hc.verdict(ctx, pauses) {
		return nil, true
	}
	f.ran.Add(1)
	return mcpResult(harness.ToolResult{Output: runnel.TextOutput("echo " + string(args))}), false
}

func startTestServer(t *testing.T, h callHandler) *toolServer {
	t.Helper()
	srv, err := startToolServer([]Tool{
		{Name: "echo", Description: "echoes", Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		{Name: "park", Schema: json.RawMessage(`{"properties":{}}`)}, // no type: served as an object schema
		{Name: "odd", Schema: json.RawMessage(`"not a schema"`)},
	}, h, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// bearer adds headers to every request, as an agent does with the
// mcpServers entry's headers.
type bearer struct {
	headers map[string]string
	next    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range b.headers {
		r.Header.Set(k, v)
	}
	return b.next.RoundTrip(r)
}

func connect(t *testing.T, srv *toolServer) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL(), HTTPClient: &http.Client{Transport: bearer{srv.Headers(), tr}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// An agent lists the run's tools with their real schemas (a schema that
// is not an object schema served as one, never dropped) and calls them.
func TestToolServerServesTools(t *testing.T) {
	calls := &fixedCalls{}
	srv := startTestServer(t, calls)
	cs := connect(t, srv)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]string{}
	for _, tool := range list.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		schemas[tool.Name] = string(b)
	}
	want := map[string]string{
		"echo": `{"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"}`,
		"park": `{"properties":{},"type":"object"}`,
		"odd":  `{"type":"object"}`,
	}
	for name, schema := range want {
		if schemas[name] != schema {
			t.Errorf("tool %s schema %s, want %s", name, schemas[name], schema)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `echo {"text":"hi"}` || res.IsError {
		t.Errorf("result %q (error %v)", got, res.IsError)
	}
}

// Without the run's token nothing is served; GET is 405; a request that
// names the internal header cannot pick another request's state.
func TestToolServerRefusesStrangers(t *testing.T) {
	srv := startTestServer(t, &fixedCalls{})
	for _, tc := range []struct {
		name, method, auth string
		want               int
	}{
		{"no token", http.MethodPost, "", http.StatusUnauthorized},
		{"wrong token", http.MethodPost, "Bearer nope", http.StatusUnauthorized},
		{"token of another form", http.MethodPost, srv.token, http.StatusUnauthorized},
		{"GET", http.MethodGet, "Bearer " + srv.token, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, srv.URL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// rawPost sends body to the server on a fresh connection and returns the
// raw bytes the server sent before it closed, or what a timeout cut.
func rawPost(t *testing.T, srv *toolServer, body string) string {
	t.Helper()
	conn, err := net.Dial("tcp", srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "POST /mcp HTTP/1.1\r\nHost: " + srv.ln.Addr().String() + "\r\nAuthorization: Bearer " + srv.token +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-03-26\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(bufio.NewReader(conn))
	return string(b)
}

// A paused tools/call gets no response at all: not an error the agent
// could record as the call's result, just a closed connection.
func TestToolServerPausedCallGetsNoResponse(t *testing.T) {
	srv := startTestServer(t, &fixedCalls{})
	got := rawPost(t, srv, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"park","arguments":{}}}`)
	if got != "" {
		t.Errorf("the paused call got %q, want the connection closed with nothing", got)
	}
	// The server still answers the next request.
	if got := rawPost(t, srv, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`); !strings.Contains(got, `echo {\"text\":\"x\"}`) {
		t.Errorf("after a pause: %q", got)
	}
}

// A batch (protocol 2025-03-26) in which one call would pause runs none
// of its siblings: they would have side effects the pause cannot undo.
func TestToolServerBatchThatPausesRunsNothing(t *testing.T) {
	calls := &fixedCalls{}
	srv := startTestServer(t, calls)
	got := rawPost(t, srv, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"park","arguments":{}}},`+
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}]`)
	if got != "" {
		t.Errorf("the batch got %q, want no response", got)
	}
	if n := calls.ran.Load(); n != 0 {
		t.Errorf("%d calls of a pausing batch ran, want 0", n)
	}
	got = rawPost(t, srv, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}]`)
	if !strings.Contains(got, `echo {\"text\":\"a\"}`) || !strings.Contains(got, `echo {\"text\":\"b\"}`) || calls.ran.Load() != 2 {
		t.Errorf("a batch that does not pause: %q, %d ran", got, calls.ran.Load())
	}
}
