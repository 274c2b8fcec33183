package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The request shapes below name only the fields the normaliser reads; every
// polymorphic field is a json.RawMessage so that any shape the real API
// accepts decodes, and an unexpected one is ignored rather than fatal.

type chatRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Custom struct {
			Name string `json:"name"`
		} `json:"custom"`
	} `json:"tools"`
	Functions []struct {
		Name string `json:"name"`
	} `json:"functions"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
		Custom struct {
			Name  string `json:"name"`
			Input string `json:"input"`
		} `json:"custom"`
	} `json:"tool_calls"`
}

func normalizeChat(body []byte) (Conversation, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Conversation{}, fmt.Errorf("chat request: %w", err)
	}
	c := Conversation{API: APIChat, Model: req.Model, Stream: req.Stream}
	for _, raw := range req.Messages {
		var m chatMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		switch m.Role {
		case "system", "developer":
			c.addSystem(textOf(m.Content))
		case "user":
			c.addUser(textOf(m.Content))
		case "assistant":
			c.addAssistantText(textOf(m.Content))
			if r := m.ReasoningContent + m.Reasoning; r != "" {
				c.addReasoning(r)
			}
			for _, tc := range m.ToolCalls {
				if tc.Type == "custom" {
					c.addToolCall(ToolCall{ID: tc.ID, Name: tc.Custom.Name, Arguments: jsonString(tc.Custom.Input)})
					continue
				}
				c.addToolCall(ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: rawArguments(tc.Function.Arguments)})
			}
		case "tool":
			c.addToolResult(ToolResult{CallID: m.ToolCallID, Text: textOf(m.Content)})
		case "function": // the legacy function-calling role answers by name
			c.addToolResult(ToolResult{CallID: m.Name, Text: textOf(m.Content)})
		}
	}
	for _, t := range req.Tools {
		switch {
		case t.Function.Name != "":
			c.Tools = append(c.Tools, t.Function.Name)
		case t.Custom.Name != "":
			c.Tools = append(c.Tools, t.Custom.Name)
		}
	}
	for _, f := range req.Functions {
		c.Tools = append(c.Tools, f.Name)
	}
	return c, nil
}

type responsesRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Instructions json.RawMessage `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []responsesTool `json:"tools"`
}

// responsesTool is a function, custom or hosted tool, or a namespace
// grouping tools (Codex offers each MCP server as namespace mcp__<server>).
type responsesTool struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// addResponsesTools lists offered tools: a namespace as its own name, then
// its members as "namespace.tool".
func (c *Conversation) addResponsesTools(tools []responsesTool) {
	for _, t := range tools {
		if t.Name == "" {
			continue
		}
		c.Tools = append(c.Tools, t.Name)
		if t.Type != "namespace" {
			continue
		}
		for _, m := range t.Tools {
			if m.Name != "" {
				c.Tools = append(c.Tools, t.Name+namespaceSep+m.Name)
			}
		}
	}
}

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments json.RawMessage `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
	Summary   json.RawMessage `json:"summary"`
	// Tools of an additional_tools item: tools offered from this point of
	// the conversation on (Codex sends its code-mode tools so).
	Tools []responsesTool `json:"tools"`
}

func normalizeResponses(body []byte) (Conversation, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Conversation{}, fmt.Errorf("responses request: %w", err)
	}
	c := Conversation{API: APIResponses, Model: req.Model, Stream: req.Stream}
	c.addSystem(textOf(req.Instructions))
	input := bytes.TrimSpace(req.Input)
	if len(input) > 0 && input[0] == '"' {
		c.addUser(stringOf(input))
	} else {
		var items []json.RawMessage
		_ = json.Unmarshal(input, &items) // anything but an array carries no items
		for _, raw := range items {
			var it responsesItem
			if json.Unmarshal(raw, &it) == nil {
				c.addResponsesItem(it)
			}
		}
	}
	c.addResponsesTools(req.Tools)
	return c, nil
}

func (c *Conversation) addResponsesItem(it responsesItem) {
	typ := it.Type
	if typ == "" && it.Role != "" {
		typ = "message" // the "easy input message" form has no type
	}
	switch typ {
	case "message":
		switch it.Role {
		case "system", "developer":
			c.addSystem(textOf(it.Content))
		case "user":
			c.addUser(textOf(it.Content))
		case "assistant":
			c.addAssistantText(textOf(it.Content))
		}
	case "function_call":
		c.addToolCall(ToolCall{ID: it.CallID, Name: it.Name, Namespace: it.Namespace, Arguments: rawArguments(it.Arguments)})
	case "custom_tool_call":
		c.addToolCall(ToolCall{ID: it.CallID, Name: it.Name, Namespace: it.Namespace, Arguments: jsonString(it.Input)})
	case "function_call_output", "custom_tool_call_output":
		c.addToolResult(ToolResult{CallID: it.CallID, Text: textOf(it.Output)})
	case "reasoning":
		text := textOf(it.Summary)
		if text == "" {
			text = textOf(it.Content)
		}
		c.addReasoning(text)
	case "additional_tools":
		c.addResponsesTools(it.Tools)
	}
}

type messagesRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func normalizeMessages(body []byte) (Conversation, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Conversation{}, fmt.Errorf("messages request: %w", err)
	}
	c := Conversation{API: APIMessages, Model: req.Model, Stream: req.Stream}
	c.addSystem(textOf(req.System))
	for _, m := range req.Messages {
		blocks := messagesBlocks(m.Content)
		switch m.Role {
		case "system": // Claude Code sends mid-conversation system messages (a beta)
			c.addSystem(textOf(m.Content))
		case "user":
			c.addAnthropicUser(blocks)
		case "assistant":
			for _, b := range blocks {
				switch b.Type {
				case "text":
					c.addAssistantText(b.Text)
				case "thinking":
					c.addReasoning(b.Thinking)
				case "tool_use", "server_tool_use":
					c.addToolCall(ToolCall{ID: b.ID, Name: b.Name, Arguments: rawArguments(b.Input)})
				}
			}
			c.open(RoleAssistant)
		}
	}
	for _, t := range req.Tools {
		if t.Name != "" {
			c.Tools = append(c.Tools, t.Name)
		}
	}
	return c, nil
}

// messagesBlocks reads Anthropic content, a string being one text block.
func messagesBlocks(raw json.RawMessage) []messagesBlock {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		return []messagesBlock{{Type: "text", Text: stringOf(raw)}}
	}
	var items []json.RawMessage
	_ = json.Unmarshal(raw, &items)
	blocks := make([]messagesBlock, 0, len(items))
	for _, it := range items {
		var b messagesBlock
		if json.Unmarshal(it, &b) == nil {
			blocks = append(blocks, b)
		}
	}
	return blocks
}

// addAnthropicUser splits a user message into its tool results (a tool
// message) followed by its text (a user message), so LastRole says "tool"
// only when the client answered tools without typing anything.
func (c *Conversation) addAnthropicUser(blocks []messagesBlock) {
	var text string
	results := 0
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			c.addToolResult(ToolResult{CallID: b.ToolUseID, Text: textOf(b.Content), IsError: b.IsError})
			results++
		case "text":
			text = joinText(text, b.Text)
		}
	}
	if results == 0 || text != "" {
		c.addUser(text)
	}
}

// rawArguments reads tool arguments sent either as a JSON string holding JSON
// (OpenAI) or as a JSON value (Anthropic input, lenient OpenAI-compatible clients).
func rawArguments(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if raw[0] == '"' {
		return argumentsJSON(stringOf(raw))
	}
	return compactJSON(raw)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
