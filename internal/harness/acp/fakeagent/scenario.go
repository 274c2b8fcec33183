package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Scenario is everything the fake agent does, read once at start. A zero
// Scenario is a well-behaved agent with no turns.
type Scenario struct {
	Initialize Initialize `json:"initialize"`
	NewSession NewSession `json:"newSession"`
	// SetMode is how session/set_mode answers (it answers {} and records
	// the mode by default; an unknown mode id is an invalid-params error).
	SetMode Answer `json:"setMode"`
	// IDStyle is "int" (the default: 0, 1, 2, …) or "string" (UUID-shaped,
	// as old Codex sent them): the ids of the fake's requests to the client.
	IDStyle string `json:"idStyle"`
	// HomeFiles are paths under $HOME whose presence (and content) the fake
	// logs at start, to check the files runnel wrote for the agent.
	HomeFiles []string `json:"homeFiles"`
	// LeaveInProgressOnCancel mimics Codex 2.6: a cancelled turn sends no
	// final tool_call_update. Otherwise every call the turn left open is
	// closed with status "failed" before stopReason "cancelled".
	LeaveInProgressOnCancel bool `json:"leaveInProgressOnCancel"`
	// MCPProtocolVersion is the MCP version the fake's MCP client asks for
	// (default "2025-11-25": initialize + notifications/initialized;
	// "2026-07-28" probes server/discover first, as Claude does; "2025-06-18"
	// is Codex's).
	MCPProtocolVersion string `json:"mcpProtocolVersion"`
	// Turns answer session/prompt: the first whose condition holds runs.
	Turns []Turn `json:"turns"`
}

// Answer is how the fake answers one client request. Hang and Crash act
// before the answer (after Delay); Error replaces the result.
type Answer struct {
	Delay Duration `json:"delay"`
	// Hang stops the whole agent: it never answers, reads or writes again.
	Hang bool `json:"hang"`
	// Crash exits with status 3 without answering.
	Crash bool      `json:"crash"`
	Error *rpcError `json:"error"`
}

// Initialize is the initialize answer. Every raw field is sent exactly as
// given; absent means the default.
type Initialize struct {
	Answer
	// ProtocolVersion defaults to 1.
	ProtocolVersion json.RawMessage `json:"protocolVersion"`
	// AgentCapabilities default to loadSession false, mcpCapabilities
	// {http: true, sse: false}, promptCapabilities {image, embeddedContext}.
	AgentCapabilities json.RawMessage `json:"agentCapabilities"`
	// AuthMethods default to [].
	AuthMethods json.RawMessage `json:"authMethods"`
	// AgentInfo defaults to {"name":"fakeagent","version":"0.0.0"}.
	AgentInfo json.RawMessage `json:"agentInfo"`
}

// NewSession is the session/new answer.
type NewSession struct {
	Answer
	// SessionID defaults to "fake-session-<n>", n counting session/new calls.
	SessionID string `json:"sessionId"`
	// Modes is the SessionModeState reported; absent means modes "auto"
	// (current) and "default", as Claude 0.101 reports; null reports none.
	Modes json.RawMessage `json:"modes"`
}

// Turn answers one session/prompt whose text (the prompt's text blocks,
// joined by newlines) contains WhenPromptContains (empty matches any),
// while the session is in mode WhenMode (empty matches any), so a scenario
// can behave like Claude, which asks permission only in mode "default".
type Turn struct {
	WhenPromptContains string `json:"whenPromptContains"`
	WhenMode           string `json:"whenMode"`
	Steps              []Step `json:"steps"`
	// StopReason defaults to "end_turn". A cancelled turn answers
	// "cancelled" instead, and an end step's stopReason beats both.
	StopReason string `json:"stopReason"`
}

// Step is one thing the fake does inside a turn: exactly one field is set.
// Placeholders {{last_tool_result}} (the text of the latest MCP tool result,
// or "error: …") and {{prompt}} are expanded in text, thought, and the
// strings of toolCall, toolCallUpdate and a permission's toolCall.
type Step struct {
	Text    *string `json:"text,omitempty"`
	Thought *string `json:"thought,omitempty"`
	// ToolCall and ToolCallUpdate are the update's fields, sent exactly as
	// given with sessionUpdate added, so a scenario can omit kind or
	// rawInput, repeat an id, send a status backwards or name an id never
	// announced.
	ToolCall       json.RawMessage `json:"toolCall,omitempty"`
	ToolCallUpdate json.RawMessage `json:"toolCallUpdate,omitempty"`
	Permission     *Permission     `json:"permission,omitempty"`
	MCPCall        *MCPCall        `json:"mcpCall,omitempty"`
	MCPListTools   *MCPListTools   `json:"mcpListTools,omitempty"`
	// Notify sends any notification, e.g. a session/update of an unknown kind.
	Notify *Notify `json:"notify,omitempty"`
	// Raw is written to stdout as one line, as is (malformed JSON, a
	// response to an id nobody asked), but for {{session_id}}.
	Raw   *string   `json:"raw,omitempty"`
	Sleep *Duration `json:"sleep,omitempty"`
	// WaitCancel blocks until session/cancel arrives (at once if it already
	// has), then runs its OnCancelled steps, or the rest of the turn.
	WaitCancel *WaitCancel `json:"waitCancel,omitempty"`
	Crash      *Crash      `json:"crash,omitempty"`
	// Hang stops the whole agent: it never reads, answers or writes again.
	Hang      *struct{}  `json:"hang,omitempty"`
	Flood     *Flood     `json:"flood,omitempty"`
	Spawn     *Spawn     `json:"spawn,omitempty"`
	ReadFile  *ReadFile  `json:"readFile,omitempty"`
	WriteFile *WriteFile `json:"writeFile,omitempty"`
	// End ends the turn here, from any depth of branches.
	End *End `json:"end,omitempty"`
}

// Permission sends session/request_permission and waits for the client's
// answer (session/cancel does not resolve it: the client must answer), then
// runs the first branch that applies: OnSelected[optionId], else OnAllow or
// OnReject by the chosen option's kind, or OnCancelled. The turn then goes on
// unless the branch ended it.
type Permission struct {
	// ToolCall is sent as given.
	ToolCall json.RawMessage `json:"toolCall"`
	// Options are sent as given; absent means Claude 0.101's set:
	// allow-once (allow_once), allow-with-updates (allow_always), reject
	// (reject_once).
	Options     json.RawMessage   `json:"options"`
	OnSelected  map[string][]Step `json:"onSelected"`
	OnAllow     []Step            `json:"onAllow"`
	OnReject    []Step            `json:"onReject"`
	OnCancelled []Step            `json:"onCancelled"`
}

// MCPCall calls Tool on the MCP server Server from session/new, with that
// server's headers, as a streamable HTTP MCP client.
type MCPCall struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Arguments default to {}.
	Arguments json.RawMessage `json:"arguments"`
	// Timeout bounds the call (connecting included); zero waits as long as
	// it takes.
	Timeout Duration `json:"timeout"`
	// Async starts the call and goes on; the result is logged when it
	// arrives, and may outlive the turn.
	Async bool `json:"async"`
	// IgnoreCancel keeps waiting for the result after session/cancel.
	// Otherwise the call is abandoned the way real agents do it
	// (notifications/cancelled to the server).
	IgnoreCancel bool `json:"ignoreCancel"`
}

// MCPListTools logs the tools Server advertises.
type MCPListTools struct {
	Server string `json:"server"`
}

// Notify is a notification sent as given: Method with Params, or, when
// Update is set, a session/update of the prompt's session carrying Update
// (usage_update, _auth/status_update, a made-up kind…).
type Notify struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Update json.RawMessage `json:"update"`
}

// WaitCancel waits for session/cancel.
type WaitCancel struct {
	// OnCancelled, when set, runs instead of the rest of the turn.
	OnCancelled []Step `json:"onCancelled"`
}

// Crash exits the agent mid-turn.
type Crash struct {
	// Code is the exit status, 3 by default.
	Code int `json:"code"`
}

// Flood streams Bytes of agent_message_chunk text as fast as it can, in
// chunks of Chunk bytes; Chunk zero (or ≥ Bytes) sends one huge line.
// The frames are not logged one by one (a note says what was sent).
type Flood struct {
	Bytes int `json:"bytes"`
	Chunk int `json:"chunk"`
}

// Spawn starts a child process and logs its pid, to test that runnel's
// cleanup reaches the agent's descendants.
type Spawn struct {
	// Argv defaults to ["sleep", "300"].
	Argv []string `json:"argv"`
	// Setsid starts the child in a new session (escaping the agent's
	// process group); otherwise it stays in the agent's group.
	Setsid bool `json:"setsid"`
	// HoldStdout gives the child the agent's stdout and stderr, so the
	// pipe stays open after the agent exits (as a stray helper would).
	HoldStdout bool `json:"holdStdout"`
}

// ReadFile sends fs/read_text_file and logs the answer.
type ReadFile struct {
	Path  string `json:"path"`
	Line  *int   `json:"line,omitempty"`
	Limit *int   `json:"limit,omitempty"`
}

// WriteFile sends fs/write_text_file and logs the answer.
type WriteFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// End ends the turn.
type End struct {
	// StopReason overrides the turn's, even "cancelled"; empty keeps it.
	StopReason string `json:"stopReason"`
}

// Duration is a time.Duration written as a Go duration string ("250ms").
type Duration time.Duration

// UnmarshalJSON reads "1.5s"-style strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// parseScenario decodes a scenario strictly, so a misspelt field fails the
// test that wrote it instead of silently doing nothing.
func parseScenario(data []byte) (*Scenario, error) {
	var s Scenario
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return &s, nil
}

func (s *Scenario) validate() error {
	switch s.IDStyle {
	case "", "int", "string":
	default:
		return fmt.Errorf("idStyle %q: want \"int\" or \"string\"", s.IDStyle)
	}
	for i, t := range s.Turns {
		if err := validateSteps(t.Steps); err != nil {
			return fmt.Errorf("turns[%d]: %w", i, err)
		}
	}
	return nil
}

func validateSteps(steps []Step) error {
	for i := range steps {
		if err := steps[i].validate(); err != nil {
			return fmt.Errorf("steps[%d]: %w", i, err)
		}
	}
	return nil
}

func (s *Step) validate() error {
	set := 0
	for _, isSet := range []bool{
		s.Text != nil, s.Thought != nil, s.ToolCall != nil, s.ToolCallUpdate != nil,
		s.Permission != nil, s.MCPCall != nil, s.MCPListTools != nil, s.Notify != nil,
		s.Raw != nil, s.Sleep != nil, s.WaitCancel != nil, s.Crash != nil, s.Hang != nil,
		s.Flood != nil, s.Spawn != nil, s.ReadFile != nil, s.WriteFile != nil, s.End != nil,
	} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("a step sets exactly one field, this one sets %d", set)
	}
	for _, obj := range []json.RawMessage{s.ToolCall, s.ToolCallUpdate} {
		if obj != nil && !isObject(obj) {
			return errors.New("toolCall and toolCallUpdate must be objects")
		}
	}
	switch {
	case s.Permission != nil:
		p := s.Permission
		if _, err := permissionOptions(p.Options); err != nil {
			return err
		}
		for id, steps := range p.OnSelected {
			if err := validateSteps(steps); err != nil {
				return fmt.Errorf("onSelected[%q]: %w", id, err)
			}
		}
		for name, steps := range map[string][]Step{"onAllow": p.OnAllow, "onReject": p.OnReject, "onCancelled": p.OnCancelled} {
			if err := validateSteps(steps); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	case s.WaitCancel != nil:
		return validateSteps(s.WaitCancel.OnCancelled)
	case s.MCPCall != nil && (s.MCPCall.Server == "" || s.MCPCall.Tool == ""):
		return errors.New("mcpCall needs server and tool")
	case s.Notify != nil && (s.Notify.Method == "") == (s.Notify.Update == nil):
		return errors.New("notify needs a method (and params) or an update, not both")
	case s.Flood != nil && s.Flood.Bytes <= 0:
		return errors.New("flood needs bytes > 0")
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// option is the part of a permission option the fake decides by.
type option struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

// defaultOptions are Claude 0.101's, in its order.
const defaultOptions = `[` +
	`{"optionId":"allow-once","name":"Yes","kind":"allow_once"},` +
	`{"optionId":"allow-with-updates","name":"Yes, and don't ask again","kind":"allow_always"},` +
	`{"optionId":"reject","name":"No","kind":"reject_once"}]`

// permissionOptions returns the options to send and their decoded form.
func permissionOptions(raw json.RawMessage) ([]option, error) {
	if raw == nil {
		raw = json.RawMessage(defaultOptions)
	}
	var opts []option
	if err := json.Unmarshal(raw, &opts); err != nil {
		return nil, fmt.Errorf("permission options: %w", err)
	}
	return opts, nil
}

// match returns the first turn whose conditions hold.
func (s *Scenario) match(prompt, mode string) *Turn {
	for i := range s.Turns {
		t := &s.Turns[i]
		if strings.Contains(prompt, t.WhenPromptContains) && (t.WhenMode == "" || t.WhenMode == mode) {
			return t
		}
	}
	return nil
}
