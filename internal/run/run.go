// Package run turns a RunRequest into a validated plan and runs it on a
// harness: the one code path behind POST /run and `runnel run`.
//
// Everything a request asks for is checked before anything runs; a request
// that cannot run is refused with a *runnel.Error (code invalid_request)
// and no event. Once running, every event and the result pass through a
// redactor built from the request's secrets.
//
//	m := run.NewManager(&run.Options{MaxSteps: 20})
//	res, err := m.Run(ctx, req, sink)
//	if err != nil {
//		return err // refused: nothing ran
//	}
//	fmt.Println(res.Status, res.Output)
//
// A run's pieces, in the order Run puts them together:
//
//   - plan.go checks the request and reads the permission plan
//     (DESIGN §5.1; absent is allow_reads, malformed asks for everything,
//     dropped rules are notices).
//   - resume.go reads the replayed conversation (DESIGN §5.4): the calls a
//     paused turn left waiting, the answers that settle them (approvals,
//     browser outputs, kept in a permission.Store), the ones a newer user
//     message superseded, and, with Options.InteractionSecret, refuses an
//     approval that is not signed for a call runnel parked.
//   - workspace.go opens the run's workspace when it needs one, writes the
//     request's skills, harnessFiles and agentsMd into it, and builds the
//     granted builtins there; it is removed when the run ends.
//   - dispatch.go is the native loop's Dispatcher: the permission gate
//     every call passes (runnel's relay for callback and direct tools, the
//     harness for builtins, the browser for client tools). It runs a call,
//     answers it (a denial, a stored output), or pauses the turn with a
//     signed interaction (DESIGN §5.3).
//
// A paused run is a result (ok, status paused, every interaction listed),
// never an error. The next request carries the answers in its messages,
// so any Manager, on any replica, resumes it: a Manager keeps no state
// between runs. docs/pause-resume.md is the contract for platforms.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/codemode"
	"github.com/runnel/runnel/internal/harness/acp"
	"github.com/runnel/runnel/internal/harness/native"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/telemetry"
	"github.com/runnel/runnel/internal/tools"
)

// The documented defaults of Options.
const (
	DefaultMaxSteps          = 50
	DefaultTotalTimeout      = 10 * time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultFirstTokenTimeout = 2 * time.Minute
	DefaultToolParallel      = 4
	DefaultInteractionTTL    = 24 * time.Hour
)

// Options configures a Manager. A zero field means the documented default.
type Options struct {
	// Logger receives run logs; nil discards them.
	Logger *slog.Logger
	// MaxSteps caps model steps per run (default 50). A request may lower it.
	MaxSteps int
	// TotalTimeout caps a whole run (default 10m). A request may lower it.
	TotalTimeout time.Duration
	// IdleTimeout caps silence from the model within a step (default 2m).
	// A request may lower it.
	IdleTimeout time.Duration
	// FirstTokenTimeout caps the wait for a step's first chunk (default 2m).
	FirstTokenTimeout time.Duration
	// MaxStepBytes and MaxRunBytes cap what a model may stream in one step
	// and in one run (defaults native.DefaultMaxStepBytes and
	// native.DefaultMaxRunBytes); past either the run fails.
	MaxStepBytes int64
	MaxRunBytes  int64
	// ToolTimeout is a callback tool's timeout when its spec sets none (default 30s).
	ToolTimeout time.Duration
	// ProviderAttempts is the total tries of a model call (default 3).
	ProviderAttempts int
	// HTTPClient is used for model APIs and tool callbacks; nil means a
	// default client without an overall timeout.
	HTTPClient *http.Client
	// NewModel builds a model adapter (default DefaultModelFactory). Tests
	// inject their own.
	NewModel ModelFactory
	// ToolParallel caps the tool calls of one model step that run at once
	// (default 4).
	ToolParallel int
	// ProviderBackoff is the first retry's wait of a model call (default:
	// the provider policy's, 500ms).
	ProviderBackoff time.Duration
	// InteractionSecret, when set, signs every interaction a run pauses
	// for (DESIGN §5.4), and a resume whose approval does not carry the
	// signature of a call runnel parked is refused. It must be the same on
	// every replica that may resume a turn. Empty means no signing.
	InteractionSecret []byte
	// InteractionTTL is how long a signed approval stays valid after the
	// interaction was issued (default 24h): runnel keeps no state, so the
	// same approval sent again within it runs its call again (docs/
	// pause-resume.md says what that means for a platform).
	InteractionTTL time.Duration
	// ProviderKeys are the operator's provider keys by environment-variable
	// name (ANTHROPIC_API_KEY=…), for requests whose modelConnection says
	// the host provides the credential (credentialMode
	// "runtime_provided"). They are never read from runnel's own
	// environment; main reads them from RUNNEL_PROVIDER_KEYS_FILE, and they
	// belong in ServerSecrets too.
	ProviderKeys map[string]string
	// ServerSecrets are the server's own secrets (its token, the
	// interaction secret): every run redacts them like its own, since a
	// run's tools could otherwise bring them into its events.
	ServerSecrets []string
	// Now is the clock interactions are signed and checked by (default
	// time.Now); tests set it.
	Now func() time.Time
	// WorkspaceRoot is where each run's workspace directory is created
	// (default: os.TempDir()/runnel-workspaces).
	WorkspaceRoot string
	// KeepWorkspace leaves each run's workspace on disk when the run ends,
	// for debugging; by default it is removed.
	KeepWorkspace bool
	// Builtins configures the builtin tools (bash timeouts and output
	// caps); nil means their defaults.
	Builtins *tools.BuiltinOptions
	// MCPGuard is the URL guard of user MCP servers: the hosts exempt from
	// it (RUNNEL_MCP_HOST_ALLOWLIST) and the resolver it checks names with.
	MCPGuard mcp.GuardOptions
	// MCPConnectTimeout bounds connecting to one MCP server and listing
	// its tools (default mcp.DefaultConnectTimeout).
	MCPConnectTimeout time.Duration
	// MCPCallTimeout bounds one MCP tool call (default
	// mcp.DefaultCallTimeout); a call past it is a tool error naming the
	// tool, and the model goes on.
	MCPCallTimeout time.Duration
	// AttachmentsURL is where attachment blocks that carry only an id are
	// fetched from: a URL with {id} and {sessionId} in it (for Agenta,
	// https://<api>/api/sessions/attachments/{id}/content?session_id={sessionId}).
	// The platform's credential for the run is sent as Authorization.
	// Empty: such attachments are reported, not fetched.
	AttachmentsURL string
	// MCPRequired makes every MCP server required (policy.required): one
	// that cannot be reached fails the run. For platforms that cannot say
	// so per server (Agenta); by default an unreachable server is a notice
	// and the model goes on without its tools.
	MCPRequired bool
	// Containment is how the processes a run's commands start are ended
	// (sandbox.ProbeContainment, once per process); nil kills their
	// process group only.
	Containment *sandbox.Containment
	// Isolator is the host's isolated sandbox (sandbox.ProbeIsolator);
	// nil or unsupported refuses sandbox "isolated".
	Isolator *sandbox.Isolator
	// AllowLocalSandbox lets a request that asks for sandbox "local" have
	// it when the host has the isolated sandbox; otherwise every run is
	// isolated there (a run without a sandbox is, either way).
	AllowLocalSandbox bool
	// SandboxLimits bound each isolated command or agent (processes,
	// memory, CPU time); a zero field is no bound.
	SandboxLimits sandbox.Limits
	// Agents are the ACP agents the manager may run (DESIGN §7); nil
	// means the native harness only.
	Agents *agents.Registry
	// ACPTimeouts bound an ACP agent's start, session and silence; zero
	// fields are acp's defaults.
	ACPTimeouts acp.Timeouts
	// Telemetry traces runs and counts them (internal/telemetry); nil is
	// one that exports nothing and that no one scrapes.
	Telemetry *telemetry.Telemetry
	// ScriptLimiter bounds, for the whole process, the code-mode scripts
	// still running after their run gave up on them (codemode.Limiter);
	// nil means no bound.
	ScriptLimiter *codemode.Limiter
	// ScriptWarm, for the whole process, builds code-mode sandboxes
	// before scripts ask for them and closes them after
	// (codemode.Warm); nil builds and closes each one on its script's
	// path.
	ScriptWarm *codemode.Warm
}

// Manager runs requests. It is safe for concurrent use; it holds no state
// between runs.
type Manager struct {
	opts Options
	log  *slog.Logger
	tel  *telemetry.Telemetry
}

// NewManager returns a Manager; opts may be nil.
func NewManager(opts *Options) *Manager {
	m := &Manager{}
	if opts != nil {
		m.opts = *opts
	}
	o := &m.opts
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.TotalTimeout <= 0 {
		o.TotalTimeout = DefaultTotalTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.FirstTokenTimeout <= 0 {
		o.FirstTokenTimeout = DefaultFirstTokenTimeout
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = tools.DefaultTimeout
	}
	if o.ToolParallel <= 0 {
		o.ToolParallel = DefaultToolParallel
	}
	if o.NewModel == nil {
		o.NewModel = DefaultModelFactory
	}
	if o.InteractionTTL <= 0 {
		o.InteractionTTL = DefaultInteractionTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m.log = o.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.tel = o.Telemetry
	if m.tel == nil {
		// Without an endpoint New cannot fail, and starts nothing.
		m.tel, _ = telemetry.New(telemetry.Options{Logger: m.log})
	}
	return m
}

// Harnesses lists the harness names this manager can run: native and
// every installed ACP agent.
func (m *Manager) Harnesses() []string {
	out := []string{"native"}
	if m.opts.Agents != nil {
		for _, st := range m.opts.Agents.List() {
			if st.Installed {
				out = append(out, st.Name)
				out = append(out, st.Aliases...)
			}
		}
	}
	return out
}

// errTotalTimeout is the cause of a run cancelled by its total deadline.
var errTotalTimeout = errors.New("run total timeout")

// Run runs one request, emitting events to sink. A non-nil error means the
// request was refused before anything was emitted (a *runnel.Error whose
// code says why); otherwise the result says how the run ended, and the
// stream ended with done.
func (m *Manager) Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	p, err := m.plan(req, runnel.RequestID(ctx))
	if err != nil {
		return nil, err
	}
	ctx = m.startTrace(ctx, p)
	var res *runnel.Result
	if p.agent != nil {
		res, err = m.runACP(ctx, p, sink)
	} else {
		res, err = m.runNative(ctx, p, sink)
	}
	endTrace(p, res, err)
	return res, err
}

// runNative runs a planned request on runnel's own loop.
func (m *Manager) runNative(ctx context.Context, p *plan, sink runnel.Sink) (*runnel.Result, error) {
	req := p.req
	red, log := p.red, p.log
	model, err := m.opts.NewModel(p.model.api, p.model.cfg)
	if err != nil {
		log.Error("model adapter", "err", err)
		return nil, invalid("Model %q cannot be used: %s.", req.Model, red.String(err.Error()))
	}
	model = &tracedModel{next: provider.WithPolicy(model, provider.Policy{
		Attempts:          m.opts.ProviderAttempts,
		BaseBackoff:       m.opts.ProviderBackoff,
		FirstTokenTimeout: m.opts.FirstTokenTimeout,
		IdleTimeout:       p.idle,
	}), obs: p.obs, model: p.model.id}
	if sink == nil {
		sink = runnel.Discard{}
	}
	rs := &runSink{next: sink, traceID: p.traceID, obs: p.obs}
	sink = red.Sink(rs)

	ws, closeWS, err := m.openWorkspace(p, false, notices(p, rs))
	if err != nil {
		return nil, err
	}
	defer closeWS()
	rctx, cancel := context.WithTimeoutCause(ctx, p.total, errTotalTimeout)
	defer cancel()
	start := time.Now()
	pool := m.connectMCP(rctx, p, ws)
	if pool != nil {
		// Every session is closed whatever way the run ends; Close is
		// bounded even against a hung server.
		defer func() {
			if err := pool.Close(); err != nil {
				log.Warn("mcp close", "err", err)
			}
		}()
	}
	if err := m.requiredMCP(pool); err != nil {
		log.WarnContext(ctx, "run refused", "err", err)
		return nil, err
	}
	m.deliverAttachments(rctx, p, ws)
	g, advert := m.gate(p, ws, pool)
	log.InfoContext(ctx, "run start", "tools", len(advert), "max_steps", p.maxSteps, "parked", len(p.resume.parked))
	for _, n := range p.notices {
		sink.Emit(runnel.Event{Type: runnel.EventNotice, Text: n})
	}
	out, runErr := native.Run(rctx, &native.Turn{
		Model:        model,
		ModelID:      p.model.id,
		System:       p.prompt.System,
		Messages:     p.prompt.Messages,
		Tools:        advert,
		Dispatcher:   g,
		Parked:       p.resume.parked,
		MaxSteps:     p.maxSteps,
		MaxStepBytes: m.opts.MaxStepBytes,
		MaxRunBytes:  m.opts.MaxRunBytes,
		Parallel:     m.opts.ToolParallel,
		Logger:       log,
	}, sink)
	res := m.result(ctx, rctx, p, turnEnd{out.Messages, out.Output, out.Usage, out.StopReason, out.Interactions}, runErr)
	if runErr != nil {
		sink.Emit(runnel.Event{Type: runnel.EventError, Message: res.Error, Code: res.ErrorCode})
		sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: res.StopReason})
		log.WarnContext(ctx, "run failed", "status", res.Status, "code", res.ErrorCode, "err", runErr)
	}
	red.Result(res)
	log.InfoContext(ctx, "run end", "status", res.Status, "stop_reason", res.StopReason,
		"steps", out.Steps, "input_tokens", res.Usage.Input, "output_tokens", res.Usage.Output,
		"duration", time.Since(start))
	return res, nil
}

// turnEnd is how a harness ended its turn, whichever harness it was.
type turnEnd struct {
	messages     []runnel.Message
	output       string
	usage        runnel.Usage
	stopReason   string
	interactions []runnel.Interaction
}

// result is the caller's view of how the run ended.
func (m *Manager) result(ctx, rctx context.Context, p *plan, out turnEnd, runErr error) *runnel.Result {
	res := &runnel.Result{
		OK:           true,
		Status:       runnel.StatusCompleted,
		Output:       out.output,
		Messages:     out.messages,
		Usage:        out.usage,
		StopReason:   out.stopReason,
		Interactions: out.interactions,
		Notices:      p.notices,
		Capabilities: capabilities(),
		SessionID:    p.sessionID,
		TurnID:       p.req.TurnID,
		Model:        p.req.Model,
		TraceID:      p.traceID,
		RequestID:    p.runID,
	}
	if res.Messages == nil {
		res.Messages = []runnel.Message{}
	}
	if res.Interactions == nil {
		res.Interactions = []runnel.Interaction{}
	}
	if out.stopReason == runnel.StopPaused {
		res.Status = runnel.StatusPaused
	}
	if runErr == nil {
		return res
	}
	res.OK, res.Status, res.StopReason = false, runnel.StatusFailed, runnel.StopError
	switch {
	case ctx.Err() != nil:
		res.Status, res.StopReason = runnel.StatusCancelled, runnel.StopCancelled
		res.ErrorCode, res.Error = runnel.CodeCancelled, "The run was cancelled before it finished."
	case errors.Is(context.Cause(rctx), errTotalTimeout):
		res.ErrorCode = runnel.CodeTimeout
		res.Error = fmt.Sprintf("The run exceeded its total timeout of %s.", p.total)
	default:
		res.ErrorCode = runnel.ErrorCodeOf(runErr)
		res.Error = runnel.ErrorMessage(runErr)
		if res.ErrorCode == runnel.CodeInternal {
			res.Error = fmt.Sprintf("internal error (request %s)", p.runID)
		}
	}
	return res
}

// runSink is a run's way out: it puts the run's trace id on its done
// event, where a platform reads it (DESIGN §3.4), traces each pause (both
// harnesses ask through an interaction_request), and remembers that done has
// passed, so that a late notice (the egress proxy refusing a process that
// is still being ended) is logged instead of following done.
type runSink struct {
	next    runnel.Sink
	traceID string
	obs     *telemetry.Run
	mu      sync.Mutex
	done    bool
}

func (s *runSink) Emit(e runnel.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.Type == runnel.EventDone:
		e.TraceID = s.traceID
		s.done = true
	case e.Type == runnel.EventInteractionRequest && e.Interaction != nil:
		it := e.Interaction
		s.obs.Pause(string(it.Kind), it.ToolName, it.ToolCallID, it.ID)
	}
	s.next.Emit(e)
}

// late emits e unless done has passed, and reports whether it did.
func (s *runSink) late(e runnel.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return false
	}
	s.next.Emit(e)
	return true
}

// notices is where the egress proxy's refusals go: notice events on rs,
// redacted, until the run is done; the run's log after that.
func notices(p *plan, rs *runSink) func(string) {
	return func(text string) {
		if !rs.late(runnel.Event{Type: runnel.EventNotice, Text: p.red.String(text)}) {
			p.log.Info("egress refusal after the run's end", "reason", text)
		}
	}
}

// capabilities are the native harness's feature flags.
func capabilities() *runnel.Capabilities {
	return &runnel.Capabilities{
		TextMessages:    true,
		Images:          true,
		FileAttachments: true,
		ToolCalls:       true,
		Reasoning:       true,
		Permissions:     true,
		McpTools:        true,
		Usage:           true,
		StreamingDeltas: true,
	}
}

func newRunID() string { return "run_" + randomHex(8) }

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
