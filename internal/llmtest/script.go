package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// The APIs the server speaks, as used in [Match.API], [Conversation.API] and
// [Request.API].
const (
	APIChat      = "chat"      // OpenAI Chat Completions, POST /v1/chat/completions
	APIResponses = "responses" // OpenAI Responses, POST /v1/responses
	APIMessages  = "messages"  // Anthropic Messages, POST /v1/messages
	// APIGemini is the Gemini API, POST /v1beta/models/{model}:generateContent
	// and :streamGenerateContent.
	APIGemini = "gemini"
)

// Roles of a normalised [Message]. A tool result is RoleTool whatever the API
// calls it (a chat "tool" message, a Responses function_call_output item, an
// Anthropic tool_result block inside a user message, a Gemini functionResponse
// part).
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Fault kinds, see [Fault].
const (
	FaultStatus    = "status"
	FaultCut       = "cut"
	FaultMalformed = "malformed"
	FaultHang      = "hang"
	FaultEndless   = "endless"
)

// Script is the ordered list of rules a server answers with. The first rule
// whose When holds answers the request.
type Script struct {
	Rules []Rule `json:"rules"`
}

// Rule pairs a condition on the request with the reply to send.
type Rule struct {
	// Name identifies the rule in logs, in [Request.Rule] and in the
	// no-match error; empty means "rule N" (0-based).
	Name  string `json:"name,omitempty"`
	When  Match  `json:"when"`
	Reply Reply  `json:"reply"`
	// Fault, when set, replaces the reply for the first Fault.Times matching
	// requests (all of them when Times is 0).
	Fault *Fault `json:"fault,omitempty"`
}

// Match is a condition on a normalised request. Every set field must hold; the
// zero Match matches every request. String comparisons with "Contains" are
// case-insensitive substring tests.
type Match struct {
	// API is "chat", "responses", "messages" or "gemini".
	API string `json:"api,omitempty"`
	// Model is compared exactly with the request's model.
	Model string `json:"model,omitempty"`
	// LastRole is the role of the last message: "user", "assistant" or "tool".
	LastRole string `json:"lastRole,omitempty"`
	// LastUserContains tests the text of the latest user message (wherever it sits).
	LastUserContains string `json:"lastUserContains,omitempty"`
	// LastToolResultContains tests the content of the latest tool result.
	LastToolResultContains string `json:"lastToolResultContains,omitempty"`
	// SystemContains tests the system text (system/developer messages,
	// Responses instructions, Anthropic system, Gemini systemInstruction).
	SystemContains string `json:"systemContains,omitempty"`
	// HasTool requires a tool of this exact name to be offered, or, for an
	// MCP tool reference "server/tool", any spelling of it (see
	// [Conversation.ResolveTool]).
	HasTool string `json:"hasTool,omitempty"`
	// ToolResultsBelow holds when the conversation has fewer than N tool results.
	ToolResultsBelow *int `json:"toolResultsBelow,omitempty"`
	// ToolResultsAtLeast holds when the conversation has N or more tool results.
	ToolResultsAtLeast *int `json:"toolResultsAtLeast,omitempty"`
}

// Reply is what the fake model answers: optional reasoning, then text, then
// tool calls, in that order on the wire.
type Reply struct {
	// Text may contain the placeholders {{last_user}} and {{last_tool_result}},
	// replaced by the latest user text and the latest tool result content.
	Text string `json:"text,omitempty"`
	// Reasoning is sent as chat delta.reasoning_content, a Responses reasoning
	// item with a summary, an Anthropic thinking block or Gemini thought
	// parts. Placeholders as in Text.
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Usage defaults to {Input: 10, Output: 5}.
	Usage *Usage `json:"usage,omitempty"`
	// ChunkSize splits text, reasoning and tool arguments into pieces of at most
	// this many bytes (never inside a UTF-8 sequence). 0 means three pieces.
	ChunkSize int `json:"chunkSize,omitempty"`
	// TokenDelayMs sleeps between streamed events; the sleep ends early when the
	// client goes away or the server closes.
	TokenDelayMs int `json:"tokenDelayMs,omitempty"`
}

// ToolCall is a tool call, both in a [Reply] and in a normalised [Message].
type ToolCall struct {
	// ID is generated when empty: derived from the request body, unique within
	// the response and stable when the same request is sent again. Gemini
	// sends it as the functionCall's optional id.
	ID string `json:"id,omitempty"`
	// Name is the tool's name as the client offers it. In a reply it may
	// instead be an MCP tool reference "server/tool", sent under whichever
	// spelling of that tool the request offers (see [Conversation.ResolveTool]),
	// so one script drives every agent whatever it calls the tool; a
	// reference the request offers under no spelling is sent as written.
	Name string `json:"name"`
	// Namespace is the Responses API namespace the tool sits in (Codex
	// offers an MCP server's tools in namespace mcp__<server>): in a reply
	// it is sent, on the Responses API only, as the function_call's
	// namespace; in a normalised message it is the namespace the client
	// sent back. Resolving a reference sets it.
	Namespace string `json:"namespace,omitempty"`
	// Arguments is sent as written (compacted when valid JSON), so a script can
	// send invalid arguments on purpose; empty means {}. In a normalised message
	// it is the call's arguments, or a JSON string holding them when the client
	// sent something that is not JSON.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Usage is the token usage a reply reports.
type Usage struct {
	Input  int `json:"input"`
	Output int `json:"output"`
}

// Fault makes a rule fail instead of replying.
//
// AfterChunks counts the events of the response as the API would send them
// (for chat, one "data:" line per chunk including "data: [DONE]"; for the
// Responses and Messages APIs, one "event:"/"data:" pair, the first being
// response.created / message_start; for Gemini with alt=sse, one "data:"
// line per GenerateContentResponse). A non-streaming reply, and a Gemini
// streamGenerateContent without alt=sse (one JSON array), is one chunk: with
// AfterChunks > 0 the status line, headers and the first half of the JSON body
// go out before a cut or a hang; a malformed non-streaming reply is a truncated
// body.
//
// With AfterChunks 0, a "cut" or "hang" happens before the status line and
// headers are written (the client is still waiting for a response), unless
// FlushHeaders is set, in which case "200" and the headers are flushed first
// (the client holds a response whose body never comes).
type Fault struct {
	// Kind is "status", "cut", "malformed" or "hang".
	//   status:    answer Status with the API's error JSON (and Retry-After).
	//   cut:       send AfterChunks events, then abort the connection without
	//              the terminating event or chunk; the client reads an unexpected EOF.
	//   malformed: replace event number AfterChunks with a truncated, invalid
	//              JSON version of itself (a ping, which clients skip, passes
	//              the fault on to the next event), then finish normally.
	//   hang:      send AfterChunks events, then send nothing until the client
	//              goes away or the server closes; the connection is then aborted.
	//   endless:   send AfterChunks events, then repeat the next one (point it
	//              at a text delta) until the client goes away, the server
	//              closes or 1 GiB went out: a model that never stops talking.
	//              A non-streaming reply sends half its body, then whitespace.
	Kind string `json:"kind"`
	// Status is the HTTP status for "status" (e.g. 429, 500, 503).
	Status int `json:"status,omitempty"`
	// RetryAfter is the Retry-After header value for "status" ("1", "0"); empty
	// sends no header.
	RetryAfter string `json:"retryAfter,omitempty"`
	// AfterChunks past the last event strikes after the complete stream: a
	// cut then only drops the final HTTP chunk, which clients may not notice.
	AfterChunks  int  `json:"afterChunks,omitempty"`
	FlushHeaders bool `json:"flushHeaders,omitempty"`
	// Times applies the fault to the first N requests this rule answers; later
	// ones get the reply. 0 means every time. This is the only counter in the
	// server and it never changes which rule answers.
	Times int `json:"times,omitempty"`
}

// Validate reports the first problem in the script: an unknown API, role or
// fault kind, a status fault without an error status, a tool call without a
// name, a malformed tool reference ("server/" or "/tool"), a negative count.
func (s Script) Validate() error {
	for i, r := range s.Rules {
		name := r.label(i)
		if err := r.validate(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (r Rule) validate() error {
	switch r.When.API {
	case "", APIChat, APIResponses, APIMessages, APIGemini:
	default:
		return fmt.Errorf("when.api %q: want chat, responses, messages or gemini", r.When.API)
	}
	if err := checkToolRef(r.When.HasTool); err != nil {
		return fmt.Errorf("when.hasTool: %w", err)
	}
	switch r.When.LastRole {
	case "", RoleUser, RoleAssistant, RoleTool:
	default:
		return fmt.Errorf("when.lastRole %q: want user, assistant or tool", r.When.LastRole)
	}
	for _, tc := range r.Reply.ToolCalls {
		if tc.Name == "" {
			return errors.New("reply.toolCalls: a tool call needs a name")
		}
		if err := checkToolRef(tc.Name); err != nil {
			return fmt.Errorf("reply.toolCalls: %w", err)
		}
	}
	if r.Reply.ChunkSize < 0 || r.Reply.TokenDelayMs < 0 {
		return errors.New("reply: chunkSize and tokenDelayMs must not be negative")
	}
	if f := r.Fault; f != nil {
		switch f.Kind {
		case FaultStatus:
			if f.Status < 400 || f.Status > 599 {
				return fmt.Errorf("fault.status %d: want an HTTP error status (400-599)", f.Status)
			}
		case FaultCut, FaultMalformed, FaultHang, FaultEndless:
		default:
			return fmt.Errorf("fault.kind %q: want status, cut, malformed, hang or endless", f.Kind)
		}
		if f.AfterChunks < 0 || f.Times < 0 {
			return errors.New("fault: afterChunks and times must not be negative")
		}
	}
	return nil
}

// label names the rule for logs and errors.
func (r Rule) label(i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("rule %d", i)
}

// LoadScript reads a JSON script. Unknown fields are an error: this is a
// developer tool, and a misspelt condition that silently matched everything
// would be worse than a refusal.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("llmtest: read script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return Script{}, fmt.Errorf("llmtest: script %s: %w", path, err)
	}
	return s, nil
}

// ParseScript decodes and validates a JSON script, refusing unknown fields.
func ParseScript(data []byte) (Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Script{}, errors.New("decode: unexpected data after the script object")
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// DefaultScript answers any request without tools being called: after a tool
// result it reports the result, otherwise it echoes the user. It is what
// `runnel mockllm` serves without --script.
func DefaultScript() Script {
	return Script{Rules: []Rule{
		{
			Name:  "after-tool",
			When:  Match{LastRole: RoleTool},
			Reply: Reply{Text: "Tool result: {{last_tool_result}}"},
		},
		{
			Name:  "echo",
			Reply: Reply{Text: "Hello from mockllm. You said: {{last_user}}"},
		},
	}}
}

// matches reports whether every set field of m holds for c.
func (m Match) matches(c *Conversation) bool {
	switch {
	case m.API != "" && m.API != c.API,
		m.Model != "" && m.Model != c.Model,
		m.LastRole != "" && m.LastRole != c.LastRole(),
		m.LastUserContains != "" && !containsFold(c.LastUser(), m.LastUserContains),
		m.SystemContains != "" && !containsFold(c.System, m.SystemContains),
		m.HasTool != "" && !c.HasTool(m.HasTool):
		return false
	}
	if m.LastToolResultContains != "" {
		tr, ok := c.LastToolResult()
		if !ok || !containsFold(tr.Text, m.LastToolResultContains) {
			return false
		}
	}
	n := c.ToolResultCount()
	if m.ToolResultsBelow != nil && n >= *m.ToolResultsBelow {
		return false
	}
	if m.ToolResultsAtLeast != nil && n < *m.ToolResultsAtLeast {
		return false
	}
	return true
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
