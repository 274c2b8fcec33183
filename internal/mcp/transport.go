package mcp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverHTTP is the HTTP side of one server's connection: its own
// http.Transport (so closing the server closes its connections and their
// goroutines), the guarded dialer, and the round tripper that adds the
// headers and bounds what is read.
type serverHTTP struct {
	dialer    *guardedDialer
	transport *http.Transport
	headers   *headerTransport
	client    *http.Client
}

// newServerHTTP builds the HTTP side of a server. Every request is
// aborted when life ends, so nothing the SDK still has in flight (a
// best-effort cancel notification to a server that does not answer, say)
// outlives the server's close.
func newServerHTTP(life context.Context, spec ServerSpec, u *url.URL, opts *Options) *serverHTTP {
	d := &guardedDialer{server: spec.Name, shown: displayURL(u), opts: opts.Guard}
	tr := &http.Transport{
		// No proxy: the guard judges the address runnel connects to, and a
		// proxy would make that the proxy's address instead.
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSClientConfig:       opts.TLSConfig.Clone(),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		// Headers are read before any body bound applies.
		MaxResponseHeaderBytes: 64 << 10,
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	h := &headerTransport{
		base:      tr,
		headers:   spec.Headers,
		origin:    u,
		dialer:    d,
		limits:    limits{message: opts.MaxMessageBytes, stream: opts.MaxStreamBytes, tools: opts.MaxTools},
		life:      life,
		cancels:   newCancelNotices(),
		propagate: opts.Propagate,
	}
	return &serverHTTP{
		dialer:    d,
		transport: tr,
		headers:   h,
		client:    &http.Client{Transport: h, CheckRedirect: d.checkRedirect},
	}
}

// close drops the connections the transport keeps alive. Called after
// the session is closed, when no request is in flight any more.
func (s *serverHTTP) close() { s.transport.CloseIdleConnections() }

// headerTransport is every request's way to the server. It keeps requests
// on the server's origin, adds the server's configured headers, bounds
// every response body it hands the SDK (limits.go), and remembers the
// status of the last answer (DELETEs aside), which decides the fallback to
// SSE and names a failure.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	origin  *url.URL
	dialer  *guardedDialer // refuses and records a request to another origin
	limits  limits
	life    context.Context
	cancels *cancelNotices
	pending pendingRequests // requests waiting on an SSE session stream
	// propagate writes the trace context (Options.Propagate), or is nil.
	propagate func(context.Context, http.Header)

	mu      sync.Mutex
	status  int
	session bool   // an SSE session stream is open
	ended   string // why the SSE session stream was cut, when it was
}

// RoundTrip implements http.RoundTripper. The SDK's own headers
// (Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version) win over
// configured ones of the same name, which would break the protocol.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.checkOrigin(req.URL); err != nil {
		return nil, err
	}
	if reason := t.endedReason(); reason != "" {
		return nil, errors.New(reason)
	}
	ctx := req.Context()
	if _, ok := ctx.Value(exchangeKey{}).(*exchange); !ok {
		ctx = withExchange(ctx) // a request of the SDK's own, such as the closing DELETE
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.life, cancel)
	release := func() { stop(); cancel() }
	req = req.Clone(ctx)
	for name, value := range t.headers {
		if req.Header.Get(name) == "" {
			req.Header.Set(name, value)
		}
	}
	if t.propagate != nil {
		t.propagate(ctx, req.Header)
	}
	id, method := peekRequest(req)
	if id != nil {
		ex := exchangeOf(ctx)
		ex.begin(id, method, t.limits.stream)
		if t.sessionOpen() {
			t.pending.add(id, ex)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if method == "notifications/cancelled" {
		t.cancels.sent()
	}
	if err != nil {
		release()
		return nil, err
	}
	if req.Method != http.MethodDelete {
		t.mu.Lock()
		t.status = resp.StatusCode
		t.mu.Unlock()
	}
	resp.Body = &releasingBody{ReadCloser: t.bound(req, resp, id), release: release}
	return resp, nil
}

// bound wraps a response body in the reader that bounds it: the SSE
// session stream, an answer's event stream, a JSON answer, or anything
// else (an error page, an empty 202).
func (t *headerTransport) bound(req *http.Request, resp *http.Response, id json.RawMessage) io.ReadCloser {
	ex := exchangeOf(req.Context())
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		if req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") == "" {
			t.mu.Lock()
			t.session = true
			t.mu.Unlock()
			return newSessionStream(t, resp.Body, t.limits)
		}
		return newCallStream(resp.Body, ex, t.limits)
	case "application/json":
		if id != nil {
			return &jsonBody{body: resp.Body, ex: ex, lim: t.limits}
		}
	}
	return &cappedBody{ReadCloser: resp.Body, left: t.limits.message}
}

func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// checkOrigin keeps every request on the origin of the server's URL: the
// SSE transport POSTs to whatever its endpoint event names, and the
// server's headers (its credentials) go with every request.
func (t *headerTransport) checkOrigin(to *url.URL) error {
	if sameOrigin(t.origin, to) {
		return nil
	}
	err := t.dialer.refuse("named %s as its message endpoint, another origin; runnel sends requests, with their headers, only to the scheme, host and port of the server's URL", displayURL(to))
	t.dialer.record(err)
	return err
}

func (t *headerTransport) sessionOpen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.session
}

// end records why the session stream was cut; later requests are refused
// with it.
func (t *headerTransport) end(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = reason
}

func (t *headerTransport) endedReason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// peekRequest returns the JSON-RPC id (nil for a notification) and method
// of a POSTed message. The SDK sends its messages from memory, so GetBody
// is a copy and costs no network read.
func peekRequest(req *http.Request) (id json.RawMessage, method string) {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return nil, ""
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, ""
	}
	defer body.Close()
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(body).Decode(&msg) != nil || string(msg.ID) == "null" {
		return nil, msg.Method
	}
	return msg.ID, msg.Method
}

// releasingBody drops a request's tie to the server's lifetime once the
// response body is closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

func (t *headerTransport) lastStatus() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

func (t *headerTransport) resetStatus() {
	t.mu.Lock()
	t.status = 0
	t.mu.Unlock()
}

// cancelNotices counts the notifications/cancelled the SDK owes a server.
// When a call's context ends, the SDK retires the call at once and sends
// the notification from a goroutine of its own; closing the session before
// that goroutine sends it would drop it, and the server would keep running
// the tool (a streamable server's DELETE even waits for it). So Close waits
// until every owed notice has gone out, for at most cancelNoticeWait.
type cancelNotices struct {
	mu      sync.Mutex
	owed    int // may dip below zero: the notice can go out before Call counts it
	changed chan struct{}
}

// cancelNoticeWait bounds the wait for owed notices: the SDK gives up
// sending one after 5 s (notifyCancellationTimeout).
const cancelNoticeWait = 6 * time.Second

func newCancelNotices() *cancelNotices { return &cancelNotices{changed: make(chan struct{})} }

func (c *cancelNotices) owe()  { c.add(+1) }
func (c *cancelNotices) sent() { c.add(-1) }

func (c *cancelNotices) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owed += d
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait returns when no notice is owed any more, or when cancelNoticeWait
// has passed.
func (c *cancelNotices) wait() {
	timer := time.NewTimer(cancelNoticeWait)
	defer timer.Stop()
	for {
		c.mu.Lock()
		owed, changed := c.owed, c.changed
		c.mu.Unlock()
		if owed <= 0 {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

// needsSSE reports whether a failed streamable-HTTP initialize looks like
// a server that only speaks the older SSE transport: the spec's backwards
// compatibility rule is "a 4xx answer to the initialize POST". Answers
// about credentials or load are the real failure and are reported instead.
func needsSSE(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// lifetimeTransport connects an SSE transport whose stream must outlive
// the connect timeout: the SDK ties the hanging GET to the context given
// to Connect, so the GET gets the server's lifetime context instead, and
// the connect context only bounds the wait for the stream to open.
type lifetimeTransport struct {
	inner mcp.Transport
	life  context.Context
	end   context.CancelFunc // ends life; the server is unusable after it
}

// Connect implements mcp.Transport.
func (t *lifetimeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stop := context.AfterFunc(ctx, t.end)
	conn, err := t.inner.Connect(t.life)
	if !stop() {
		// The connect context ended first and took the lifetime with it.
		if err == nil {
			_ = conn.Close()
		}
		return nil, context.Cause(ctx)
	}
	return conn, err
}
