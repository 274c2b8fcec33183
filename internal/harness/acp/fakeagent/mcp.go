package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// closedPrefix starts the error of a call whose server closed the
// connection with no JSON-RPC answer, which is how runnel pauses a call.
const closedPrefix = "connection closed with no response"

// codeRejectedByTransport is the go-sdk's code for a request that failed
// in the transport (jsonrpc2.ErrRejected), not an answer from the server.
const codeRejectedByTransport = -32005

// mcpClients are the fake's MCP client sessions, one per server of the
// latest session/new, opened at first use. Safe for concurrent use.
type mcpClients struct {
	client  *mcp.Client
	base    *http.Transport
	version string
	log     *eventLog

	mu       sync.Mutex
	servers  map[string]mcpServerParam
	sessions map[string]*mcp.ClientSession
}

func newMCPClients(version string, log *eventLog) *mcpClients {
	return &mcpClients{
		client: mcp.NewClient(&mcp.Implementation{Name: "fakeagent", Version: "0.0.0"}, nil),
		// Its own transport, and no proxy: the servers are on loopback and
		// the environment is whatever runnel left in it.
		base:     &http.Transport{},
		version:  cmp.Or(version, "2025-11-25"),
		log:      log,
		servers:  make(map[string]mcpServerParam),
		sessions: make(map[string]*mcp.ClientSession),
	}
}

// setServers replaces the servers; sessions to the old ones are closed.
func (m *mcpClients) setServers(list []mcpServerParam) {
	m.mu.Lock()
	old := m.sessions
	m.servers = make(map[string]mcpServerParam, len(list))
	for _, s := range list {
		m.servers[s.Name] = s
	}
	m.sessions = make(map[string]*mcp.ClientSession)
	m.mu.Unlock()
	for _, cs := range old {
		_ = cs.Close()
	}
}

// session returns the open session to a server, connecting first if needed.
func (m *mcpClients) session(ctx context.Context, name string) (*mcp.ClientSession, error) {
	m.mu.Lock()
	cs := m.sessions[name]
	srv, known := m.servers[name]
	m.mu.Unlock()
	switch {
	case cs != nil:
		return cs, nil
	case !known:
		return nil, fmt.Errorf("no MCP server %q in session/new", name)
	case srv.Type == "":
		return nil, fmt.Errorf("MCP server %q is a stdio server; the fake connects only to http servers", name)
	case srv.Type != "http":
		return nil, fmt.Errorf("MCP server %q has type %q; the fake connects only to http servers", name, srv.Type)
	}
	headers := make(http.Header)
	for _, h := range srv.Headers {
		headers.Set(h.Name, h.Value)
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: &http.Client{Transport: headerTransport{headers, m.base}},
		// A cut stream is how runnel pauses a call: report it at once
		// instead of reconnecting with backoff.
		MaxRetries: -1,
		// The fake needs nothing the server would push, and a standalone
		// stream that drops would fail the session between two steps.
		DisableStandaloneSSE: true,
	}
	cs, err := m.client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: m.version})
	if err != nil {
		return nil, fmt.Errorf("connecting to MCP server %q: %w", name, err)
	}
	m.log.note("mcp connected", map[string]string{"server": name, "protocolVersion": cs.InitializeResult().ProtocolVersion})
	m.mu.Lock()
	defer m.mu.Unlock()
	if other := m.sessions[name]; other != nil {
		go cs.Close() // another step connected first; keep its session
		return other, nil
	}
	m.sessions[name] = cs
	return cs, nil
}

// drop forgets a session whose transport failed, so the next step
// reconnects.
func (m *mcpClients) drop(name string, cs *mcp.ClientSession) {
	m.mu.Lock()
	if m.sessions[name] == cs {
		delete(m.sessions, name)
	}
	m.mu.Unlock()
	_ = cs.Close()
}

func (m *mcpClients) close() {
	m.setServers(nil)
	m.base.CloseIdleConnections()
}

// toolResult is the log's record of one tools/call.
type toolResult struct {
	Server            string          `json:"server"`
	Tool              string          `json:"tool"`
	Arguments         json.RawMessage `json:"arguments"`
	Async             bool            `json:"async,omitempty"`
	Text              string          `json:"text,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Content           json.RawMessage `json:"content,omitempty"`
	StructuredContent any             `json:"structuredContent,omitempty"`
	Error             string          `json:"error,omitempty"`
	// Closed: the server closed the connection with no answer.
	Closed bool `json:"closed,omitempty"`
	// Cancelled: session/cancel abandoned the call; TimedOut: its timeout did.
	Cancelled bool `json:"cancelled,omitempty"`
	TimedOut  bool `json:"timedOut,omitempty"`
	// ElapsedUS is the tools/call round trip alone, in microseconds
	// (connecting the session is not in it), as the agent saw it: what
	// bench/acp times a call by.
	ElapsedUS int64 `json:"elapsedUs,omitempty"`
}

// callTool runs one mcpCall step, logs its outcome and hands the text
// ({{last_tool_result}}) to setLast.
func (m *mcpClients) callTool(ctx context.Context, c *MCPCall, setLast func(string)) {
	args := c.Arguments
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	r := toolResult{Server: c.Server, Tool: c.Tool, Arguments: args, Async: c.Async}
	m.log.note("mcp tools/call", r)
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(c.Timeout))
		defer cancel()
	}
	cs, err := m.session(ctx, c.Server)
	var res *mcp.CallToolResult
	if err == nil {
		start := time.Now()
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Tool, Arguments: args})
		r.ElapsedUS = time.Since(start).Microseconds()
	}
	switch {
	case err == nil:
		var texts []string
		for _, content := range res.Content {
			if tc, ok := content.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		r.Text, r.IsError, r.StructuredContent = strings.Join(texts, "\n"), res.IsError, res.StructuredContent
		r.Content = mustJSON(res.Content)
		setLast(r.Text)
	default:
		r.Error = err.Error()
		var rpcErr *jsonrpc.Error
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			r.TimedOut = true
		case ctx.Err() != nil:
			r.Cancelled = true
		case closedWithoutAnswer(err):
			r.Closed = true
			r.Error = closedPrefix + ": " + r.Error
		case errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport:
			// The server answered: the session is fine.
			cs = nil
		}
		if cs != nil && !r.TimedOut && !r.Cancelled {
			// What the transport went through is unknown: the next step
			// reconnects.
			m.drop(c.Server, cs)
		}
		setLast("error: " + r.Error)
	}
	m.log.note("mcp tools/call result", r)
}

// closedWithoutAnswer recognises a connection that ended before the
// JSON-RPC answer: the HTTP response never came, or its stream ended
// first. The go-sdk flattens a failed POST into text ("…: EOF"), so the
// text is checked too.
func closedWithoutAnswer(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, mcp.ErrConnectionClosed) {
		return true
	}
	msg := err.Error()
	return strings.HasSuffix(msg, ": EOF") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "connection reset by peer")
}

// listTools logs the tools a server advertises, with their schemas.
func (m *mcpClients) listTools(ctx context.Context, server string) {
	record := struct {
		Server string      `json:"server"`
		Tools  []*mcp.Tool `json:"tools"`
		Error  string      `json:"error,omitempty"`
	}{Server: server, Tools: []*mcp.Tool{}}
	cs, err := m.session(ctx, server)
	if err == nil {
		for tool, terr := range cs.Tools(ctx, nil) {
			if terr != nil {
				err = terr
				break
			}
			record.Tools = append(record.Tools, tool)
		}
	}
	if err != nil {
		record.Error = err.Error()
	}
	m.log.note("mcp tools/list result", record)
}

// headerTransport adds the session/new headers to every MCP request, as
// real agents forward them.
type headerTransport struct {
	headers http.Header
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for name, values := range t.headers {
		r.Header[name] = values
	}
	return t.base.RoundTrip(r)
}
