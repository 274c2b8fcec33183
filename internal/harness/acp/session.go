package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/strictjson"
)

// session is one turn on one agent. Events leave in the order they
// happened: everything that emits holds mu.
type session struct {
	t     *Turn
	to    Timeouts
	log   *slog.Logger
	agent string // the harness name, for messages

	conn *acpsdk.Connection
	sid  string

	mu        sync.Mutex
	sink      runnel.Sink
	calls     *tracker
	script    transcript
	part      textPart
	paused    bool
	parked    []runnel.Interaction
	outBytes  int64
	emitted   int
	finished  bool
	lastText  string
	textAfter bool // text came after the last tool call

	pausedCh   chan struct{}
	cancelOnce sync.Once

	// execCtx runs the tool calls runnel executes; a pause or the end of
	// the turn cancels it, so no execution outlives the turn.
	execCtx    context.Context
	execCancel context.CancelFunc

	failOnce sync.Once
	failErr  error
	failCh   chan struct{}

	// lastActive is when the agent last sent a frame (unix nanoseconds);
	// running counts the tool calls runnel is executing for it. Together
	// they tell a silent agent from one waiting for a tool.
	lastActive atomic.Int64
	running    atomic.Int32
}

// Run runs one turn of an ACP agent, emitting events to sink. A
// *runnel.Error with code CodeRefused, returned before any event, means
// the agent cannot run this turn (it cannot receive the run's tools);
// any other error is a failure, with the partial Outcome.
func Run(ctx context.Context, t *Turn, sink runnel.Sink) (*Outcome, error) {
	s := &session{
		t:        t,
		to:       t.Timeouts.withDefaults(),
		log:      t.Logger,
		sink:     sink,
		calls:    newTracker(newNamer(t.Tools, t.Servers, t.Workspace.Dir())),
		pausedCh: make(chan struct{}),
		failCh:   make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.sink == nil {
		s.sink = runnel.Discard{}
	}
	s.execCtx, s.execCancel = context.WithCancel(ctx)
	defer s.execCancel()
	out := &Outcome{}

	inside := ""
	if t.Workspace.NetworkConfined() {
		inside = insideAddr(t.Forwards)
	}
	srv, err := startToolServer(t.Tools, s, s.log, inside)
	if err != nil {
		return out, err
	}
	defer srv.Close()

	launch, err := t.Agent.Launch(ctx, Endpoint{URL: srv.URL(), Headers: srv.Headers(), Tools: t.Tools})
	if err != nil {
		return out, err
	}
	s.agent = launch.Name
	if launch.Cleanup != nil {
		defer func() {
			if err := launch.Cleanup(); err != nil {
				s.log.Warn("agent home cleanup", "err", err)
			}
		}()
	}
	stderr := newTail(16 << 10)
	is := &sandbox.Isolation{ReadOnly: launch.ReadOnly, Writable: launch.Writable, Forwards: t.Forwards}
	if sock := srv.Socket(); sock != "" {
		is.Sockets = []string{sock}
	}
	proc, err := sandbox.StartProcess(t.Workspace, launch.Argv, &sandbox.ProcessOptions{Env: launch.Env, Stderr: stderr, Isolation: is})
	if err != nil {
		return out, runnel.Errorf(runnel.CodeAgentError, "The %s agent could not be started: %w", s.agent, err)
	}
	defer func() {
		if err := proc.End(s.to.ExitGrace); err != nil {
			s.log.Warn("agent end", "err", err)
		}
	}()
	s.conn = acpsdk.NewConnection(s.handle, proc.Stdin, proc.Stdout)
	s.conn.SetLogger(s.log)
	s.touch()

	err = s.start(ctx, launch, proc, stderr, srv, out)
	if err != nil {
		s.mu.Lock()
		out.Emitted = s.emitted
		s.finished = true
		s.mu.Unlock()
		return out, err
	}
	err = s.prompt(ctx, proc, stderr)
	s.finish(out, err)
	return out, err
}

// insideAddr is where, inside a confined sandbox, the agent reaches
// runnel's MCP server: a loopback port of the sandbox's own namespace
// that no forwarded address takes.
func insideAddr(forwards []string) string {
	for port := 3129; ; port++ {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if !slices.Contains(forwards, addr) {
			return addr
		}
	}
}

// start initializes the agent and opens its session.
func (s *session) start(ctx context.Context, launch *Launch, proc *sandbox.Process, stderr *tail, srv *toolServer, out *Outcome) error {
	ictx, cancel := context.WithTimeout(ctx, s.to.Initialize)
	defer cancel()
	init, err := acpsdk.SendRequest[acpsdk.InitializeResponse](s.conn, ictx, acpsdk.AgentMethodInitialize, map[string]any{
		"protocolVersion": acpsdk.ProtocolVersionNumber,
		// No fs, no terminal: the agent works on the workspace with its
		// own tools, which are what the permission plan gates.
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "runnel", "version": "1"},
	})
	if err != nil {
		return s.agentFailure(ctx, ictx, "initialize", s.to.Initialize, proc, stderr, err)
	}
	if init.AgentInfo != nil {
		out.Agent = strings.TrimSpace(init.AgentInfo.Name + " " + init.AgentInfo.Version)
	}
	caps := init.AgentCapabilities
	if n := len(s.t.Tools); n > 0 && !launch.ToolsInConfig && !caps.McpCapabilities.Http {
		return runnel.Errorf(runnel.CodeRefused,
			"Harness %q cannot receive this run's tools: its agent does not advertise the MCP capability agentCapabilities.mcpCapabilities.http, so %d tool(s) would be lost. Remove the tools, or choose a harness that takes MCP tools over HTTP.", s.agent, n)
	}
	if n := len(s.t.Servers); n > 0 && !caps.McpCapabilities.Http {
		return runnel.Errorf(runnel.CodeRefused,
			"Harness %q cannot connect to this run's MCP servers: its agent does not advertise the MCP capability agentCapabilities.mcpCapabilities.http, so %d server(s) and their tools would be lost. Remove mcpServers, or choose another harness.", s.agent, n)
	}
	if !caps.PromptCapabilities.Image {
		s.t.Prompt = withoutImages(s.t.Prompt, func(n int) {
			s.emit(runnel.Event{Type: runnel.EventNotice, Text: fmt.Sprintf("%d image(s) were not given to the agent: harness %q does not take images in prompts.", n, s.agent)})
		})
	}

	for _, n := range s.t.Notices {
		s.emit(runnel.Event{Type: runnel.EventNotice, Text: n})
	}
	servers := []map[string]any{}
	if len(s.t.Tools) > 0 && !launch.ToolsInConfig {
		servers = append(servers, httpServer(ServerName, srv.URL(), srv.Headers()))
	}
	for _, u := range s.t.Servers {
		servers = append(servers, httpServer(u.Name, u.URL, u.Headers))
	}
	sctx, cancel2 := context.WithTimeout(ctx, s.to.Session)
	defer cancel2()
	sess, err := acpsdk.SendRequest[acpsdk.NewSessionResponse](s.conn, sctx, acpsdk.AgentMethodSessionNew, map[string]any{
		"cwd": s.t.Workspace.Dir(), "mcpServers": servers,
	})
	if err != nil {
		return s.agentFailure(ctx, sctx, "session/new", s.to.Session, proc, stderr, err)
	}
	s.sid = string(sess.SessionId)
	if launch.Mode != "" && sess.Modes != nil && string(sess.Modes.CurrentModeId) != launch.Mode {
		offered := false
		for _, m := range sess.Modes.AvailableModes {
			offered = offered || string(m.Id) == launch.Mode
		}
		if !offered {
			return runnel.Errorf(runnel.CodeAgentError,
				"The %s agent does not offer the session mode %q that routes its tool calls through runnel's permission gate (it offers %s); runnel will not run it in a mode that skips the gate.", s.agent, launch.Mode, modeList(sess.Modes.AvailableModes))
		}
		if err := s.conn.SendRequestNoResult(sctx, acpsdk.AgentMethodSessionSetMode, map[string]string{"sessionId": s.sid, "modeId": launch.Mode}); err != nil {
			return s.agentFailure(ctx, sctx, "session/set_mode", s.to.Session, proc, stderr, err)
		}
	}
	return nil
}

// prompt sends the turn's prompt and waits until the agent ends it, the
// turn pauses (then the session is cancelled and drained), fails, or goes
// idle.
func (s *session) prompt(ctx context.Context, proc *sandbox.Process, stderr *tail) error {
	type answer struct {
		resp acpsdk.PromptResponse
		err  error
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan answer, 1)
	go func() {
		r, err := acpsdk.SendRequest[acpsdk.PromptResponse](s.conn, pctx, acpsdk.AgentMethodSessionPrompt, map[string]any{
			"sessionId": s.sid, "prompt": promptBlocks(s.t.Prompt),
		})
		done <- answer{r, err}
	}()
	idle := time.NewTicker(min(s.to.Idle/4, time.Second))
	defer idle.Stop()
	for {
		select {
		case a := <-done:
			if a.err != nil {
				if s.isPaused() {
					return nil // the pause cancelled it
				}
				return s.agentFailure(ctx, pctx, "session/prompt", 0, proc, stderr, a.err)
			}
			return s.ended(a.resp)
		case <-s.pausedCh:
			s.cancelSession()
			t := time.NewTimer(s.to.Drain)
			select {
			case <-done:
			case <-t.C:
				s.log.Warn("agent did not end its cancelled prompt", "drain", s.to.Drain)
			}
			t.Stop()
			return nil
		case <-s.failCh:
			return s.failErr
		case <-idle.C:
			if s.running.Load() == 0 && time.Since(time.Unix(0, s.lastActive.Load())) > s.to.Idle {
				return runnel.Errorf(runnel.CodeTimeout, "The %s agent sent nothing for %s while no tool was running; runnel gave up on it.", s.agent, s.to.Idle)
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// ended reads the stop reason of a prompt the agent ended itself.
func (s *session) ended(r acpsdk.PromptResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Usage != nil {
		s.script.usage = runnel.Usage{Input: int64(r.Usage.InputTokens), Output: int64(r.Usage.OutputTokens)}
	}
	switch reason := string(r.StopReason); reason {
	case "cancelled":
		if !s.paused {
			return runnel.Errorf(runnel.CodeAgentError, "The %s agent cancelled its turn by itself.", s.agent)
		}
	case "max_turn_requests":
		s.script.stop = runnel.StopMaxSteps
	case "", "end_turn":
		s.script.stop = runnel.StopEndTurn
	default:
		s.script.stop = reason // max_tokens, refusal: the answer may be cut short
	}
	return nil
}

// finish settles what the turn left open and fills the outcome.
func (s *session) finish(out *Outcome, runErr error) {
	s.execCancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.part.close(s)
	for _, c := range s.calls.open() {
		text := harness.Deferred
		if !s.paused {
			text = fmt.Sprintf("The %s agent ended its turn without finishing this call; it may or may not have run.", s.agent)
		}
		s.settleLocked(c, harness.TextResult(text, true))
	}
	out.Messages = s.script.msgs
	out.Output = s.lastText
	out.Usage = s.script.usage
	out.Interactions = s.parked
	out.Emitted = s.emitted
	s.finished = true
	switch {
	case s.paused:
		out.StopReason = runnel.StopPaused
	case runErr == nil:
		out.StopReason = s.script.stop
	}
}

// agentFailure explains a request the agent did not answer: it exited
// (with the end of what it printed on stderr), it ran out of time, or it
// answered with an error.
func (s *session) agentFailure(ctx, rctx context.Context, method string, timeout time.Duration, proc *sandbox.Process, stderr *tail, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case <-proc.Exited():
		return runnel.Errorf(runnel.CodeAgentError, "The %s agent exited (status %d) before it answered %s.%s", s.agent, proc.ExitCode(), method, stderr.sentence())
	case <-time.After(100 * time.Millisecond):
	}
	if proc.ExitCode() >= 0 {
		return runnel.Errorf(runnel.CodeAgentError, "The %s agent exited (status %d) before it answered %s.%s", s.agent, proc.ExitCode(), method, stderr.sentence())
	}
	if rctx.Err() != nil && timeout > 0 {
		return runnel.Errorf(runnel.CodeAgentError, "The %s agent did not answer %s within %s.%s", s.agent, method, timeout, stderr.sentence())
	}
	var re *acpsdk.RequestError
	if errors.As(err, &re) {
		return runnel.Errorf(runnel.CodeAgentError, "The %s agent refused %s: %s.", s.agent, method, clip(re.Message+" "+dataText(re.Data), 300))
	}
	return runnel.Errorf(runnel.CodeAgentError, "The %s agent failed during %s: %s.%s", s.agent, method, clip(err.Error(), 300), stderr.sentence())
}

// fail ends the turn with err (the first failure wins).
func (s *session) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failCh)
	})
}

func (s *session) touch() { s.lastActive.Store(time.Now().UnixNano()) }

// handle answers what the agent sends: notifications one at a time, in
// order; requests each on a goroutine of its own.
func (s *session) handle(ctx context.Context, method string, params json.RawMessage) (any, *acpsdk.RequestError) {
	s.touch()
	if s.count(len(params)) {
		return nil, nil
	}
	switch method {
	case acpsdk.ClientMethodSessionUpdate:
		s.update(params)
		return nil, nil
	case acpsdk.ClientMethodSessionRequestPermission:
		return s.permission(ctx, params)
	}
	return nil, acpsdk.NewMethodNotFound(method)
}

// count adds n bytes to what the agent streamed and fails the turn past
// its cap; it reports whether the cap is passed.
func (s *session) count(n int) bool {
	limit := s.t.MaxOutputBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	s.mu.Lock()
	s.outBytes += int64(n)
	over := s.outBytes > limit
	s.mu.Unlock()
	if over {
		s.fail(runnel.Errorf(runnel.CodeAgentError, "The %s agent streamed more than %d MiB in one turn; runnel stopped it.", s.agent, limit>>20))
	}
	return over
}

// update applies one session/update. The kind is read from the raw
// sessionUpdate field: the SDK decodes a kind it does not know as another
// one that has the same fields (an unknown "…_chunk" with content as a
// user message chunk), so only the kinds runnel knows are decoded, and
// the rest are ignored.
func (s *session) update(params json.RawMessage) {
	var n struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil || (s.sid != "" && n.SessionID != s.sid) {
		return
	}
	var kind struct {
		SessionUpdate string          `json:"sessionUpdate"`
		Content       json.RawMessage `json:"content"`
	}
	if json.Unmarshal(n.Update, &kind) != nil {
		return
	}
	switch kind.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		text, ok := textOf(kind.Content)
		if !ok || text == "" {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.paused {
			return // what the agent says while it is being cancelled is not the turn's
		}
		if kind.SessionUpdate == "agent_message_chunk" {
			s.part.delta(s, "msg", runnel.EventMessageStart, runnel.EventMessageDelta, runnel.EventMessageEnd, text)
			s.script.text(text)
			if !s.textAfter {
				s.lastText = ""
			}
			s.textAfter = true
			s.lastText += text
		} else {
			s.part.delta(s, "thought", runnel.EventThoughtStart, runnel.EventThoughtDelta, runnel.EventThoughtEnd, text)
		}
	case "tool_call", "tool_call_update":
		var f frame
		if json.Unmarshal(n.Update, &f) != nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		c := s.calls.upsert(&f)
		s.progressLocked(c)
	default:
		// plan, available_commands_update, current_mode_update,
		// usage_update, session_info_update, user_message_chunk (the
		// agent echoing the prompt), and kinds runnel does not know.
		s.log.Debug("agent update ignored", "kind", kind.SessionUpdate)
	}
}

// progressLocked emits what a frame tells of an agent's call: the
// tool_call once its arguments are known or it is under way, the
// tool_result once it finished. Calls to runnel's own tools are reported
// by runnel's server, which knows their arguments and results exactly.
//
// Frames still count once the turn paused: notifications and requests
// are handled on different goroutines, so a call the agent reported
// before its permission request may be read after the pause, and the
// turn must still account for it (settled with harness.Deferred).
func (s *session) progressLocked(c *call) {
	if c.viaServer || c.settled || c.parked {
		return
	}
	if c.ref.Owner == harness.OwnerRunnel && !c.done() {
		return
	}
	if !c.emitted && (c.done() || c.status == statusInProgress && c.known()) {
		s.emitCallLocked(c)
	}
	if c.done() && c.emitted {
		s.settleLocked(c, harness.TextResult(c.resultText(), c.status == statusFailed))
	}
}

// permission answers the agent's request for leave to make a call: the
// gate's verdict, as the agent's allow-once or reject-once option (chosen
// by kind, never an "always" one); a pause answers nothing but
// "cancelled", once the session is cancelled.
func (s *session) permission(ctx context.Context, params json.RawMessage) (any, *acpsdk.RequestError) {
	var req struct {
		SessionID string `json:"sessionId"`
		ToolCall  frame  `json:"toolCall"`
		Options   []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, acpsdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	s.mu.Lock()
	if s.paused || s.finished {
		return s.cancelledUnlock()
	}
	req.ToolCall.unwrapConfirm()
	c := s.calls.upsert(&req.ToolCall)
	c = s.awaitFrames(ctx, c)
	if s.paused || s.finished {
		return s.cancelledUnlock()
	}
	ref := c.ref
	ref.ID, ref.Reissued, ref.ArgsUnknown = c.id, true, !c.known() && !c.viaServer
	if !ref.ArgsUnknown || ref.Owner != harness.OwnerRunnel {
		// A call of runnel's own whose arguments are not yet known is
		// reported by runnel's server, which reads them: reported now, it
		// would stand in the events and the replayed messages without
		// the arguments a pause signs.
		s.emitCallLocked(c)
	}
	s.mu.Unlock()

	v := s.t.Gate.Permit(ctx, ref)
	option := func(kind string) any {
		for _, o := range req.Options {
			if o.Kind == kind {
				return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": o.OptionID}}
			}
		}
		return nil
	}
	s.mu.Lock()
	if a := v.Answer(); a != nil {
		s.emitLocked(runnel.Event{Type: runnel.EventInteractionResponse, Answer: a})
	}
	if v.Interaction() != nil {
		s.pauseLocked(c, *v.Interaction())
		return s.cancelledUnlock()
	}
	defer s.mu.Unlock()
	cancelled := map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}
	switch {
	case v.Allowed():
		if o := option("allow_once"); o != nil {
			return o, nil
		}
		s.settleLocked(c, harness.TextResult(fmt.Sprintf("The %s agent offered no way to allow this call once, and runnel never allows always.", s.agent), true))
		if o := option("reject_once"); o != nil {
			return o, nil
		}
		return cancelled, nil
	}
	s.settleLocked(c, v.Result())
	if o := option("reject_once"); o != nil {
		return o, nil
	}
	return cancelled, nil
}

// cancelledUnlock answers a permission request "cancelled" and releases
// s.mu. In a paused turn the session/cancel goes out first, and this
// waits until it has: an agent that reads the answer before the cancel
// takes it for a refused call and goes on with its turn, calling the
// model once more after runnel paused it (ACP has the client cancel,
// then answer pending requests cancelled).
func (s *session) cancelledUnlock() (any, *acpsdk.RequestError) {
	paused := s.paused
	s.mu.Unlock()
	if paused {
		s.cancelSession()
	}
	return map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}, nil
}

// How long a permission request waits for the frames that describe its
// call: the one that names it (Codex's request carries only an id, and
// the agent's frames are read on another goroutine than its requests),
// and, for a call the agent runs itself, the one with its arguments
// (opencode asks with {} and sends them right after).
const (
	frameWait = time.Second
	argsWait  = 300 * time.Millisecond
)

// awaitFrames waits, with s.mu held (it is released while waiting), until
// call c is named and, unless runnel's server will see its arguments
// itself, its arguments are known; or until the waits run out. It returns
// the call as it then stands (a frame may have tied it to another).
func (s *session) awaitFrames(ctx context.Context, c *call) *call {
	start := time.Now()
	for {
		if c.agentID != "" {
			if cur := s.calls.byAgent[c.agentID]; cur != nil {
				c = cur
			}
		}
		named := c.name != "" || c.title != "" || c.viaServer
		wait := frameWait
		if named {
			if c.ref.Owner == harness.OwnerRunnel || c.known() {
				return c
			}
			wait = argsWait
		}
		left := wait - time.Since(start)
		if left <= 0 {
			return c
		}
		changed := s.calls.changed
		s.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
		if ctx.Err() != nil {
			return c
		}
	}
}

// serverCall runs a tools/call runnel's server received: the arguments
// are checked, the call is tied to the agent's frame for it, and the gate
// decides. It reports paused when the call must get no response.
func (s *session) serverCall(ctx context.Context, hc *httpCall, tool Tool, args json.RawMessage, agentID string) (*mcp.CallToolResult, bool) {
	s.touch()
	input, problem := harness.CheckArgs(tool.Name, args, tool.Schema)
	s.mu.Lock()
	if s.paused || s.finished {
		s.mu.Unlock()
		return nil, true
	}
	if problem != "" {
		c := s.calls.fromServer(tool.Name, objectOrEmpty(args), agentID)
		s.emitCallLocked(c)
		r := harness.TextResult(problem, true)
		s.settleLocked(c, r)
		s.mu.Unlock()
		return mcpResult(r), false
	}
	c := s.calls.fromServer(tool.Name, input, agentID)
	s.emitCallLocked(c)
	s.mu.Unlock()

	v := s.t.Gate.Dispatch(ctx, harness.Call{ID: c.id, Name: tool.Name, Input: input, Reissued: true})
	if hc.verdict(ctx, v.Interaction() != nil) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if it := v.Interaction(); it != nil {
			s.pauseLocked(c, *it)
		} else {
			// A sibling in its batch paused: nothing of the batch runs.
			s.settleLocked(c, harness.TextResult(harness.Deferred, true))
		}
		return nil, true
	}
	if a := v.Answer(); a != nil {
		s.emit(runnel.Event{Type: runnel.EventInteractionResponse, Answer: a})
	}
	r := v.Result()
	if run := v.Run(); run != nil {
		s.running.Add(1)
		r = runSafely(s.execCtx, run)
		s.running.Add(-1)
		s.touch()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused && !c.settled {
		// The turn paused while this call ran: it was cancelled, and the
		// agent gets no answer it could act on.
		s.settleLocked(c, harness.TextResult(harness.Deferred, true))
		return nil, true
	}
	s.settleLocked(c, r)
	return mcpResult(r), false
}

// runSafely runs fn and turns a panic into a tool error.
func runSafely(ctx context.Context, fn harness.ToolFunc) (r harness.ToolResult) {
	defer func() {
		if p := recover(); p != nil {
			r = harness.TextResult(fmt.Sprintf("Tool failed with an internal error: %v", p), true)
		}
	}()
	return fn(ctx)
}

// mcpResult is a tool result as MCP content: a JSON string's text, or the
// JSON itself.
func mcpResult(r harness.ToolResult) *mcp.CallToolResult {
	text := string(r.Output)
	var str string
	if json.Unmarshal(r.Output, &str) == nil {
		text = str
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: r.IsError}
}

// pauseLocked parks the turn on call c behind it: the first gate that
// pauses pauses the turn; the agent's session is cancelled and every call
// still running is cancelled through its context.
func (s *session) pauseLocked(c *call, it runnel.Interaction) {
	if s.paused {
		s.settleLocked(c, harness.TextResult(harness.Deferred, true))
		return
	}
	s.paused = true
	c.parked = true
	s.part.close(s)
	s.parked = append(s.parked, it)
	s.emitLocked(runnel.Event{Type: runnel.EventInteractionRequest, Interaction: &it})
	close(s.pausedCh)
	s.execCancel()
	go s.cancelSession()
}

// cancelSession sends session/cancel once.
func (s *session) cancelSession() {
	s.cancelOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.conn.SendNotification(ctx, acpsdk.AgentMethodSessionCancel, map[string]string{"sessionId": s.sid}); err != nil {
			s.log.Debug("session/cancel", "err", err)
		}
	})
}

func (s *session) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// emitCallLocked emits c's tool_call event once.
func (s *session) emitCallLocked(c *call) {
	if c.emitted {
		return
	}
	c.emitted = true
	s.part.close(s)
	s.textAfter = false
	input := objectOrEmpty(c.ref.Input)
	// What is recorded must be JSON a replay can send back, and a request
	// holding a member twice or an unpaired surrogate is refused
	// (internal/strictjson): such arguments are kept as a JSON string, as
	// the native loop keeps them.
	if strictjson.Check(input) != nil {
		input = runnel.TextOutput(string(input))
	}
	s.emitLocked(runnel.Event{Type: runnel.EventToolCall, ID: c.id, Name: c.ref.Name, Input: input})
	s.script.call(runnel.Block{Type: runnel.BlockToolCall, ToolCallID: c.id, ToolName: c.ref.Name, Input: input})
}

// settleLocked emits c's tool_result once.
func (s *session) settleLocked(c *call, r harness.ToolResult) {
	if c.settled || c.parked {
		return
	}
	s.emitCallLocked(c)
	c.settled = true
	s.emitLocked(runnel.Event{Type: runnel.EventToolResult, ID: c.id, Output: r.Output, IsError: r.IsError, Denied: r.Denied})
	s.script.result(runnel.Block{Type: runnel.BlockToolResult, ToolCallID: c.id, ToolName: c.ref.Name, Output: r.Output, IsError: r.IsError})
}

func (s *session) emit(e runnel.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(e)
}

func (s *session) emitLocked(e runnel.Event) {
	if s.finished {
		return // the turn is over: nothing the agent still sends is the turn's
	}
	s.emitted++
	s.sink.Emit(e)
}

// httpServer is one mcpServers entry of session/new.
func httpServer(name, url string, headers map[string]string) map[string]any {
	hs := []map[string]string{}
	for k, v := range headers {
		hs = append(hs, map[string]string{"name": k, "value": v})
	}
	return map[string]any{"type": "http", "name": name, "url": url, "headers": hs}
}

func modeList(modes []acpsdk.SessionMode) string {
	ids := make([]string, 0, len(modes))
	for _, m := range modes {
		ids = append(ids, fmt.Sprintf("%q", m.Id))
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// textOf is the text of an ACP content block.
func textOf(raw json.RawMessage) (string, bool) {
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &b) != nil || b.Type != "text" {
		return "", false
	}
	return b.Text, true
}

// promptBlocks are the turn's blocks as ACP content.
func promptBlocks(blocks []runnel.Block) []map[string]any {
	out := []map[string]any{}
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText:
			out = append(out, map[string]any{"type": "text", "text": b.Text})
		case runnel.BlockImage:
			out = append(out, map[string]any{"type": "image", "mimeType": b.MimeType, "data": b.Data})
		}
	}
	return out
}

// withoutImages drops image blocks, telling report how many.
func withoutImages(blocks []runnel.Block, report func(int)) []runnel.Block {
	out := make([]runnel.Block, 0, len(blocks))
	for _, b := range blocks {
		if b.Type != runnel.BlockImage {
			out = append(out, b)
		}
	}
	if n := len(blocks) - len(out); n > 0 {
		report(n)
	}
	return out
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func dataText(d any) string {
	if d == nil {
		return ""
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	return string(b)
}
