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

// DefaultCallTimeout bounds one tool call: a server that never answers
// would otherwise hold the run until its own deadline, and the model
// would never learn which tool failed it.
const DefaultCallTimeout = 2 * time.Minute

// Options configures Connect. A nil *Options, or a zero field, means the
// documented default.
type Options struct {
	Guard GuardOptions
	// ConnectTimeout bounds connecting to each server; 0 is
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// CallTimeout bounds each tool call, from the request to the whole
	// answer; 0 is DefaultCallTimeout. A call past it is cancelled (the
	// server is told) and fails with a sentence naming the tool.
	CallTimeout time.Duration
	// MaxOutputBytes caps one call's Result.Content; 0 is
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
	// TLSConfig is used for https servers (custom roots for on-premises
	// servers, tests); nil is the system roots.
	TLSConfig *tls.Config
	// Version is runnel's version, sent as the MCP clientInfo.
	Version string
	// Propagate writes the trace context of the call a request is for
	// (or of the run) into its headers; nil writes none.
	Propagate func(ctx context.Context, h http.Header)
	// Logger receives the SDK's log, with URLs cut to their origin and
	// the URL's secrets hidden; nil discards it.
	Logger *slog.Logger
	// MaxMessageBytes bounds one message read from a server: a JSON
	// answer, or one event of a stream. 0 is DefaultMaxMessageBytes. A
	// tool result over it is a failed call that says so (the rest is not
	// read); an initialize or tools/list answer over it leaves the server
	// out of the run.
	MaxMessageBytes int64
	// MaxStreamBytes bounds what a server may send while runnel waits
	// for one answer (see DefaultMaxStreamBytes); 0 is
	// DefaultMaxStreamBytes, and it is never less than MaxMessageBytes.
	MaxStreamBytes int64
	// MaxTools bounds the tools one server may list; 0 is
	// DefaultMaxTools. A server listing more is left out (see listTools).
	MaxTools int
	// Stdio starts a stdio server's program, in the run's sandbox; nil
	// leaves every stdio server out of the run, saying why.
	Stdio StartFunc
}

func (o *Options) withDefaults() *Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.ConnectTimeout <= 0 {
		v.ConnectTimeout = DefaultConnectTimeout
	}
	if v.CallTimeout <= 0 {
		v.CallTimeout = DefaultCallTimeout
	}
	if v.MaxOutputBytes <= 0 {
		v.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.MaxMessageBytes <= 0 {
		v.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if v.MaxStreamBytes <= 0 {
		v.MaxStreamBytes = DefaultMaxStreamBytes
	}
	v.MaxStreamBytes = max(v.MaxStreamBytes, v.MaxMessageBytes)
	if v.MaxTools <= 0 {
		v.MaxTools = DefaultMaxTools
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
	servers []*server
	tools   []Tool
	byName  map[string]toolRef
	notices []string
	// unreachable are the servers left out, by name, with why.
	unreachable []Unreachable
	maxOutput   int
	callTimeout time.Duration

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
	http    *serverHTTP // nil for a stdio server
	program *Program    // a stdio server's program
	stdout  *lineBound  // and its output
	session *mcp.ClientSession
	endLife context.CancelFunc
	scrub   scrubber // hides the URL's secrets in what the server's failures say
}

// close closes the session (a DELETE for a streamable session, the end of
// the stream for SSE), once the server has been told about every call
// cancelled on it, then the connections left idle.
func (s *server) close() error {
	var err error
	if s.session != nil {
		if s.http != nil {
			s.http.headers.cancels.wait()
		}
		err = s.session.Close()
	}
	s.endLife()
	if s.http != nil {
		s.http.close()
	}
	if err != nil {
		err = fmt.Errorf("closing MCP server %q: %s", s.spec.Name, s.scrub.message(err.Error()))
	}
	return errors.Join(err, s.closeProgram())
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

	p := &Pool{byName: make(map[string]toolRef), maxOutput: o.MaxOutputBytes, callTimeout: o.CallTimeout}
	p.calls, p.cancelCalls = context.WithCancel(context.Background())
	taken := make(map[string]bool)
	for i, oc := range outcomes {
		p.notices = append(p.notices, oc.notices...)
		if oc.srv == nil {
			p.unreachable = append(p.unreachable, Unreachable{Server: specs[i].Name, Required: specs[i].Required,
				Reason: strings.Join(oc.notices, " ")})
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
// having released everything it opened, and the notice saying why. No
// notice shows the URL's path, query or user info.
func connectServer(ctx context.Context, spec ServerSpec, o *Options) (*server, []*mcp.Tool, []string) {
	connect, scrub := connectOne, newScrubber(spec.URL)
	if spec.Transport == TransportStdio {
		connect, scrub = connectStdio, envScrubber(spec.Env)
	}
	srv, tools, notices := connect(ctx, spec, o, scrub)
	for i, n := range notices {
		notices[i] = scrub.message(n)
	}
	return srv, tools, notices
}

func connectOne(ctx context.Context, spec ServerSpec, o *Options, scrub scrubber) (*server, []*mcp.Tool, []string) {
	u, err := url.Parse(spec.URL)
	if err != nil { // Normalize produced it; only a hand-made spec gets here
		return nil, nil, []string{unavailable(spec.Name, "its URL does not parse")}
	}
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	srv := &server{spec: spec, http: newServerHTTP(life, spec, u, o), endLife: endLife, scrub: scrub}
	cctx, cancel := context.WithTimeout(withExchange(ctx), o.ConnectTimeout)
	defer cancel()

	if err := srv.http.dialer.preflight(cctx, u); err != nil {
		_ = srv.close()
		var ge *GuardError
		if errors.As(err, &ge) {
			return nil, nil, []string{unavailable(spec.Name, ge.Reason)}
		}
		return nil, nil, []string{unavailable(spec.Name, err.Error())}
	}
	if reason := srv.open(cctx, life, o); reason != "" {
		_ = srv.close()
		return nil, nil, []string{unavailable(spec.Name, reason)}
	}
	// What went wrong on the way in (a refused server/discover, say) says
	// nothing about what happens next.
	srv.http.headers.resetStatus()
	tools, notices, err := listTools(cctx, srv.session, spec, o.MaxTools)
	if err != nil {
		reason := srv.failure(cctx, err, "tools/list", "listing its tools failed: ")
		if errors.Is(err, errTooManyTools) {
			reason = srv.http.headers.limits.tooManyTools()
		}
		_ = srv.close()
		return nil, nil, []string{unavailable(spec.Name, reason)}
	}
	return srv, tools, notices
}

// open initializes the session: streamable HTTP, falling back to SSE when
// the answer says the server needs it, or SSE directly. It returns why it
// failed, or "".
func (s *server) open(ctx, life context.Context, o *Options) string {
	client := mcp.NewClient(&mcp.Implementation{Name: "runnel", Version: o.Version}, &mcp.ClientOptions{
		Logger: s.logger(o.Logger),
		// runnel answers no roots, sampling or elicitation requests.
		Capabilities: &mcp.ClientCapabilities{},
	})
	// The transports' own cap on an event is a second line behind the
	// bounds the round tripper applies; without it the streamable
	// transport of SDK v1.8.0 has none (its 0 means no cap, not the
	// default its documentation names).
	eventCap := int(2 * min(o.MaxMessageBytes, 1<<40))
	sse := &lifetimeTransport{
		inner: &mcp.SSEClientTransport{Endpoint: s.spec.URL, HTTPClient: s.http.client, MaxEventSize: eventCap},
		life:  life,
		end:   s.endLife,
	}
	var err error
	if s.spec.Transport == TransportSSE {
		if s.session, err = client.Connect(ctx, sse, nil); err != nil {
			return s.failure(ctx, err, "initialize", "")
		}
		return ""
	}
	streamable := &mcp.StreamableClientTransport{
		Endpoint:   s.spec.URL,
		HTTPClient: s.http.client,
		// runnel only makes requests; a standing GET stream for
		// server-initiated messages would be a connection held for nothing.
		DisableStandaloneSSE: true,
		MaxEventSize:         eventCap,
	}
	s.session, err = client.Connect(ctx, streamable, nil)
	if err == nil {
		return ""
	}
	status := s.http.headers.lastStatus()
	if !needsSSE(status) || ctx.Err() != nil {
		return s.failure(ctx, err, "initialize", "")
	}
	s.http.headers.resetStatus()
	if s.session, err = client.Connect(ctx, sse, nil); err != nil {
		return fmt.Sprintf("streamable HTTP answered HTTP %d and the SSE transport failed too: %s", status, s.failure(ctx, err, "initialize", ""))
	}
	return ""
}

func unavailable(name, reason string) string {
	return fmt.Sprintf("MCP server %q is unavailable for this run: %s.", name, strings.TrimSuffix(reason, "."))
}

// failure turns the error of a request made while connecting (method
// names it) into a reason a person can act on. The SDK folds transport
// errors into its own strings, so the exchange's, the dialer's and the
// round tripper's own records come first; the SDK's text is the last
// resort, scrubbed of the URL's secrets.
func (s *server) failure(ctx context.Context, err error, method, prefix string) string {
	lim := s.http.headers.limits
	switch exchangeOf(ctx).breach() {
	case codeMessageTooLarge:
		return fmt.Sprintf("its answer to %s is %s", method, lim.tooLarge())
	case codeStreamTooLong:
		return fmt.Sprintf("while runnel waited for its answer to %s, it %s", method, lim.tooLong())
	case codeTooManyTools:
		return lim.tooManyTools()
	}
	var ge *GuardError
	if errors.As(s.http.dialer.lastDialError(), &ge) || errors.As(err, &ge) {
		return ge.Reason
	}
	if derr := s.http.dialer.lastDialError(); derr != nil {
		return prefix + s.scrub.message(derr.Error())
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
	return prefix + s.scrub.message(err.Error())
}

// logger is the SDK's logger for this server: l, scrubbed of the URL's
// secrets.
func (s *server) logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(&scrubHandler{next: l.Handler(), scrub: s.scrub})
}

// errTooManyTools is a tool list longer than Options.MaxTools.
var errTooManyTools = errors.New("the MCP server lists too many tools")

// listTools lists every tool, page by page, and applies the include list.
// A name the list asks for that the server lacks is a notice, not a
// failure: the run goes on with the tools that exist.
//
// A server listing more than maxTools tools fails with errTooManyTools,
// and is left out whole rather than offered in part: a list's order means
// nothing, so its first maxTools would be an arbitrary part of what the
// user connected (another part after the server's next release), and a
// model offered hundreds of tools from one server chooses badly anyway.
// Every entry counts, duplicates included, and so does an empty page that
// names another, so a list that pages forever ends here too. The bound
// applies before the include list, which needs the whole list to be read.
// Each page is one message, bounded by Options.MaxMessageBytes.
func listTools(ctx context.Context, cs *mcp.ClientSession, spec ServerSpec, maxTools int) ([]*mcp.Tool, []string, error) {
	var tools []*mcp.Tool
	var notices []string
	seen := make(map[string]bool)
	listed := 0
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, nil, err
		}
		listed += len(res.Tools)
		if len(res.Tools) == 0 && res.NextCursor != "" {
			listed++
		}
		if listed > maxTools {
			return nil, nil, errTooManyTools
		}
		for _, t := range res.Tools {
			if !seen[t.Name] {
				seen[t.Name] = true
				tools = append(tools, t)
			}
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
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

// Unreachable is a server Connect left out.
type Unreachable struct {
	Server   string
	Required bool
	// Reason is the notice that says why, without the URL's secrets.
	Reason string
}

// Unreachable lists the servers Connect left out, in request order.
func (p *Pool) Unreachable() []Unreachable { return p.unreachable }

// Notices returns a sentence for each thing the run should report: a
// server left out and why, an included tool the server lacks. Header
// values never appear in them, nor the URL's path, query or user info.
func (p *Pool) Notices() []string {
	out := make([]string, len(p.notices))
	copy(out, p.notices)
	return out
}

// ErrClosed is returned by Call after Close.
var ErrClosed = errors.New("the MCP connections of this run are closed")

// callTimedOut is the cause of a call cancelled by the call timeout.
type callTimedOut struct{ after time.Duration }

func (c callTimedOut) Error() string { return fmt.Sprintf("no answer within %s", c.after) }

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

	ctx, cancel := context.WithTimeoutCause(withExchange(ctx), p.callTimeout, callTimedOut{p.callTimeout})
	defer cancel()
	stop := context.AfterFunc(p.calls, cancel)
	defer stop()

	res, err := ref.server.session.CallTool(ctx, &mcp.CallToolParams{Name: ref.name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, mcp.ErrConnectionClosed) && ref.server.http != nil {
			// The SDK sends notifications/cancelled for this call from a
			// goroutine of its own; Close must not overtake it.
			ref.server.http.headers.cancels.owe()
		}
		return Result{}, ref.server.callError(ctx, ref.name, err)
	}
	out := resultOf(res, p.maxOutput)
	out.Content = ref.server.scrub.content(out.Content)
	return out, nil
}

// callError says why a call produced no result, without the URL's
// secrets: a bound that cut the answer short, the end of the call's
// context, the end of the SSE session, the server's JSON-RPC error, or
// whatever the SDK says.
func (s *server) callError(ctx context.Context, tool string, err error) error {
	var lim limits
	if s.http != nil {
		lim = s.http.headers.limits
	}
	switch exchangeOf(ctx).breach() {
	case codeMessageTooLarge:
		return fmt.Errorf("MCP server %q: the answer to %q is %s; ask the tool for less", s.spec.Name, tool, lim.tooLarge())
	case codeStreamTooLong:
		return fmt.Errorf("MCP server %q: while runnel waited for the answer to %q, the server %s", s.spec.Name, tool, lim.tooLong())
	}
	var timedOut callTimedOut
	if errors.As(context.Cause(ctx), &timedOut) {
		return fmt.Errorf("MCP server %q: the call to %q got no answer within %s; the server was asked to cancel it", s.spec.Name, tool, timedOut.after)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("MCP server %q: call to %q ended: %w", s.spec.Name, tool, context.Cause(ctx))
	}
	if s.http == nil {
		if s.stdout.over.Load() || programGone(err) {
			return fmt.Errorf("MCP server %q: call to %q failed: %s", s.spec.Name, tool, s.stdioFailure("the call", err))
		}
	} else if reason := s.http.headers.endedReason(); reason != "" {
		return fmt.Errorf("MCP server %q: call to %q failed: %s", s.spec.Name, tool, reason)
	}
	if errors.Is(err, errRejected) {
		// Not the server's answer: the SDK's code for a request whose
		// HTTP exchange failed (the connection refused or cut under it).
		return fmt.Errorf("MCP server %q: call to %q failed: the request got no answer (%s)", s.spec.Name, tool, s.scrub.message(exchangeFailure(err)))
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return fmt.Errorf("MCP server %q answered the call to %q with an error: %s (code %d)", s.spec.Name, tool, s.scrub.message(rpcErr.Message), rpcErr.Code)
	}
	return fmt.Errorf("MCP server %q: call to %q failed: %s", s.spec.Name, tool, s.scrub.message(err.Error()))
}

// errRejected matches the error the SDK gives a request that its
// transport could not deliver or get an answer to (its internal
// jsonrpc2.ErrRejected, code -32005): a *jsonrpc.Error, but not one the
// server sent. jsonrpc.Error's Is compares codes.
var errRejected = &jsonrpc.Error{Code: -32005}

// exchangeFailure is what failed under a rejected request: the HTTP
// client's error without the URL it names, or the whole error.
func exchangeFailure(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
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
