package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Conversation is the API-independent view of one model request that rules
// are matched against. The same logical history sent through any of the four
// APIs normalises to the same Messages: consecutive assistant items (text,
// reasoning, tool calls) form one assistant message and consecutive tool
// results form one tool message.
type Conversation struct {
	API string `json:"api"`
	// Model and Stream are the request's; a Gemini request carries them in
	// its path ({model}, and :streamGenerateContent).
	Model  string `json:"model,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// System joins, with newlines, every system or developer text: chat
	// system/developer messages, Responses instructions and system/developer
	// items, the Anthropic system field and system messages, the Gemini
	// systemInstruction.
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages,omitempty"`
	// Tools are the names of the offered tools, in request order. A
	// Responses namespace contributes its own name, then each of its tools
	// as "namespace.tool" (the Responses API allows no dot in a tool name).
	Tools []string `json:"tools,omitempty"`
}

// Message is one normalised message. Only text, reasoning, tool calls and tool
// results are kept; images and other media are dropped.
type Message struct {
	Role        string       `json:"role"`
	Text        string       `json:"text,omitempty"`
	Reasoning   string       `json:"reasoning,omitempty"`
	ToolCalls   []ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []ToolResult `json:"toolResults,omitempty"`
}

// ToolResult is the answer to a tool call, as the client sent it back.
type ToolResult struct {
	CallID  string `json:"callId,omitempty"`
	Text    string `json:"text"`
	IsError bool   `json:"isError,omitempty"`
}

// LastRole is the role of the last message, or "" when there is none.
func (c *Conversation) LastRole() string {
	if len(c.Messages) == 0 {
		return ""
	}
	return c.Messages[len(c.Messages)-1].Role
}

// LastUser is the text of the latest user message, wherever it sits.
func (c *Conversation) LastUser() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == RoleUser {
			return c.Messages[i].Text
		}
	}
	return ""
}

// LastToolResult is the latest tool result in the conversation.
func (c *Conversation) LastToolResult() (ToolResult, bool) {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if rs := c.Messages[i].ToolResults; len(rs) > 0 {
			return rs[len(rs)-1], true
		}
	}
	return ToolResult{}, false
}

// ToolResultCount is the number of tool results in the whole conversation.
func (c *Conversation) ToolResultCount() int {
	n := 0
	for _, m := range c.Messages {
		n += len(m.ToolResults)
	}
	return n
}

// HasTool reports whether a tool of this name is offered or, for an MCP
// tool reference "server/tool", whether any spelling of it is (see
// [Conversation.ResolveTool]).
func (c *Conversation) HasTool(name string) bool {
	_, _, ok := c.ResolveTool(name)
	return ok
}

func (c *Conversation) addSystem(text string) {
	if text == "" {
		return
	}
	if c.System != "" {
		c.System += "\n"
	}
	c.System += text
}

// open returns the message new content of this role goes into: the last one
// when it has the same role and the role merges (assistant, tool), else a new one.
func (c *Conversation) open(role string) *Message {
	if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == role && role != RoleUser {
		return &c.Messages[n-1]
	}
	c.Messages = append(c.Messages, Message{Role: role})
	return &c.Messages[len(c.Messages)-1]
}

func (c *Conversation) addUser(text string) {
	c.Messages = append(c.Messages, Message{Role: RoleUser, Text: text})
}

// addAssistantText opens an assistant message even for empty text, so an
// assistant turn is never lost from the role sequence.
func (c *Conversation) addAssistantText(text string) {
	m := c.open(RoleAssistant)
	m.Text = joinText(m.Text, text)
}

func (c *Conversation) addReasoning(text string) {
	m := c.open(RoleAssistant)
	m.Reasoning = joinText(m.Reasoning, text)
}

func (c *Conversation) addToolCall(tc ToolCall) {
	m := c.open(RoleAssistant)
	m.ToolCalls = append(m.ToolCalls, tc)
}

func (c *Conversation) addToolResult(tr ToolResult) {
	m := c.open(RoleTool)
	m.ToolResults = append(m.ToolResults, tr)
}

func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// normalize parses a request body of the given API into a Conversation. It
// accepts every shape the real APIs accept for the parts it reads and ignores
// the rest; it fails only on bodies that are not a JSON object.
func normalize(api string, body []byte) (Conversation, error) {
	switch api {
	case APIChat:
		return normalizeChat(body)
	case APIResponses:
		return normalizeResponses(body)
	case APIMessages:
		return normalizeMessages(body)
	case APIGemini:
		return normalizeGemini(body)
	}
	return Conversation{}, fmt.Errorf("unknown api %q", api)
}

// part is the union of the content parts the APIs use for text.
type part struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// textOf reads content that is a string, null, or an array of parts, and
// joins the text of the text-bearing parts (text, input_text, output_text,
// summary_text, and parts with no type).
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		var pt part
		if json.Unmarshal(p, &pt) != nil {
			continue
		}
		switch pt.Type {
		case "", "text", "input_text", "output_text", "summary_text", "reasoning_text":
			if pt.Text != "" {
				texts = append(texts, pt.Text)
			}
		}
	}
	return strings.Join(texts, "\n")
}

// argumentsJSON turns a tool call's arguments string into JSON: itself when it
// is JSON, else a JSON string holding it, so a Conversation always marshals.
func argumentsJSON(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return nil
	}
	if json.Valid([]byte(args)) {
		return compactJSON([]byte(args))
	}
	b, _ := json.Marshal(args)
	return b
}

// compactJSON compacts valid JSON and returns anything else unchanged.
func compactJSON(raw []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return json.RawMessage(raw)
	}
	return buf.Bytes()
}

// stringOf decodes a JSON string, treating anything else as "".
func stringOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
