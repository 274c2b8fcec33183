package uistream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// ChatRequest is the body of POST /v1/chat: the AI SDK DefaultChatTransport
// body (id, messages, trigger, messageId), runnel's compat and profile, and
// any run field of DESIGN §3.1 but messages, which the UIMessages replace.
type ChatRequest struct {
	runnel.RunRequest
	// ID is the chat's id (useChat's id).
	ID        string      `json:"id"`
	Messages  []UIMessage `json:"messages"`
	Trigger   string      `json:"trigger"`
	MessageID string      `json:"messageId"`
	// Compat names the Profile; the X-Runnel-Compat header may name it
	// instead.
	Compat string `json:"compat"`
	// Profile names a server-side run profile.
	Profile string `json:"profile"`
}

// UIMessage is one message of a useChat conversation.
type UIMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Parts    []UIPart        `json:"parts"`
}

// UIPart is one part of a UIMessage. Which fields are set depends on Type:
// "text", "reasoning", "file", "step-start", "tool-<name>",
// "dynamic-tool", "data-<name>", "source-url", "source-document".
type UIPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	State      string          `json:"state,omitempty"`
	MediaType  string          `json:"mediaType,omitempty"`
	URL        string          `json:"url,omitempty"`
	Filename   string          `json:"filename,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	Approval   *Approval       `json:"approval,omitempty"`
	// ID and Data belong to data parts.
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Approval is a tool part's approval: requested (ID, Signature) or
// answered (Approved, Reason).
type Approval struct {
	ID        string `json:"id"`
	Approved  *bool  `json:"approved,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// The tool part states of the AI SDK (ai@5 has the first four and the
// two output ones).
const (
	StateInputStreaming    = "input-streaming"
	StateInputAvailable    = "input-available"
	StateApprovalRequested = "approval-requested"
	StateApprovalResponded = "approval-responded"
	StateOutputAvailable   = "output-available"
	StateOutputError       = "output-error"
	StateOutputDenied      = "output-denied"
)

// Runnel's data parts. data-runnel-interaction is kept in the message (the
// client sends it back, so a resume knows an interaction's render, kind and
// signature whatever the client version); the others are transient.
const (
	DataInteraction = "data-runnel-interaction"
	DataNotice      = "data-runnel-notice"
	DataUsage       = "data-runnel-usage"
	DataResult      = "data-runnel-result"
)

// InteractionData is the data of a data-runnel-interaction part.
type InteractionData struct {
	InteractionID string                 `json:"interactionId"`
	Kind          runnel.InteractionKind `json:"kind"`
	ToolCallID    string                 `json:"toolCallId"`
	ToolName      string                 `json:"toolName"`
	Input         json.RawMessage        `json:"input"`
	Options       []string               `json:"options,omitempty"`
	Render        json.RawMessage        `json:"render,omitempty"`
	Signature     string                 `json:"signature,omitempty"`
}

// Decode reads a /v1/chat body with the rules of every body runnel reads
// (internal/strictjson: exact names, no name twice). The caller bounds its
// size.
func Decode(body []byte) (*ChatRequest, error) {
	var c ChatRequest
	if err := strictjson.Unmarshal(body, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// Conversation is what a chat's UIMessages mean to a run.
type Conversation struct {
	Messages []runnel.Message
	// Continued is the id of the last message when it is the assistant's:
	// the answer continues it (a resume after an approval or a client
	// tool's output), and its tool calls are in Tools.
	Continued string
	// Tools are the tool calls of the continued message, by id, with the
	// part type the client keeps them under.
	Tools map[string]ToolRef
	// Earlier are the ids of tool calls in messages before it: the client
	// cannot update them any more.
	Earlier map[string]bool
}

// ToolRef is a tool call the client already shows.
type ToolRef struct {
	Name    string
	Dynamic bool
	// Input is the call's input.
	Input json.RawMessage
	// Answered says the request answers the call's approval and carries
	// no result for it yet; Approved is the answer. The answer's outcome
	// settles the part: the call's result, or its denial.
	Answered, Approved bool
}

// Convert turns UIMessages into runnel's conversation. A tool part becomes
// a tool_call block and, by state: approval-responded an approval answer
// (kind "approval", with the interaction id and signature), output-available
// and output-error the result (kind "client_output" for a client tool, and
// for an ai@5 approval answered as a client tool: an approval),
// output-denied a denied result; input-streaming parts are dropped (the
// call was never made). isClient reports the run's client tools.
func Convert(msgs []UIMessage, isClient func(name string) bool) (*Conversation, error) {
	c := &Conversation{Tools: map[string]ToolRef{}, Earlier: map[string]bool{}}
	for i, m := range msgs {
		last := i == len(msgs)-1
		switch m.Role {
		case "system":
			c.Messages = append(c.Messages, runnel.Message{Role: runnel.RoleSystem, Content: textOnly(m.Parts)})
		case "user":
			blocks, err := userBlocks(i, m.Parts)
			if err != nil {
				return nil, err
			}
			c.Messages = append(c.Messages, runnel.Message{Role: runnel.RoleUser, Content: blocks})
		case "assistant":
			msgs, tools, err := assistantMessages(i, m.Parts, isClient)
			if err != nil {
				return nil, err
			}
			c.Messages = append(c.Messages, msgs...)
			// A message without an id cannot be continued: the answer
			// is a new message, and the client cannot update its calls.
			if last && m.ID != "" {
				c.Continued, c.Tools = m.ID, tools
			} else {
				for id := range tools {
					c.Earlier[id] = true
				}
			}
		default:
			return nil, fmt.Errorf("messages[%d] has role %q; a UIMessage's role is \"user\", \"assistant\" or \"system\"", i, m.Role)
		}
	}
	return c, nil
}

func textOnly(parts []UIPart) []runnel.Block {
	var out []runnel.Block
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, runnel.Block{Type: runnel.BlockText, Text: p.Text})
		}
	}
	return out
}

func userBlocks(i int, parts []UIPart) ([]runnel.Block, error) {
	var out []runnel.Block
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, runnel.Block{Type: runnel.BlockText, Text: p.Text})
		case "file":
			b, err := fileBlock(p)
			if err != nil {
				return nil, fmt.Errorf("messages[%d].parts[%d]: %w", i, j, err)
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// fileBlock reads a file part: a data: URL becomes inline data, an http(s)
// URL a reference; anything else is refused rather than dropped.
func fileBlock(p UIPart) (runnel.Block, error) {
	kind := runnel.BlockResource
	if strings.HasPrefix(p.MediaType, "image/") {
		kind = runnel.BlockImage
	}
	b := runnel.Block{Type: kind, MimeType: p.MediaType, Filename: p.Filename}
	switch u := p.URL; {
	case strings.HasPrefix(u, "data:"):
		meta, payload, ok := strings.Cut(u[len("data:"):], ",")
		if !ok {
			return b, fmt.Errorf("the file's data URL has no comma; send data:<type>;base64,<data>")
		}
		if strings.HasSuffix(meta, ";base64") {
			raw, err := base64.StdEncoding.DecodeString(payload)
			if err != nil {
				return b, fmt.Errorf("the file's data URL is not valid base64: %w", err)
			}
			b.Data = base64.StdEncoding.EncodeToString(raw)
		} else {
			raw, err := url.PathUnescape(payload)
			if err != nil {
				return b, fmt.Errorf("the file's data URL is not valid: %w", err)
			}
			b.Data = base64.StdEncoding.EncodeToString([]byte(raw))
		}
		if b.MimeType == "" {
			b.MimeType, _, _ = strings.Cut(meta, ";")
		}
	case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"):
		b.URI = u
	default:
		return b, fmt.Errorf("the file's url must be a data: or http(s) URL, not %q", clip(u, 40))
	}
	return b, nil
}

// assistantMessages splits an assistant UIMessage at its step-start parts
// into runnel's assistant messages, each followed by a tool message with
// the results its step's calls have.
func assistantMessages(i int, parts []UIPart, isClient func(string) bool) ([]runnel.Message, map[string]ToolRef, error) {
	approvals := interactions(parts)
	tools := map[string]ToolRef{}
	var out []runnel.Message
	var calls, results []runnel.Block
	flush := func() {
		if len(calls) > 0 {
			out = append(out, runnel.Message{Role: runnel.RoleAssistant, Content: calls})
		}
		if len(results) > 0 {
			out = append(out, runnel.Message{Role: runnel.RoleTool, Content: results})
		}
		calls, results = nil, nil
	}
	for j, p := range parts {
		switch {
		case p.Type == "step-start":
			flush()
		case p.Type == "text":
			calls = append(calls, runnel.Block{Type: runnel.BlockText, Text: p.Text})
		case p.Type == "reasoning":
			calls = append(calls, runnel.Block{Type: runnel.BlockReasoning, Text: p.Text})
		case p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-"):
			name, dynamic := strings.TrimPrefix(p.Type, "tool-"), p.Type == "dynamic-tool"
			if dynamic {
				name = p.ToolName
			}
			if p.ToolCallID == "" || name == "" {
				return nil, nil, fmt.Errorf("messages[%d].parts[%d] is a tool part without a toolCallId or tool name", i, j)
			}
			if p.State == StateInputStreaming {
				continue
			}
			input := orEmptyObject(p.Input)
			calls = append(calls, runnel.Block{Type: runnel.BlockToolCall, ToolCallID: p.ToolCallID, ToolName: name, Input: input})
			r, ok, err := toolResult(p, name, isClient(name), approvals[p.ToolCallID])
			if err != nil {
				return nil, nil, fmt.Errorf("messages[%d].parts[%d]: %w", i, j, err)
			}
			ref := ToolRef{Name: name, Dynamic: dynamic, Input: input}
			if ok {
				results = append(results, r)
				ref.Answered = r.Kind == runnel.ResultKindApproval
				ref.Approved = ref.Answered && approvedAnswer(r.Output)
			}
			tools[p.ToolCallID] = ref
		}
	}
	flush()
	return out, tools, nil
}

// interactions reads the data-runnel-interaction parts of a message, by
// tool call id.
func interactions(parts []UIPart) map[string]InteractionData {
	out := map[string]InteractionData{}
	for _, p := range parts {
		if p.Type != DataInteraction {
			continue
		}
		var d InteractionData
		if strictjson.Unmarshal(p.Data, &d) == nil && d.ToolCallID != "" {
			out[d.ToolCallID] = d
		}
	}
	return out
}

// toolResult is the block a tool part's state answers its call with, if
// any.
func toolResult(p UIPart, name string, client bool, it InteractionData) (runnel.Block, bool, error) {
	b := runnel.Block{Type: runnel.BlockToolResult, ToolCallID: p.ToolCallID, ToolName: name}
	switch p.State {
	case "", StateInputAvailable, StateApprovalRequested:
		return b, false, nil
	case StateApprovalResponded:
		a := p.Approval
		if a == nil || a.Approved == nil {
			return b, false, fmt.Errorf("tool call %q is in state approval-responded without approval.approved", p.ToolCallID)
		}
		return approvalBlock(b, *a.Approved, a.Reason, orString(a.ID, it.InteractionID), orString(a.Signature, it.Signature)), true, nil
	case StateOutputAvailable:
		// ai@5 has no approval chunks: runnel asked as a client tool,
		// and the answer comes back as that tool's output.
		// (A part with an approval went through approval-responded: its
		// output is the call's.)
		if it.Kind == runnel.InteractionApproval && !client && p.Approval == nil {
			if ok, reason, isAnswer := approvalOutput(p.Output); isAnswer {
				return approvalBlock(b, ok, reason, it.InteractionID, it.Signature), true, nil
			}
		}
		b.Output = orNull(p.Output)
	case StateOutputError:
		b.Output, b.IsError = runnel.TextOutput(p.ErrorText), true
	case StateOutputDenied:
		text := "Tool call execution denied."
		if p.Approval != nil && p.Approval.Reason != "" {
			text += " Reason: " + p.Approval.Reason
		}
		b.Output, b.IsError = runnel.TextOutput(text), true
		return b, true, nil
	default:
		return b, false, fmt.Errorf("tool call %q has state %q, which is not an AI SDK tool state", p.ToolCallID, p.State)
	}
	if client {
		b.Kind = runnel.ResultKindClientOutput
	}
	return b, true, nil
}

func approvalBlock(b runnel.Block, approved bool, reason, id, signature string) runnel.Block {
	out, _ := json.Marshal(struct {
		Approved      bool   `json:"approved"`
		Reason        string `json:"reason,omitempty"`
		InteractionID string `json:"interactionId,omitempty"`
		Signature     string `json:"signature,omitempty"`
	}{approved, reason, id, signature}) // plain strings and a bool always marshal
	b.Kind, b.Output = runnel.ResultKindApproval, out
	return b
}

// approvedAnswer reads the approval an approvalBlock wrote.
func approvedAnswer(out json.RawMessage) bool {
	var a struct {
		Approved bool `json:"approved"`
	}
	return json.Unmarshal(out, &a) == nil && a.Approved
}

// approvalOutput reads {approved: bool, reason?: string}, the output an
// ai@5 client gives an approval presented as a client tool.
func approvalOutput(raw json.RawMessage) (approved bool, reason string, ok bool) {
	var o struct {
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	}
	if strictjson.Unmarshal(raw, &o) != nil || o.Approved == nil {
		return false, "", false
	}
	return *o.Approved, o.Reason, true
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage(`{}`)
	}
	return raw
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`null`)
	}
	return raw
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
