package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// turnRun is one session/prompt in progress. Its steps run on one
// goroutine; only cancel is called from others.
type turnRun struct {
	a *agent
	// root ends when the client goes away; ctx also ends on session/cancel.
	root   context.Context
	ctx    context.Context
	cancel context.CancelFunc

	sessionID, prompt string
	// refused is set when a permission request was answered "cancelled".
	refused bool
	// stopReason is an end step's.
	stopReason string
	// open are the tool calls announced (by tool_call, tool_call_update or
	// a permission request) and not yet completed or failed, in order.
	open []string
}

func newTurnRun(root context.Context, a *agent, sessionID, prompt string) *turnRun {
	ctx, cancel := context.WithCancel(root)
	return &turnRun{a: a, root: root, ctx: ctx, cancel: cancel, sessionID: sessionID, prompt: prompt}
}

// run runs the turn's steps and returns its stop reason.
func (t *turnRun) run(turn *Turn) string {
	t.runSteps(turn.Steps)
	reason := cmp.Or(turn.StopReason, "end_turn")
	if t.cancelled() {
		reason = "cancelled"
		if !t.a.sc.LeaveInProgressOnCancel {
			for _, id := range t.open {
				t.update(map[string]string{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed"})
			}
			t.open = nil
		}
	}
	return cmp.Or(t.stopReason, reason)
}

// cancelled reports a session/cancel for this turn, or a permission
// request the client answered "cancelled".
func (t *turnRun) cancelled() bool {
	return t.refused || (t.ctx.Err() != nil && t.root.Err() == nil)
}

// runSteps runs steps in order and reports whether the turn ended in them.
func (t *turnRun) runSteps(steps []Step) (ended bool) {
	for i := range steps {
		if t.root.Err() != nil || t.step(&steps[i]) {
			return true
		}
	}
	return false
}

// step runs one step and reports whether it ended the turn.
func (t *turnRun) step(s *Step) (ended bool) {
	switch {
	case s.Text != nil:
		t.chunk("agent_message_chunk", t.expand(*s.Text))
	case s.Thought != nil:
		t.chunk("agent_thought_chunk", t.expand(*s.Thought))
	case s.ToolCall != nil:
		t.toolUpdate("tool_call", s.ToolCall)
	case s.ToolCallUpdate != nil:
		t.toolUpdate("tool_call_update", s.ToolCallUpdate)
	case s.Permission != nil:
		return t.permission(s.Permission)
	case s.MCPCall != nil:
		t.mcpCall(s.MCPCall)
	case s.MCPListTools != nil:
		t.a.mcp.listTools(t.ctx, s.MCPListTools.Server)
	case s.Notify != nil:
		if s.Notify.Update != nil {
			t.update(s.Notify.Update)
		} else {
			t.a.conn.send(frame{Method: s.Notify.Method, Params: s.Notify.Params})
		}
	case s.Raw != nil:
		t.a.conn.sendRaw(strings.ReplaceAll(*s.Raw, "{{session_id}}", t.sessionID))
	case s.Sleep != nil:
		sleep(t.root, time.Duration(*s.Sleep))
	case s.WaitCancel != nil:
		return t.waitCancel(s.WaitCancel)
	case s.Crash != nil:
		t.a.crash(cmp.Or(s.Crash.Code, 3), "session/prompt")
	case s.Hang != nil:
		t.a.hang("session/prompt")
	case s.Flood != nil:
		t.flood(s.Flood)
	case s.Spawn != nil:
		t.a.spawn(s.Spawn)
	case s.ReadFile != nil:
		t.fileRequest("fs/read_text_file", struct {
			SessionID string `json:"sessionId"`
			*ReadFile
		}{t.sessionID, s.ReadFile})
	case s.WriteFile != nil:
		t.fileRequest("fs/write_text_file", struct {
			SessionID string `json:"sessionId"`
			*WriteFile
		}{t.sessionID, s.WriteFile})
	case s.End != nil:
		t.stopReason = s.End.StopReason
		return true
	}
	return false
}

func (t *turnRun) expand(s string) string {
	return strings.NewReplacer(
		"{{last_tool_result}}", t.a.getLastToolResult(),
		"{{prompt}}", t.prompt,
	).Replace(s)
}

// expandJSON expands the placeholders inside a scenario's JSON strings,
// escaped so the JSON stays valid and every other byte stays as given.
func (t *turnRun) expandJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	escaped := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	return json.RawMessage(strings.NewReplacer(
		"{{last_tool_result}}", escaped(t.a.getLastToolResult()),
		"{{prompt}}", escaped(t.prompt),
	).Replace(string(raw)))
}

func (t *turnRun) update(update any) {
	t.a.conn.notify("session/update", struct {
		SessionID string `json:"sessionId"`
		Update    any    `json:"update"`
	}{t.sessionID, update})
}

func (t *turnRun) chunk(kind, text string) {
	t.update(map[string]any{"sessionUpdate": kind, "content": map[string]string{"type": "text", "text": text}})
}

// toolUpdate sends the scenario's fields as they are, with sessionUpdate
// added.
func (t *turnRun) toolUpdate(kind string, fields json.RawMessage) {
	fields = t.expandJSON(fields)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(fields, &m) // validated as an object
	m["sessionUpdate"] = jsonString(kind)
	t.update(m)
	t.track(fields)
}

// track follows a tool call's status, so a cancelled turn knows which
// calls it left open.
func (t *turnRun) track(fields json.RawMessage) {
	var c struct {
		ToolCallID *string `json:"toolCallId"`
		Status     string  `json:"status"`
	}
	if json.Unmarshal(fields, &c) != nil || c.ToolCallID == nil {
		return
	}
	id := *c.ToolCallID
	done := c.Status == "completed" || c.Status == "failed"
	switch i := slices.Index(t.open, id); {
	case done && i >= 0:
		t.open = slices.Delete(t.open, i, i+1)
	case !done && i < 0:
		t.open = append(t.open, id)
	}
}

// permission asks the client and runs the branch its answer picks.
func (t *turnRun) permission(p *Permission) (ended bool) {
	opts, _ := permissionOptions(p.Options) // validated at load
	options := p.Options
	if options == nil {
		options = json.RawMessage(defaultOptions)
	}
	toolCall := t.expandJSON(p.ToolCall)
	t.track(toolCall)
	res, err := t.a.conn.request(t.root, "session/request_permission", struct {
		SessionID string          `json:"sessionId"`
		ToolCall  json.RawMessage `json:"toolCall,omitempty"`
		Options   json.RawMessage `json:"options"`
	}{t.sessionID, toolCall, options})

	var call struct {
		ToolCallID string `json:"toolCallId"`
	}
	_ = json.Unmarshal(toolCall, &call)
	outcome := struct {
		ToolCallID string `json:"toolCallId,omitempty"`
		Outcome    string `json:"outcome,omitempty"`
		OptionID   string `json:"optionId,omitempty"`
		Kind       string `json:"kind,omitempty"`
		Error      string `json:"error,omitempty"`
	}{ToolCallID: call.ToolCallID}
	if err != nil {
		outcome.Error = err.Error()
		t.a.log.note("permission outcome", outcome)
		return errors.Is(err, errClientGone)
	}
	var answer struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if err := json.Unmarshal(res, &answer); err != nil {
		outcome.Error = "unreadable answer: " + err.Error()
	}
	outcome.Outcome, outcome.OptionID = answer.Outcome.Outcome, answer.Outcome.OptionID
	if i := slices.IndexFunc(opts, func(o option) bool { return o.OptionID == outcome.OptionID }); i >= 0 {
		outcome.Kind = opts[i].Kind
	}
	t.a.log.note("permission outcome", outcome)

	switch outcome.Outcome {
	case "cancelled":
		t.refused = true
		return t.runSteps(p.OnCancelled)
	case "selected":
		if steps, ok := p.OnSelected[outcome.OptionID]; ok {
			return t.runSteps(steps)
		}
		switch {
		case strings.HasPrefix(outcome.Kind, "allow_"):
			return t.runSteps(p.OnAllow)
		case strings.HasPrefix(outcome.Kind, "reject_"):
			return t.runSteps(p.OnReject)
		}
	}
	return false
}

func (t *turnRun) waitCancel(w *WaitCancel) (ended bool) {
	<-t.ctx.Done()
	if t.root.Err() != nil {
		return true
	}
	t.a.log.note("cancel seen", nil)
	if w.OnCancelled != nil {
		t.runSteps(w.OnCancelled)
		return true
	}
	return false
}

// mcpCall calls a tool the way agents do: abandoned on session/cancel
// unless the step says otherwise.
func (t *turnRun) mcpCall(c *MCPCall) {
	ctx := t.ctx
	if c.IgnoreCancel {
		ctx = t.root
	}
	if !c.Async {
		t.a.mcp.callTool(ctx, c, t.a.setLastToolResult)
		return
	}
	t.a.handlers.Go(func() { t.a.mcp.callTool(ctx, c, t.a.setLastToolResult) })
}

// flood streams text as fast as stdout takes it. Its frames skip the log,
// which would otherwise double the I/O the test measures.
func (t *turnRun) flood(f *Flood) {
	chunk := f.Chunk
	if chunk <= 0 || chunk > f.Bytes {
		chunk = f.Bytes
	}
	frames := (f.Bytes + chunk - 1) / chunk
	t.a.log.note("flood", map[string]int{"bytes": f.Bytes, "chunk": chunk, "frames": frames})
	piece := strings.Repeat("x", chunk)
	for left := f.Bytes; left > 0; left -= chunk {
		text := piece[:min(chunk, left)]
		params := mustJSON(struct {
			SessionID string `json:"sessionId"`
			Update    any    `json:"update"`
		}{t.sessionID, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}}})
		t.a.conn.sendFrame(frame{Method: "session/update", Params: params}, false)
	}
}

// fileRequest asks the client for a file operation and logs its answer.
func (t *turnRun) fileRequest(method string, params any) {
	res, err := t.a.conn.request(t.root, method, params)
	result := struct {
		Result json.RawMessage `json:"result,omitempty"`
		Error  string          `json:"error,omitempty"`
	}{Result: res}
	if err != nil {
		result.Error = err.Error()
	}
	t.a.log.note(method+" result", result)
}

// spawn starts a child the agent never waits for: outliving the agent is
// the point, so runnel's cleanup has something to find.
func (a *agent) spawn(s *Spawn) {
	argv := s.Argv
	if len(argv) == 0 {
		argv = []string{"sleep", "300"}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if s.Setsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if s.HoldStdout {
		cmd.Stdout, cmd.Stderr = a.stdout, a.stderr
	}
	record := map[string]any{"argv": argv, "setsid": s.Setsid, "holdStdout": s.HoldStdout}
	if err := cmd.Start(); err != nil {
		record["error"] = err.Error()
		a.log.note("spawn", record)
		return
	}
	record["pid"] = cmd.Process.Pid
	if pgid, err := syscall.Getpgid(cmd.Process.Pid); err == nil {
		record["pgid"] = pgid
	}
	a.log.note("spawn", record)
	// Reaps the child should it end while the agent still runs.
	go func() { _ = cmd.Wait() }()
}
