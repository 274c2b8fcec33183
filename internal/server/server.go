// Package server is runnel's HTTP front door (DESIGN §2, §3.3, §3.5, §8):
// routes, token authentication, request decoding with limits, the one-shot
// JSON and NDJSON answers, and the one place that maps errors to HTTP
// statuses. It knows nothing about providers or harnesses: it hands a
// decoded runnel.RunRequest to a Runner and encodes what comes back.
//
//	srv := server.New(run.NewManager(nil), &server.Options{Token: token})
//	ln, err := net.Listen("tcp", "127.0.0.1:8765")
//	…
//	err = srv.Serve(ctx, ln) // returns once ctx is done and in-flight runs have drained
//
// A Server is also a plain http.Handler, which is how tests mount it on an
// httptest.Server.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel"
)

// Runner runs one request. A non-nil error means the request was refused
// before anything was emitted (a *runnel.Error whose code says why);
// otherwise the result says how the run ended. internal/run.Manager is the
// real implementation.
type Runner interface {
	Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error)
}

// Defaults of the Options fields.
const (
	DefaultMaxBodyBytes     = 8 << 20
	DefaultConcurrencyLimit = 64
	DefaultKeepAlive        = 15 * time.Second
	DefaultBodyTimeout      = time.Minute
	DefaultShutdownGrace    = 30 * time.Second
	DefaultWriteTimeout     = 30 * time.Second
)

// Protocol is the version of the /run wire contract reported by /health.
const Protocol = 1

// Options configures a Server. A zero field means the documented default.
type Options struct {
	// Token, when set, is required on every route but /health. Empty means
	// no authentication (cmd/runnel allows that on loopback only).
	Token string
	// MaxBodyBytes caps a request body (default 8 MiB).
	MaxBodyBytes int64
	// ConcurrencyLimit caps concurrent runs; past it a run is answered 429
	// (default 64).
	ConcurrencyLimit int
	// KeepAlive is the silence after which an NDJSON stream gets a blank
	// line so proxies do not cut it (default 15s).
	KeepAlive time.Duration
	// BodyTimeout caps reading a request body, so a slow client cannot hold
	// a run slot forever (default 1m).
	BodyTimeout time.Duration
	// ShutdownGrace is how long Serve lets in-flight runs finish after its
	// context is done before cancelling them (default 30s).
	ShutdownGrace time.Duration
	// ShutdownDelay is how long Serve goes on accepting after its context
	// is done, before the drain (default 0): /health answers 503
	// "draining" meanwhile, so a balancer's checks take the replica out
	// while it still serves what the balancer sends, and every answer
	// closes its connection. Closing a kept-alive connection at the very
	// moment the balancer sends a run on it fails that run (the request is
	// not idempotent, so nobody may resend it); after the delay no
	// balancer is sending any more.
	ShutdownDelay time.Duration
	// WriteTimeout bounds every write of an answer (default 30s): a client
	// that stops reading is treated as gone, and its run is cancelled.
	WriteTimeout time.Duration
	// Version is the runner version reported by /health and /v1/capabilities.
	Version string
	// Harnesses and Features are reported by /health and /v1/capabilities.
	Harnesses []string
	Features  []string
	// Capabilities, when set, is the body of /v1/capabilities; its empty
	// fields are filled from the options above.
	Capabilities *Capabilities
	// Logger receives access and error logs; nil discards them.
	Logger *slog.Logger
	// Profiles are the server-side run profiles a /v1/chat request may
	// name (GET /v1/profiles lists them); at most one is the default.
	Profiles []Profile
	// Playground, when set, serves GET /playground/… (and / redirects
	// there): runnel serve --playground.
	Playground http.Handler
	// Metrics serves GET /metrics behind the token (a separate listener,
	// RUNNEL_METRICS_ADDR, serves it without one); nil answers 404.
	Metrics http.Handler
	// Refused counts a request refused (by error code); nil counts none.
	Refused func(code string)
}

// Capabilities is the body of GET /v1/capabilities.
type Capabilities struct {
	Runner    string       `json:"runner"`
	Protocol  int          `json:"protocol"`
	Harnesses []string     `json:"harnesses"`
	Features  []string     `json:"features"`
	Limits    Limits       `json:"limits"`
	Sandbox   *SandboxInfo `json:"sandbox,omitempty"`
	// Agents are the ACP agents this runnel knows, installed or not.
	Agents []AgentInfo `json:"agents,omitempty"`
}

// AgentInfo is one ACP agent as /v1/capabilities reports it.
type AgentInfo struct {
	Harness   string   `json:"harness"`
	Aliases   []string `json:"aliases,omitempty"`
	Package   string   `json:"package"`
	Pinned    string   `json:"pinned"`
	Installed bool     `json:"installed"`
	Version   string   `json:"version,omitempty"`
	// Problem says why an agent cannot run, and what to do.
	Problem string `json:"problem,omitempty"`
}

// SandboxInfo says what this host's sandboxes guarantee, so an operator
// can tell before trusting it with a tenant.
type SandboxInfo struct {
	Backends []string `json:"backends"`
	// Isolated says what the isolated sandbox is built on here (bwrap,
	// landlock ABI), or why this host has none.
	Isolated string `json:"isolated"`
	// ProcessContainment is how the processes a command starts are ended
	// (cgroup, subreaper, process-group) and Guarantee what that means.
	ProcessContainment string `json:"processContainment"`
	Guarantee          string `json:"guarantee"`
	// LocalSeparation says whether a local run's processes can reach
	// runnel's memory, and with it other runs' credentials.
	LocalSeparation string `json:"localSeparation"`
	// IsolatedLimits are the bounds of each isolated command or agent
	// ("processes", "memoryBytes", "cpuSeconds") and how this host
	// enforces each; absent without the isolated sandbox.
	IsolatedLimits map[string]LimitInfo `json:"isolatedLimits,omitempty"`
	// IsolatedPolicies are the sandboxPermission values the isolated
	// sandbox enforces here, by field ("filesystem", "network");
	// absent without it (local enforces only "on", and refuses others).
	IsolatedPolicies map[string][]string `json:"isolatedPolicies,omitempty"`
	// Default is the sandbox a request without one gets; LocalAllowed
	// whether one that asks for "local" gets it (else it runs isolated).
	Default      string `json:"default"`
	LocalAllowed bool   `json:"localAllowed"`
}

// LimitInfo is one bound of the isolated sandbox: its value (0: none)
// and what enforces it here ("cgroup v2", "cgroup v1", "rlimit"), or
// "not enforced on this host".
type LimitInfo struct {
	Limit      int64  `json:"limit"`
	EnforcedBy string `json:"enforcedBy"`
}

// Limits are the server's limits as /v1/capabilities reports them. The run
// limits are what a request's own limits may tighten, never loosen.
type Limits struct {
	MaxBodyBytes        int64 `json:"maxBodyBytes"`
	ConcurrencyLimit    int   `json:"concurrencyLimit"`
	MaxSteps            int   `json:"maxSteps,omitempty"`
	RunTimeoutMs        int64 `json:"runTimeoutMs,omitempty"`
	IdleTimeoutMs       int64 `json:"idleTimeoutMs,omitempty"`
	FirstTokenTimeoutMs int64 `json:"firstTokenTimeoutMs,omitempty"`
	ToolTimeoutMs       int64 `json:"toolTimeoutMs,omitempty"`
}

// Server is runnel's HTTP handler. It is safe for concurrent use.
type Server struct {
	runner    Runner
	opts      Options
	log       *slog.Logger
	tokenHash [sha256.Size]byte
	slots     chan struct{} // one token per running run
	readers   chan struct{} // one token per request body being read
	mux       *http.ServeMux
	inflight  tracker
	live      liveRuns
	// draining is set for ShutdownDelay after Serve's context ended.
	draining atomic.Bool
}

// New returns a Server that runs requests on runner; opts may be nil.
func New(runner Runner, opts *Options) *Server {
	if runner == nil {
		panic("server.New: nil Runner")
	}
	s := &Server{runner: runner}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.ConcurrencyLimit <= 0 {
		o.ConcurrencyLimit = DefaultConcurrencyLimit
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	s.log = o.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	// Comparing hashes keeps the comparison constant-time whatever the
	// length of the presented token.
	s.tokenHash = sha256.Sum256([]byte(o.Token))
	s.slots = make(chan struct{}, o.ConcurrencyLimit)
	s.readers = make(chan struct{}, 2*o.ConcurrencyLimit)
	s.mux = http.NewServeMux()
	s.route(http.MethodGet, "/health", http.HandlerFunc(s.health))
	s.route(http.MethodGet, "/v1/capabilities", s.authed(http.HandlerFunc(s.capabilities)))
	s.route(http.MethodPost, "/run", s.authed(http.HandlerFunc(s.handleRun)))
	s.route(http.MethodPost, "/stream", s.authed(http.HandlerFunc(s.handleRun)))
	s.route(http.MethodPost, "/kill", s.authed(http.HandlerFunc(s.kill)))
	s.route(http.MethodPost, "/v1/chat", s.authed(http.HandlerFunc(s.handleChat)))
	s.route(http.MethodGet, "/v1/profiles", s.authed(http.HandlerFunc(s.handleProfiles)))
	s.route(http.MethodGet, "/subscription-status", s.authed(http.HandlerFunc(s.subscriptionStatus)))
	s.route(http.MethodGet, "/openapi.json", http.HandlerFunc(s.openAPI))
	metrics := o.Metrics
	if metrics == nil {
		metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.writeError(w, r, &runnel.Error{Code: codeNotFound, Message: "this runnel keeps no metrics"})
		})
	}
	s.route(http.MethodGet, "/metrics", s.authed(metrics))
	if o.Playground != nil {
		s.mux.Handle("GET /playground/", s.loopbackOnly(o.Playground))
		s.mux.Handle("GET /{$}", http.RedirectHandler("/playground/", http.StatusFound))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &runnel.Error{Code: codeNotFound,
			Message: "no route " + r.URL.Path + "; runnel serves POST /run, POST /stream, POST /kill, GET /health, GET /v1/capabilities, GET /subscription-status and GET /openapi.json"})
	})
	return s
}

// route registers h for method and path, and a JSON 405 for every other
// method on path (ServeMux's own 405 is plain text).
func (s *Server) route(method, path string, h http.Handler) {
	s.mux.Handle(method+" "+path, h)
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		s.writeError(w, r, &runnel.Error{Code: codeMethodNotAllowed,
			Message: r.Method + " is not allowed on " + path + "; use " + method})
	})
}

// ServeHTTP gives each request an id (echoed as X-Request-Id), counts it
// in flight for Serve's drain, routes it and logs it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.inflight.add()
	defer s.inflight.done()
	if s.draining.Load() {
		// net/http closes the connection after this answer: the client
		// opens its next one elsewhere rather than race the close.
		w.Header().Set("Connection", "close")
	}
	start := time.Now()
	id := requestID(r.Header.Get("X-Request-Id"))
	w.Header().Set("X-Request-Id", id)
	r = r.WithContext(runnel.WithRequestID(r.Context(), id))
	rec := &statusRecorder{ResponseWriter: w}
	s.mux.ServeHTTP(rec, r)
	level := slog.LevelInfo
	if r.URL.Path == "/health" {
		level = slog.LevelDebug // probes would drown everything else
	}
	s.log.LogAttrs(r.Context(), level, "request", slog.String("requestId", id),
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", rec.status()), slog.Duration("duration", time.Since(start)))
}

// requestID returns the caller's id when it is a sane token, or a new one.
func requestID(given string) string {
	if len(given) > 0 && len(given) <= 64 && strings.Trim(given,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") == "" {
		return given
	}
	return NewRequestID()
}

// NewRequestID returns a random id for correlating a caller's error with
// the server's log line.
func NewRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func requestIDOf(r *http.Request) string {
	return runnel.RequestID(r.Context())
}

// statusRecorder remembers the status for the access log. Unwrap lets
// http.ResponseController reach the real writer's Flush and deadlines.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (rec *statusRecorder) WriteHeader(code int) {
	if rec.code == 0 {
		rec.code = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *statusRecorder) Write(b []byte) (int, error) {
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return rec.ResponseWriter.Write(b)
}

func (rec *statusRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

func (rec *statusRecorder) status() int {
	if rec.code == 0 {
		return http.StatusOK
	}
	return rec.code
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	var sandboxes []string
	if c := s.opts.Capabilities; c != nil && c.Sandbox != nil {
		sandboxes = c.Sandbox.Backends
	}
	status, code := "ok", http.StatusOK
	if s.draining.Load() {
		status, code = "draining", http.StatusServiceUnavailable
	}
	s.writeJSON(w, r, code, struct {
		Status    string   `json:"status"`
		Runner    string   `json:"runner"`
		Protocol  int      `json:"protocol"`
		Harnesses []string `json:"harnesses"`
		Features  []string `json:"features"`
		// Sandboxes are the sandbox backends this host can enforce.
		Sandboxes []string `json:"sandboxes,omitempty"`
	}{status, s.opts.Version, Protocol, orEmpty(s.opts.Harnesses), orEmpty(s.opts.Features), sandboxes})
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	var c Capabilities
	if s.opts.Capabilities != nil {
		c = *s.opts.Capabilities
	}
	if c.Runner == "" {
		c.Runner = s.opts.Version
	}
	if c.Protocol == 0 {
		c.Protocol = Protocol
	}
	if c.Harnesses == nil {
		c.Harnesses = orEmpty(s.opts.Harnesses)
	}
	if c.Features == nil {
		c.Features = orEmpty(s.opts.Features)
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = s.opts.MaxBodyBytes
	}
	if c.Limits.ConcurrencyLimit == 0 {
		c.Limits.ConcurrencyLimit = s.opts.ConcurrencyLimit
	}
	s.writeJSON(w, r, http.StatusOK, c)
}

// subscriptionStatus serves GET /subscription-status, which Agenta asks a
// runner for the harness logins it holds; without an answer it shows the
// runner as incompatible. This build holds none.
func (s *Server) subscriptionStatus(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, struct {
		Version   int               `json:"version"`
		Harnesses map[string]string `json:"harnesses"`
	}{1, map[string]string{}})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a Runner bug (an event that cannot be encoded) gets here.
		s.log.ErrorContext(r.Context(), "internal error: encoding the answer",
			slog.String("requestId", requestIDOf(r)), slog.Any("err", err))
		var res *runnel.Result
		status, res = ErrorResponse(err, requestIDOf(r))
		body, _ = json.Marshal(res) // a plain error result always encodes
	}
	w.Header().Set("Content-Type", "application/json")
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout)) // a client that never reads must not hold the handler
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	if err == nil {
		err = rc.Flush()
	}
	// The deadline stays on the connection: lift it for the next request
	// on it, but only once everything is out.
	if err == nil || errors.Is(err, http.ErrNotSupported) {
		_ = rc.SetWriteDeadline(time.Time{})
	}
}
