package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of the answers, as the ACP schema spells them.
const (
	defaultAgentCapabilities = `{"loadSession":false,` +
		`"mcpCapabilities":{"http":true,"sse":false},` +
		`"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true}}`
	defaultAgentInfo = `{"name":"fakeagent","version":"0.0.0"}`
	// defaultModes are Claude 0.101's: it starts in auto, where no
	// permission request is ever sent.
	defaultModes = `{"currentModeId":"auto","availableModes":[` +
		`{"id":"auto","name":"Auto"},{"id":"default","name":"Default"},` +
		`{"id":"acceptEdits","name":"Accept Edits"},{"id":"plan","name":"Plan Mode"}]}`
)

// agent answers the client's requests as its Scenario says. Its methods
// are safe for concurrent use.
type agent struct {
	sc     *Scenario
	conn   *conn
	log    *eventLog
	mcp    *mcpClients
	stdout io.Writer // handed to children that hold it open
	stderr io.Writer
	exit   func(code int)

	// handlers are the goroutines answering requests and running async
	// tool calls; shutdown waits for them (for a while).
	handlers sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]bool
	// modes are the ids of the modes session/new reported; nil when it
	// reported none.
	modes []string
	// mode is the current mode, as session/new reported it and
	// session/set_mode changed it.
	mode           string
	turns          map[*turnRun]bool
	lastToolResult string
}

func newAgent(sc *Scenario, stdout, stderr io.Writer, log *eventLog, exit func(int)) *agent {
	return &agent{
		sc:       sc,
		conn:     newConn(stdout, log, sc.IDStyle == "string"),
		log:      log,
		mcp:      newMCPClients(sc.MCPProtocolVersion, log),
		stdout:   stdout,
		stderr:   stderr,
		exit:     exit,
		sessions: make(map[string]bool),
		turns:    make(map[*turnRun]bool),
	}
}

// serve reads the client's lines until stdin ends.
func (a *agent) serve(ctx context.Context, in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if a.conn.hung.Load() {
			blockForever()
		}
		if len(bytes.TrimSpace(line)) > 0 {
			a.dispatch(ctx, bytes.TrimSpace(line))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(a.stderr, "fakeagent: reading stdin: %v\n", err)
			}
			return
		}
	}
}

// dispatch handles one line. It runs on the reader, so whatever must
// happen before the next line is read (a prompt's registration, which a
// session/cancel right behind it needs) happens here; slow work goes to a
// goroutine.
func (a *agent) dispatch(ctx context.Context, line []byte) {
	var f frame
	if err := json.Unmarshal(line, &f); err != nil || (f.Method == "" && f.ID == nil) {
		a.log.add(logEntry{T: "recv", Raw: string(line)})
		a.conn.respondError(json.RawMessage("null"), &rpcError{Code: codeParseError, Message: "Parse error"})
		return
	}
	a.log.add(frameEntry("recv", f))
	if f.JSONRPC != "2.0" {
		a.log.note("bad jsonrpc version", f.JSONRPC)
	}
	switch {
	case f.Method == "session/prompt" && f.ID != nil:
		t, turn, rerr := a.startPrompt(ctx, f.Params)
		if rerr != nil {
			a.conn.respondError(f.ID, rerr)
			return
		}
		a.handlers.Go(func() { a.finishPrompt(f.ID, t, turn) })
	case f.Method != "" && f.ID != nil:
		a.handlers.Go(func() { a.answer(ctx, f) })
	case f.Method == "session/cancel":
		a.cancel(f.Params)
	case f.Method != "":
		// Unknown notifications are ignored, as the protocol asks; the
		// recv entry is their record.
	default:
		if !a.conn.deliver(f) {
			a.log.note("response to an unknown id", f.ID)
		}
	}
}

// answer answers every request but session/prompt.
func (a *agent) answer(ctx context.Context, f frame) {
	switch f.Method {
	case "initialize":
		a.initialize(ctx, f.ID)
	case "authenticate":
		a.conn.respond(f.ID, struct{}{})
	case "session/new":
		a.newSession(ctx, f.ID, f.Params)
	case "session/set_mode":
		a.setMode(ctx, f.ID, f.Params)
	default:
		a.conn.respondError(f.ID, &rpcError{Code: codeMethodNotFound, Message: "Method not found: " + f.Method})
	}
}

// before applies an answer's delay, crash and hang, and reports whether
// the request gets an answer at all.
func (a *agent) before(ctx context.Context, method string, q Answer) bool {
	if q.Delay > 0 && !sleep(ctx, time.Duration(q.Delay)) {
		return false
	}
	if q.Crash {
		a.crash(3, method)
	}
	if q.Hang {
		a.hang(method)
	}
	return true
}

func (a *agent) initialize(ctx context.Context, id json.RawMessage) {
	q := a.sc.Initialize
	if !a.before(ctx, "initialize", q.Answer) {
		return
	}
	if q.Error != nil {
		a.conn.respondError(id, q.Error)
		return
	}
	a.conn.respond(id, struct {
		ProtocolVersion   json.RawMessage `json:"protocolVersion,omitempty"`
		AgentCapabilities json.RawMessage `json:"agentCapabilities,omitempty"`
		AuthMethods       json.RawMessage `json:"authMethods,omitempty"`
		AgentInfo         json.RawMessage `json:"agentInfo,omitempty"`
	}{
		ProtocolVersion:   orDefault(q.ProtocolVersion, "1"),
		AgentCapabilities: orDefault(q.AgentCapabilities, defaultAgentCapabilities),
		AuthMethods:       orDefault(q.AuthMethods, "[]"),
		AgentInfo:         orDefault(q.AgentInfo, defaultAgentInfo),
	})
}

// orDefault is a scenario's raw field: absent means def, null means the
// field is left out.
func orDefault(raw json.RawMessage, def string) json.RawMessage {
	switch {
	case raw == nil:
		return json.RawMessage(def)
	case string(raw) == "null":
		return nil
	}
	return raw
}

// mcpServerParam is one mcpServers entry of session/new (http, sse or
// stdio; the fake connects only to http ones).
type mcpServerParam struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	URL     string `json:"url"`
	Headers []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"headers"`
}

func (a *agent) newSession(ctx context.Context, id, params json.RawMessage) {
	var p struct {
		Cwd        string           `json:"cwd"`
		MCPServers []mcpServerParam `json:"mcpServers"`
	}
	q := a.sc.NewSession
	if !a.before(ctx, "session/new", q.Answer) {
		return
	}
	if q.Error != nil {
		a.conn.respondError(id, q.Error)
		return
	}
	if err := json.Unmarshal(params, &p); err != nil {
		a.conn.respondError(id, &rpcError{Code: codeInvalidParams, Message: err.Error()})
		return
	}
	// The servers of the latest session are the ones mcpCall steps use.
	a.mcp.setServers(p.MCPServers)

	modes := orDefault(q.Modes, defaultModes)
	var state struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	}
	if modes != nil {
		if err := json.Unmarshal(modes, &state); err != nil {
			a.log.note("modes unreadable", err.Error())
		}
	}
	a.mu.Lock()
	sessionID := q.SessionID
	if sessionID == "" {
		sessionID = fmt.Sprintf("fake-session-%d", len(a.sessions)+1)
	}
	a.sessions[sessionID] = true
	a.modes, a.mode = nil, state.CurrentModeID
	if modes != nil {
		a.modes = []string{}
		for _, m := range state.AvailableModes {
			a.modes = append(a.modes, m.ID)
		}
	}
	a.mu.Unlock()

	a.conn.respond(id, struct {
		SessionID string          `json:"sessionId"`
		Modes     json.RawMessage `json:"modes,omitempty"`
	}{sessionID, modes})
}

func (a *agent) setMode(ctx context.Context, id, params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	if !a.before(ctx, "session/set_mode", a.sc.SetMode) {
		return
	}
	if a.sc.SetMode.Error != nil {
		a.conn.respondError(id, a.sc.SetMode.Error)
		return
	}
	if err := json.Unmarshal(params, &p); err != nil {
		a.conn.respondError(id, &rpcError{Code: codeInvalidParams, Message: err.Error()})
		return
	}
	a.mu.Lock()
	known, modes := a.sessions[p.SessionID], a.modes
	a.mu.Unlock()
	switch {
	case !known:
		a.conn.respondError(id, &rpcError{Code: codeInvalidParams, Message: "unknown session " + p.SessionID})
	case modes == nil:
		// An agent that reports no modes has no set_mode either.
		a.conn.respondError(id, &rpcError{Code: codeMethodNotFound, Message: "Method not found: session/set_mode"})
	case !slices.Contains(modes, p.ModeID):
		a.conn.respondError(id, &rpcError{Code: codeInvalidParams, Message: "unknown mode " + p.ModeID})
	default:
		a.mu.Lock()
		a.mode = p.ModeID
		a.mu.Unlock()
		a.log.note("mode", p)
		a.conn.respond(id, struct{}{})
	}
}

// startPrompt registers a prompt's turn, so a session/cancel read right
// after it finds the turn.
func (a *agent) startPrompt(ctx context.Context, params json.RawMessage) (*turnRun, *Turn, *rpcError) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, nil, &rpcError{Code: codeInvalidParams, Message: err.Error()}
	}
	var texts []string
	for _, b := range p.Prompt {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	prompt := strings.Join(texts, "\n")

	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.sessions[p.SessionID] {
		return nil, nil, &rpcError{Code: codeInvalidParams, Message: "unknown session " + p.SessionID}
	}
	turn := a.sc.match(prompt, a.mode)
	if turn == nil {
		// Loud, so a scenario missing a turn fails the test that wrote it.
		a.log.note("no turn matches", map[string]string{"prompt": prompt, "mode": a.mode})
		return nil, nil, &rpcError{Code: codeInternalError, Message: "fakeagent: no turn matches the prompt"}
	}
	t := newTurnRun(ctx, a, p.SessionID, prompt)
	a.turns[t] = true
	return t, turn, nil
}

func (a *agent) finishPrompt(id json.RawMessage, t *turnRun, turn *Turn) {
	reason := t.run(turn)
	a.mu.Lock()
	delete(a.turns, t)
	a.mu.Unlock()
	// t's context stays live: an async call may outlive its turn, and ends
	// with the agent at the latest.
	a.conn.respond(id, struct {
		StopReason string `json:"stopReason"`
	}{reason})
}

// cancel is session/cancel: every prompt of that session is cancelled.
func (a *agent) cancel(params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p) // a bad cancel cancels nothing; its recv entry shows it
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for t := range a.turns {
		if t.sessionID == p.SessionID {
			t.cancel()
			n++
		}
	}
	if n == 0 {
		a.log.note("cancel with no prompt running", p.SessionID)
	}
}

func (a *agent) setLastToolResult(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastToolResult = s
}

func (a *agent) getLastToolResult() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastToolResult
}

// crash ends the agent at once, as a crashing agent does: no answer, no
// goodbye on stdout.
func (a *agent) crash(code int, during string) {
	a.log.note("crash", map[string]any{"code": code, "during": during})
	fmt.Fprintf(a.stderr, "fakeagent: crashing during %s, as the scenario says\n", during)
	a.exit(code)
	blockForever() // exit does not return; this keeps a test's exit honest
}

// hang stops the agent for good: no write, read or answer after it.
func (a *agent) hang(during string) {
	a.log.note("hang", map[string]any{"during": during})
	a.conn.hung.Store(true)
	blockForever()
}

// shutdown waits up to d for the handlers once the client is gone, then
// closes the MCP sessions.
func (a *agent) shutdown(d time.Duration) {
	done := make(chan struct{})
	go func() {
		a.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		fmt.Fprintln(a.stderr, "fakeagent: exiting with handlers still running")
	}
	a.mcp.close()
}

// recordStart logs what the agent was started with: its process, its
// environment, its working directory and the files under $HOME the
// scenario asks about.
func (a *agent) recordStart(cfg config) {
	a.log.note("process", map[string]any{"pid": cfg.pid, "ppid": cfg.ppid, "pgid": cfg.pgid, "args": cfg.args})
	env := make(map[string]string, len(cfg.env))
	for _, kv := range cfg.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	a.log.note("env", env)
	a.log.note("cwd", cfg.cwd)
	type homeFile struct {
		Path    string `json:"path"`
		Exists  bool   `json:"exists"`
		Content string `json:"content,omitempty"`
	}
	files := []homeFile{}
	for _, p := range a.sc.HomeFiles {
		f := homeFile{Path: p}
		if data, err := os.ReadFile(filepath.Join(cfg.home, p)); err == nil {
			f.Exists = true
			if len(data) <= 64<<10 {
				f.Content = string(data)
			}
		}
		files = append(files, f)
	}
	a.log.note("home", map[string]any{"home": cfg.home, "files": files})
}
