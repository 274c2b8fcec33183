package mcp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverHTTP is the HTTP side of one server's connection: its own
// http.Transport (so closing the server closes its connections and their
// goroutines), the guarded dialer, and the header-adding round tripper.
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
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	h := &headerTransport{base: tr, headers: spec.Headers, life: life, cancels: newCancelNotices()}
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

// headerTransport adds the server's configured headers to every request
// and remembers the status of the last answer (DELETEs aside), which
// decides the fallback to SSE and names a failure.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	life    context.Context
	cancels *cancelNotices

	mu     sync.Mutex
	status int
}

// RoundTrip implements http.RoundTripper. The SDK's own headers
// (Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version) win over
// configured ones of the same name, which would break the protocol.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.life, cancel)
	release := func() { stop(); cancel() }
	req = req.Clone(ctx)
	for name, value := range t.headers {
		if req.Header.Get(name) == "" {
			req.Header.Set(name, value)
		}
	}
	cancelNotice := isCancelNotification(req)
	resp, err := t.base.RoundTrip(req)
	if cancelNotice {
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
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
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

// isCancelNotification reports whether req carries notifications/cancelled.
// Only small POSTs are looked at: the notification is a few hundred bytes,
// and tool arguments need not be copied to find that out.
func isCancelNotification(req *http.Request) bool {
	if req.Method != http.MethodPost || req.GetBody == nil || req.ContentLength <= 0 || req.ContentLength > 4096 {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	var msg struct {
		Method string `json:"method"`
	}
	return json.NewDecoder(io.LimitReader(body, 4096)).Decode(&msg) == nil && msg.Method == "notifications/cancelled"
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
