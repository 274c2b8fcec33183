package acp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/runnel/runnel/internal/harness"
)

// frame is a tool_call or tool_call_update, or the toolCall of a
// permission request, decoded by runnel itself: every field may be
// missing, and the ACP SDK's types lack toolCall.name.
type frame struct {
	ToolCallID json.RawMessage `json:"toolCallId"`
	Title      *string         `json:"title"`
	Kind       *string         `json:"kind"`
	Status     *string         `json:"status"`
	Name       *string         `json:"name"`
	RawInput   json.RawMessage `json:"rawInput"`
	RawOutput  json.RawMessage `json:"rawOutput"`
	Content    json.RawMessage `json:"content"`
	Meta       json.RawMessage `json:"_meta"`
}

// id is the frame's toolCallId as a string, whether the agent sent a
// string or a number; "" when it sent none.
func (f *frame) id() string {
	raw := bytes.TrimSpace(f.ToolCallID)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// unwrapConfirm reads the permission request of runnel's Pi extension:
// pi-acp turns the extension's confirm dialog into a request whose
// toolCall is the dialog (its own id, kind "other"), so the extension
// puts the real call in the dialog's message as JSON, marked
// "runnel.pi.permission/v1". The frame becomes that call.
func (f *frame) unwrapConfirm() {
	var dialog struct {
		Method  string `json:"method"`
		Message string `json:"message"`
	}
	if json.Unmarshal(f.RawInput, &dialog) != nil || dialog.Method != "confirm" {
		return
	}
	var call struct {
		Runnel     string          `json:"runnel"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Input      json.RawMessage `json:"input"`
	}
	if json.Unmarshal([]byte(dialog.Message), &call) != nil || call.Runnel != "runnel.pi.permission/v1" || call.ToolName == "" {
		return
	}
	id, _ := json.Marshal(call.ToolCallID)
	name := call.ToolName
	f.ToolCallID, f.Name, f.RawInput, f.Kind = id, &name, call.Input, nil
}

// programmaticName is the name the agent's code knows the tool by:
// toolCall.name (ACP 1.22), or Claude's _meta.claudeCode.toolName.
func (f *frame) programmaticName() string {
	if f.Name != nil && *f.Name != "" {
		return *f.Name
	}
	var meta struct {
		ClaudeCode struct {
			ToolName string `json:"toolName"`
		} `json:"claudeCode"`
	}
	if len(f.Meta) > 0 && json.Unmarshal(f.Meta, &meta) == nil {
		return meta.ClaudeCode.ToolName
	}
	return ""
}

// The statuses of a tool call, in the order they may only advance.
const (
	statusPending    = "pending"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

func statusRank(s string) int {
	switch s {
	case statusInProgress:
		return 1
	case statusCompleted, statusFailed:
		return 2
	}
	return 0
}

// call is one tool call of the turn as runnel knows it, from the agent's
// frames, its permission request, and runnel's server.
type call struct {
	// id is the call's id in runnel's events and messages: the agent's
	// toolCallId, or one runnel made up for a tools/call no frame named.
	id      string
	agentID string
	name    string // the programmatic name, once known
	title   string
	kind    string
	status  string
	// input is the latest non-empty arguments the agent sent.
	input   json.RawMessage
	content json.RawMessage
	output  json.RawMessage

	// ref is who owns the call and what the plan calls it.
	ref harness.AgentCall
	// viaServer: runnel's server received the call (it runs it, and its
	// result is the call's result, whatever the frames say).
	viaServer bool
	emitted   bool // the tool_call event went out
	settled   bool // the tool_result event went out
	parked    bool // the turn paused on it
}

// known reports whether the call's arguments are known: a frame's {} is
// often a placeholder the agent fills later.
func (c *call) known() bool {
	t := strings.TrimSpace(string(c.args()))
	return t != "" && t != "{}" && t != "null"
}

// args are the call's arguments as its tool reads them (Codex wraps an
// MCP call's in {server, tool, arguments}).
func (c *call) args() json.RawMessage {
	if len(c.ref.Input) > 0 {
		return c.ref.Input
	}
	return c.input
}

// tracker ties the agent's frames and runnel's tools/call requests into
// calls. Frames are upserts by toolCallId (a tool_call may come twice, or
// never, before its updates); a status never goes back. A tools/call is
// tied to the one frame whose tool and arguments agree, each frame once;
// a frame whose arguments are unknown is tied only when it is the only
// candidate. Never "the first call with that name" when the arguments
// disagree. It is not safe for concurrent use: the session holds its lock.
type tracker struct {
	namer   *namer
	byAgent map[string]*call
	all     []*call
	// changed is closed, and replaced, on every frame: a permission
	// request waiting for the frame that names its call wakes up.
	changed chan struct{}
}

func newTracker(n *namer) *tracker {
	return &tracker{namer: n, byAgent: map[string]*call{}, changed: make(chan struct{})}
}

// signal wakes whoever waits for a frame.
func (t *tracker) signal() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// upsert applies a frame and returns its call.
func (t *tracker) upsert(f *frame) *call {
	defer t.signal()
	agentID := f.id()
	c := t.byAgent[agentID]
	if c == nil || agentID == "" {
		c = &call{id: agentID, agentID: agentID}
		if c.id == "" {
			c.id = newCallID()
		}
		if agentID != "" {
			t.byAgent[agentID] = c
		}
		t.all = append(t.all, c)
	}
	if name := f.programmaticName(); name != "" {
		c.name = name
	}
	if f.Title != nil && *f.Title != "" {
		c.title = *f.Title
	}
	if f.Kind != nil && *f.Kind != "" {
		c.kind = *f.Kind
	}
	if f.Status != nil && statusRank(*f.Status) >= statusRank(c.status) && !c.done() {
		c.status = *f.Status
	}
	if in := bytes.TrimSpace(f.RawInput); !c.viaServer && len(in) > 0 && string(in) != "null" && (string(in) != "{}" || !c.known()) {
		c.input = append(json.RawMessage(nil), in...)
	}
	if in := contentArgs(f); !c.viaServer && len(f.RawInput) == 0 && in != nil && !c.known() && (f.Status == nil || *f.Status == statusPending) {
		c.input = in
	}
	if len(f.Content) > 0 && string(f.Content) != "null" {
		c.content = append(json.RawMessage(nil), f.Content...)
	}
	if len(f.RawOutput) > 0 && string(f.RawOutput) != "null" {
		c.output = append(json.RawMessage(nil), f.RawOutput...)
	}
	if c.viaServer {
		// runnel's server read the arguments itself; a frame only adds
		// the agent's labels.
		c.ref.Title = c.title
		return c
	}
	c.ref = t.namer.identify(c.name, c.title, c.kind, c.input)
	if c.ref.Owner == harness.OwnerRunnel {
		if s := t.adoptServerCall(c); s != nil {
			return s
		}
	}
	return c
}

func (c *call) done() bool { return c.status == statusCompleted || c.status == statusFailed }

// adoptServerCall ties frame call c to a tools/call runnel received before
// the agent's frame came, when their tool and arguments agree: the two are
// one call, under the id runnel already used for it.
func (t *tracker) adoptServerCall(c *call) *call {
	if c.agentID == "" {
		return nil
	}
	for _, s := range t.all {
		if s == c || !s.viaServer || s.agentID != "" || s.ref.Name != c.ref.Name || !sameArgs(s.input, c.args()) {
			continue
		}
		// The frame's call merges into the server's: events and messages
		// keep the id they were given.
		s.agentID = c.agentID
		s.name, s.title, s.kind = c.name, c.title, c.kind
		s.ref.Title = c.title
		t.byAgent[c.agentID] = s
		t.remove(c)
		return s
	}
	return nil
}

func (t *tracker) remove(c *call) {
	for i, x := range t.all {
		if x == c {
			t.all = append(t.all[:i], t.all[i+1:]...)
			return
		}
	}
}

// fromServer returns the call of a tools/call for runnel's tool name with
// arguments input (checked): the frame the request names (agentID: Claude
// and Codex put the ACP toolCallId in the request's _meta), else the
// agent's frame for it when exactly one untied frame agrees, else a call
// of its own.
func (t *tracker) fromServer(name string, input json.RawMessage, agentID string) *call {
	defer t.signal()
	if agentID != "" {
		c := t.byAgent[agentID]
		if c == nil {
			c = &call{id: agentID, agentID: agentID, name: name}
			t.byAgent[agentID] = c
			t.all = append(t.all, c)
		}
		if !c.viaServer && !c.done() && (c.ref.Name == name || c.ref.Name == "") {
			return t.tie(c, name, input)
		}
	}
	var agree, unknown []*call
	for _, c := range t.all {
		if c.viaServer || c.ref.Owner != harness.OwnerRunnel || c.ref.Name != name || c.done() {
			continue
		}
		switch {
		case c.known() && sameArgs(c.args(), input):
			agree = append(agree, c)
		case !c.known():
			unknown = append(unknown, c)
		}
	}
	var c *call
	switch {
	case len(agree) > 0:
		c = agree[0]
	case len(unknown) == 1:
		c = unknown[0]
	default:
		c = &call{id: newCallID(), name: name}
		t.all = append(t.all, c)
	}
	return t.tie(c, name, input)
}

// tie makes c the call runnel's server received, with its arguments.
func (t *tracker) tie(c *call, name string, input json.RawMessage) *call {
	c.viaServer = true
	c.input = input
	c.ref = harness.AgentCall{Call: harness.Call{Name: name, Input: input}, Owner: harness.OwnerRunnel, Title: c.title}
	return c
}

// contentItem is one item of a tool call's content: a content block
// ("content", its text), a diff (its path and new text) or a terminal.
type contentItem struct {
	Type    string `json:"type"`
	Content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Path    string  `json:"path"`
	NewText *string `json:"newText"`
}

// contentArgs reads a call's arguments from its content when that is one
// text block holding a JSON object: Gemini sends them only that way.
func contentArgs(f *frame) json.RawMessage {
	var blocks []contentItem
	if json.Unmarshal(f.Content, &blocks) != nil || len(blocks) != 1 || blocks[0].Content.Type != "text" {
		return nil
	}
	var obj map[string]json.RawMessage
	text := []byte(blocks[0].Content.Text)
	if json.Unmarshal(text, &obj) != nil || obj == nil {
		return nil
	}
	return text
}

// open are the calls that have neither a result nor a pause.
func (t *tracker) open() []*call {
	var out []*call
	for _, c := range t.all {
		if c.emitted && !c.settled && !c.parked {
			out = append(out, c)
		}
	}
	return out
}

// sameArgs reports whether two argument objects are the same JSON value.
func sameArgs(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ca, err1 := json.Marshal(x)
	cb, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// newCallID is an id for a call the agent named no id for.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}

// resultText is what a finished agent call produced, for its tool_result:
// the text of its content (text blocks, diffs, terminal output), else its
// rawOutput.
func (c *call) resultText() string {
	var blocks []contentItem
	var parts []string
	if json.Unmarshal(c.content, &blocks) == nil {
		for _, b := range blocks {
			switch {
			case b.Type == "content" && b.Content.Type == "text":
				parts = append(parts, b.Content.Text)
			case b.Type == "diff" && b.NewText != nil:
				parts = append(parts, "wrote "+b.Path)
			}
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "\n")
	}
	var s string
	if json.Unmarshal(c.output, &s) == nil {
		return s
	}
	if len(c.output) > 0 {
		return string(c.output)
	}
	return ""
}
