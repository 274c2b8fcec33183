package acp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// maxToolRequestBytes bounds one HTTP request to runnel's MCP server.
	maxToolRequestBytes = 4 << 20
	// requestHeader carries, from runnel's HTTP layer to its tool
	// handlers, which HTTP request a tools/call came in (the MCP SDK hands
	// handlers the request's headers). Any copy the agent sends is removed.
	requestHeader = "X-Runnel-Internal-Request"
	// batchWait bounds how long the calls of one batch wait for each
	// other's verdicts; past it the batch is treated as pausing, so that
	// nothing with side effects runs on a guess.
	batchWait = 5 * time.Second
)

// callHandler is what runnel's MCP server asks the session for each
// tools/call: the result, or paused (the request must get no response).
type callHandler interface {
	serverCall(ctx context.Context, req *httpCall, tool Tool, args json.RawMessage, agentID string) (*mcp.CallToolResult, bool)
}

// toolServer is runnel's MCP server for one turn (DESIGN §7): the run's
// tools, on a loopback port, behind a random bearer token. It is the MCP
// SDK's stateless streamable HTTP handler with a layer of runnel's own in
// front, which checks the token, bounds requests and gives a paused
// tools/call no response at all: the connection is dropped, so the agent
// cannot settle the call.
type toolServer struct {
	token   string
	tools   map[string]Tool
	handler callHandler
	mcp     http.Handler
	srv     *http.Server
	ln      net.Listener
	log     *slog.Logger
	// inside is the loopback address the agent uses in a confined
	// sandbox, where the server listens on a unix socket in sockDir
	// (bridged in by the sandbox); empty for a loopback port.
	inside, sockDir string

	seq  atomic.Uint64
	mu   sync.Mutex
	reqs map[string]*httpCall
}

// httpCall is one HTTP request to runnel's server, which may carry several
// tools/call requests (a JSON-RPC batch of the 2025-03-26 protocol).
type httpCall struct {
	// calls counts the tools/call requests of the body; the batch runs
	// none of them until each has its verdict.
	calls   int
	mu      sync.Mutex
	arrived int
	paused  bool
	ready   chan struct{}
	once    sync.Once
}

// verdict records one call's verdict and waits until every call of the
// request has one. It reports whether the request pauses: then no call
// of it may run.
func (h *httpCall) verdict(ctx context.Context, pauses bool) bool {
	h.mu.Lock()
	h.arrived++
	h.paused = h.paused || pauses
	if h.arrived >= h.calls || h.paused {
		h.once.Do(func() { close(h.ready) })
	}
	h.mu.Unlock()
	t := time.NewTimer(batchWait)
	defer t.Stop()
	select {
	case <-h.ready:
	case <-t.C:
		h.pause()
	case <-ctx.Done():
		h.pause()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paused
}

// pause marks the request paused: it gets no response.
func (h *httpCall) pause() {
	h.mu.Lock()
	h.paused = true
	h.mu.Unlock()
	h.once.Do(func() { close(h.ready) })
}

func (h *httpCall) isPaused() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paused
}

// startToolServer serves tools on a fresh loopback port or, with inside
// set, on a unix socket in a private directory, which an agent in a
// network-confined sandbox reaches at http://inside (Socket): no TCP
// port into runnel at all.
func startToolServer(tools []Tool, handler callHandler, log *slog.Logger, inside string) (*toolServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tok [32]byte
	_, _ = rand.Read(tok[:]) // crypto/rand.Read never fails
	s := &toolServer{
		token:   base64.RawURLEncoding.EncodeToString(tok[:]),
		tools:   map[string]Tool{},
		handler: handler,
		log:     log,
		reqs:    map[string]*httpCall{},
		inside:  inside,
	}
	server := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: "1"}, &mcp.ServerOptions{Logger: log})
	for _, t := range tools {
		t := t
		s.tools[t.Name] = t
		if err := addTool(server, t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.call(ctx, req, t)
		}); err != nil {
			return nil, err
		}
	}
	s.mcp = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              log,
		MaxRequestBodyBytes: maxToolRequestBytes,
	})
	ln, err := s.listen()
	if err != nil {
		return nil, fmt.Errorf("starting runnel's MCP server: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// addTool registers t with its schema, made an object schema if it is
// not one (the SDK refuses others by panicking).
func addTool(server *mcp.Server, t Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %q cannot be served over MCP: %v", t.Name, p)
		}
	}()
	server.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: objectSchema(t.Schema)}, h)
	return nil
}

// objectSchema is schema when it is a JSON object of type "object",
// the same with that type when it names none, and the empty object
// schema otherwise: an agent must see the tool, whatever its spec said.
func objectSchema(schema json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(schema, &m) != nil || m == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	var typ string
	if raw, ok := m["type"]; ok {
		if json.Unmarshal(raw, &typ) != nil || typ != "object" {
			return json.RawMessage(`{"type":"object"}`)
		}
		return schema
	}
	m["type"] = json.RawMessage(`"object"`)
	out, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return out
}

// URL is where agents reach the server.
func (s *toolServer) URL() string {
	if s.inside != "" {
		return "http://" + s.inside + "/mcp"
	}
	return "http://" + s.ln.Addr().String() + "/mcp"
}

func (s *toolServer) listen() (net.Listener, error) {
	if s.inside == "" {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	dir, err := os.MkdirTemp("", "runnel-tools-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "mcp.sock"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.sockDir = dir
	return ln, nil
}

// Socket is the sandbox's bridge to the server ("ADDR=/path.sock", see
// sandbox.Isolation.Sockets), or "" when it listens on a loopback port.
func (s *toolServer) Socket() string {
	if s.inside == "" {
		return ""
	}
	return s.inside + "=" + s.ln.Addr().String()
}

// Headers are what an agent must send: the turn's bearer token.
func (s *toolServer) Headers() map[string]string {
	return map[string]string{"Authorization": "Bearer " + s.token}
}

// Close stops the server and drops every connection, a paused one too.
func (s *toolServer) Close() error {
	err := s.srv.Close()
	if s.sockDir != "" {
		err = errors.Join(err, os.RemoveAll(s.sockDir))
	}
	return err
}

func (s *toolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"unauthorized"}`)
		return
	}
	r.Header.Del(requestHeader)
	if r.Method != http.MethodPost {
		s.mcp.ServeHTTP(w, r) // GET and DELETE: 405 from the stateless handler
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxToolRequestBytes))
	if err != nil {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	hc := &httpCall{calls: s.countCalls(body), ready: make(chan struct{})}
	id := strconv.FormatUint(s.seq.Add(1), 10)
	s.mu.Lock()
	s.reqs[id] = hc
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.reqs, id)
		s.mu.Unlock()
	}()
	r.Header.Set(requestHeader, id)
	r.Body = io.NopCloser(bytes.NewReader(body))
	dw := &dropWriter{ResponseWriter: w, hc: hc}
	s.mcp.ServeHTTP(dw, r)
	if hc.isPaused() {
		// No response at all: the agent sees the connection close and
		// cannot take anything for the call's result (DESIGN §5.3).
		panic(http.ErrAbortHandler)
	}
}

func (s *toolServer) authorized(r *http.Request) bool {
	got := r.Header.Get("Authorization")
	want := "Bearer " + s.token
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// countCalls counts the tools/call requests for served tools in a body: a
// single request or a batch. What the SDK would refuse is not counted.
func (s *toolServer) countCalls(body []byte) int {
	type req struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	var batch []req
	if err := json.Unmarshal(body, &batch); err != nil {
		var one req
		if json.Unmarshal(body, &one) != nil {
			return 0
		}
		batch = []req{one}
	}
	n := 0
	for _, r := range batch {
		if _, ok := s.tools[r.Params.Name]; ok && r.Method == "tools/call" && len(r.ID) > 0 && string(r.ID) != "null" {
			n++
		}
	}
	return n
}

// call is the SDK's handler for one tools/call.
func (s *toolServer) call(ctx context.Context, req *mcp.CallToolRequest, t Tool) (*mcp.CallToolResult, error) {
	var hc *httpCall
	if req.Extra != nil && req.Extra.Header != nil {
		s.mu.Lock()
		hc = s.reqs[req.Extra.Header.Get(requestHeader)]
		s.mu.Unlock()
	}
	if hc == nil {
		// Not a request runnel's layer saw (cannot happen over HTTP):
		// treat it as a batch of one.
		hc = &httpCall{calls: 1, ready: make(chan struct{})}
	}
	var args json.RawMessage
	var agentID string
	if req.Params != nil {
		args = req.Params.Arguments
		agentID = callIDOf(req.Params.Meta)
	}
	res, paused := s.handler.serverCall(ctx, hc, t, args, agentID)
	if paused {
		hc.pause()
		return nil, errors.New("paused")
	}
	return res, nil
}

// callIDOf is the agent's ACP toolCallId that a tools/call names in its
// _meta: Claude's "claudecode/toolUseId", Codex's "callId".
func callIDOf(meta mcp.Meta) string {
	for _, k := range []string{"claudecode/toolUseId", "callId"} {
		if id, ok := meta[k].(string); ok && id != "" && len(id) <= 256 {
			return id
		}
	}
	return ""
}

// dropWriter passes a response through until its request pauses; from
// then on it swallows everything, so nothing of a paused request's answer
// reaches the agent.
type dropWriter struct {
	http.ResponseWriter
	hc *httpCall
}

func (d *dropWriter) WriteHeader(code int) {
	if !d.hc.isPaused() {
		d.ResponseWriter.WriteHeader(code)
	}
}

func (d *dropWriter) Write(b []byte) (int, error) {
	if d.hc.isPaused() {
		return len(b), nil
	}
	return d.ResponseWriter.Write(b)
}

func (d *dropWriter) Flush() {
	if f, ok := d.ResponseWriter.(http.Flusher); ok && !d.hc.isPaused() {
		f.Flush()
	}
}
