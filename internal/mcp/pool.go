package mcp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel"
)

// DefaultConnectTimeout bounds connecting to one server: dialing,
// initializing and listing its tools.
const DefaultConnectTimeout = 15 * time.Second

// maxToolsPerServer bounds a tool list, which a broken or hostile server
// could page through forever.
const maxToolsPerServer = 1000

// Options configures Connect. A nil *Options, or a zero field, means the
// documented default.
type Options struct {
	Guard GuardOptions
	// ConnectTimeout bounds connecting to each server; 0 is
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MaxOutputBytes caps one call's Result.Content; 0 is
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
	// TLSConfig is used for https servers (custom roots for on-premises
	// servers, tests); nil is the system roots.
	TLSConfig *tls.Config
	// Version is runnel's version, sent as the MCP clientInfo.
	Version string
	// Logger receives the SDK's log; nil discards it.
	Logger *slog.Logger
}

func (o *Options) withDefaults() *Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.ConnectTimeout <= 0 {
		v.ConnectTimeout = DefaultConnectTimeout
	}
	if v.MaxOutputBytes <= 0 {
		v.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	return &v
}

// Tool is an MCP tool as the run offers it to the model.
type Tool struct {
	Server string
	// Name is the server's own name for the tool; QualifiedName is the
	// name the model sees, mcp__<server>__<tool> (see qualifiedName for
	// names a provider would refuse).
	Name          string
	QualifiedName string
	// Description is the server's description, or its title when it gave
	// no description.
	Description string
	// InputSchema is the server's schema, or runnel.PermissiveSchema when
	// it gave none.
	InputSchema json.RawMessage
	// ReadOnly is true when the server annotates the tool readOnlyHint;
	// nil otherwise (the SDK cannot tell an explicit false from an absent
	// hint, and allow_reads treats both as a write).
	ReadOnly *bool
	// ServerPermission is the server's policy.permission ("" when unset).
	ServerPermission string
}

// Pool holds the MCP sessions of one run. Its methods are safe for
// concurrent use. Close it when the run ends, whatever happened.
type Pool struct {
	servers   []*server
	tools     []Tool
	byName    map[string]toolRef
	notices   []string
	maxOutput int

	// calls is cancelled by Close, so a call in flight cannot hold the
	// session open (the SDK's Close waits for outstanding calls).
	calls       context.Context
	cancelCalls context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

type toolRef struct {
	server *server
	name   string
}

// server is one connected MCP server.
type server struct {
	spec    ServerSpec
	http    *serverHTTP
	session *mcp.ClientSession
	endLife context.CancelFunc
}

// close closes the session (a DELETE for a streamable session, the end of
// the stream for SSE), once the server has been told about every call
// cancelled on it, then the connections left idle.
func (s *server) close() error {
	var err error
	if s.session != nil {
		s.http.headers.cancels.wait()
		err = s.session.Close()
	}
	s.endLife()
	s.http.close()
	if err != nil {
		return fmt.Errorf("closing MCP server %q: %s", s.spec.Name, s.scrub(err.Error()))
	}
	return nil
}

// Connect opens a session with every server concurrently, lists each one's
// tools and applies its include list. A server that cannot be reached,
// refuses the guard, or fails to initialize is left out and reported in
// Notices; Connect itself never fails. It returns when every server has
// connected or failed, each within the connect timeout; cancelling ctx
// stops connecting. The pool outlives ctx: Close ends it.
func Connect(ctx context.Context, specs []ServerSpec, opts *Options) *Pool {
	o := opts.withDefaults()
	type outcome struct {
		srv     *server
		tools   []*mcp.Tool
		notices []string
	}
	outcomes := make([]outcome, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			srv, tools, notices := connectServer(ctx, spec, o)
			outcomes[i] = outcome{srv, tools, notices}
		})
	}
	wg.Wait()

	p := &Pool{byName: make(map[string]toolRef), maxOutput: o.MaxOutputBytes}
	p.calls, p.cancelCalls = context.WithCancel(context.Background())
	taken := make(map[string]bool)
	for _, oc := range outcomes {
		p.notices = append(p.notices, oc.notices...)
		if oc.srv == nil {
			continue
		}
		p.servers = append(p.servers, oc.srv)
		for _, t := range oc.tools {
			tool := toolOf(oc.srv.spec, t, taken)
			taken[tool.QualifiedName] = true
			p.tools = append(p.tools, tool)
			p.byName[tool.QualifiedName] = toolRef{server: oc.srv, name: t.Name}
		}
	}
	return p
}

// connectServer connects one server. On failure it returns a nil server,
// having released everything it opened, and the notice saying why.
func connectServer(ctx context.Context, spec ServerSpec, o *Options) (*server, []*mcp.Tool, []string) {
	u, err := url.Parse(spec.URL)
	if err != nil { // Normalize produced it; only a hand-made spec gets here
		return nil, nil, []string{unavailable(spec.Name, "its URL does not parse")}
	}
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	srv := &server{spec: spec, http: newServerHTTP(life, spec, u, o), endLife: endLife}
	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()

	if err := srv.http.dialer.preflight(cctx, u); err != nil {
		_ = srv.close()
		var ge *GuardError
		if errors.As(err, &ge) {
			return nil, nil, []string{unavailable(spec.Name, ge.Reason)}
		}
		return nil, nil, []string{unavailable(spec.Name, srv.scrub(err.Error()))}
	}
	if reason := srv.open(cctx, life, o); reason != "" {
		_ = srv.close()
		return nil, nil, []string{unavailable(spec.Name, reason)}
	}
	// What went wrong on the way in (a refused server/discover, say) says
	// nothing about what happens next.
	srv.http.headers.resetStatus()
	tools, notices, err := listTools(cctx, srv.session, spec)
	if err != nil {
		notices = append(notices, unavailable(spec.Name, srv.failure(cctx, err, "listing its tools failed: ")))
		_ = srv.close()
		return nil, nil, notices
	}
	return srv, tools, notices
}

// open initializes the session: streamable HTTP, falling back to SSE when
// the answer says the server needs it, or SSE directly. It returns why it
// failed, or "".
func (s *server) open(ctx, life context.Context, o *Options) string {
	client := mcp.NewClient(&mcp.Implementation{Name: "runnel", Version: o.Version}, &mcp.ClientOptions{
		Logger: o.Logger,
		// runnel answers no roots, sampling or elicitation requests.
		Capabilities: &mcp.ClientCapabilities{},
	})
	sse := &lifetimeTransport{
		inner: &mcp.SSEClientTransport{Endpoint: s.spec.URL, HTTPClient: s.http.client},
		life:  life,
		end:   s.endLife,
	}
	var err error
	if s.spec.Transport == TransportSSE {
		if s.session, err = client.Connect(ctx, sse, nil); err != nil {
			return s.failure(ctx, err, "")
		}
		return ""
	}
	streamable := &mcp.StreamableClientTransport{
		Endpoint:   s.spec.URL,
		HTTPClient: s.http.client,
		// runnel only makes requests; a standing GET stream for
		// server-initiated messages would be a connection held for nothing.
		DisableStandaloneSSE: true,
	}
	s.session, err = client.Connect(ctx, streamable, nil)
	if err == nil {
		return ""
	}
	status := s.http.headers.lastStatus()
	if !needsSSE(status) || ctx.Err() != nil {
		return s.failure(ctx, err, "")
	}
	s.http.headers.resetStatus()
	if s.session, err = client.Connect(ctx, sse, nil); err != nil {
		return fmt.Sprintf("streamable HTTP answered HTTP %d and the SSE transport failed too: %s", status, s.failure(ctx, err, ""))
	}
	return ""
}

func unavailable(name, reason string) string {
	return fmt.Sprintf("MCP server %q is unavailable for this run: %s.", name, strings.TrimSuffix(reason, "."))
}

// failure turns a connect error into a reason a person can act on. The
// SDK folds transport errors into its own strings, so the dialer's and
// the round tripper's own records come first; the SDK's text is the last
// resort, with the raw URL (which may carry a token in its query) replaced
// by its displayed form.
func (s *server) failure(ctx context.Context, err error, prefix string) string {
	var ge *GuardError
	if errors.As(s.http.dialer.lastDialError(), &ge) || errors.As(err, &ge) {
		return ge.Reason
	}
	if derr := s.http.dialer.lastDialError(); derr != nil {
		return prefix + s.scrub(derr.Error())
	}
	if status := s.http.headers.lastStatus(); status >= 400 {
		return fmt.Sprintf("%s%s answered HTTP %d %s", prefix, s.http.dialer.shown, status, http.StatusText(status))
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("%s%s did not answer within the connect timeout", prefix, s.http.dialer.shown)
	case ctx.Err() != nil:
		return prefix + "connecting was cancelled"
	}
	return prefix + s.scrub(err.Error())
}

func (s *server) scrub(msg string) string {
	return strings.ReplaceAll(msg, s.spec.URL, s.http.dialer.shown)
}

// listTools lists every tool, following pagination, and applies the
// include list. A name the list asks for that the server lacks is a
// notice, not a failure: the run goes on with the tools that exist.
func listTools(ctx context.Context, cs *mcp.ClientSession, spec ServerSpec) ([]*mcp.Tool, []string, error) {
	var tools []*mcp.Tool
	var notices []string
	seen := make(map[string]bool)
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, err
		}
		if seen[t.Name] {
			continue
		}
		if len(seen) == maxToolsPerServer {
			notices = append(notices, fmt.Sprintf("MCP server %q lists more than %d tools; only the first %d are used.", spec.Name, maxToolsPerServer, maxToolsPerServer))
			break
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	if spec.ToolMode != ToolsInclude {
		return tools, notices, nil
	}
	include := make(map[string]bool, len(spec.Include))
	for _, n := range spec.Include {
		include[n] = true
		if !seen[n] {
			notices = append(notices, fmt.Sprintf("MCP server %q has no tool named %q (listed in policy.tools.names); it is left out.", spec.Name, n))
		}
	}
	kept := tools[:0]
	for _, t := range tools {
		if include[t.Name] {
			kept = append(kept, t)
		}
	}
	return kept, notices, nil
}

func toolOf(spec ServerSpec, t *mcp.Tool, taken map[string]bool) Tool {
	tool := Tool{
		Server:           spec.Name,
		Name:             t.Name,
		QualifiedName:    qualifiedName(spec.Name, t.Name, taken),
		Description:      cmpOr(t.Description, t.Title),
		InputSchema:      runnel.PermissiveSchema(),
		ServerPermission: spec.Permission,
	}
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" {
			tool.InputSchema = b
		}
	}
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		readOnly := true
		tool.ReadOnly = &readOnly
	}
	return tool
}

// Tools returns the tools of every connected server, in server order.
func (p *Pool) Tools() []Tool {
	out := make([]Tool, len(p.tools))
	copy(out, p.tools)
	return out
}

// Notices returns a sentence for each thing the run should report: a
// server left out and why, an included tool the server lacks. Header
// values never appear in them.
func (p *Pool) Notices() []string {
	out := make([]string, len(p.notices))
	copy(out, p.notices)
	return out
}

// ErrClosed is returned by Call after Close.
var ErrClosed = errors.New("the MCP connections of this run are closed")

// Call calls a tool by its qualified name with the model's arguments (a
// JSON object; empty means {}). A result the server marks isError is a
// Result, not an error: the model should see it. An error means the call
// produced no result: an unknown tool, a transport failure, a JSON-RPC
// error, or ctx ending (then the error wraps ctx's error, and the SDK has
// sent notifications/cancelled to the server).
func (p *Pool) Call(ctx context.Context, qualifiedName string, args json.RawMessage) (Result, error) {
	ref, ok := p.byName[qualifiedName]
	if !ok {
		return Result{}, fmt.Errorf("no MCP tool named %q in this run", qualifiedName)
	}
	if len(strings.TrimSpace(string(args))) == 0 {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return Result{}, fmt.Errorf("the arguments for %s are not valid JSON", qualifiedName)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Result{}, ErrClosed
	}
	p.inFlight.Add(1)
	p.mu.Unlock()
	defer p.inFlight.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.calls, cancel)
	defer stop()

	res, err := ref.server.session.CallTool(ctx, &mcp.CallToolParams{Name: ref.name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			// The SDK sends notifications/cancelled for this call from a
			// goroutine of its own; Close must not overtake it.
			ref.server.http.headers.cancels.owe()
		}
		return Result{}, ref.server.callError(ctx, ref.name, err)
	}
	return resultOf(res, p.maxOutput), nil
}

// callError says why a call produced no result, without the raw URL.
func (s *server) callError(ctx context.Context, tool string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("MCP server %q: call to %q ended: %w", s.spec.Name, tool, context.Cause(ctx))
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return fmt.Errorf("MCP server %q answered the call to %q with an error: %s (code %d)", s.spec.Name, tool, rpcErr.Message, rpcErr.Code)
	}
	return fmt.Errorf("MCP server %q: call to %q failed: %s", s.spec.Name, tool, s.scrub(err.Error()))
}

// Close closes every session, whatever state it is in. Calls in flight
// are cancelled first, and the server is told so (notifications/cancelled)
// before its session ends; then each session is closed, concurrently (a
// DELETE for streamable HTTP, bounded by the SDK at 5 s; the end of the
// stream for SSE), every request still open is aborted and the idle
// connections are dropped. When Close returns nothing of the pool is left
// running but the SDK's goroutines unwinding from those aborts. It is
// safe to call more than once; later calls return the first call's result.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancelCalls()
		p.inFlight.Wait()
		errs := make([]error, len(p.servers))
		var wg sync.WaitGroup
		for i, s := range p.servers {
			wg.Go(func() { errs[i] = s.close() })
		}
		wg.Wait()
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}
