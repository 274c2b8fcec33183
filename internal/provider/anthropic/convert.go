package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

// request is the request body: only the fields runnel sends.
type request struct {
	MaxTokens int            `json:"max_tokens"`
	Messages  []message      `json:"messages"`
	Model     string         `json:"model"`
	System    []contentBlock `json:"system,omitempty"`
	Tools     []tool         `json:"tools,omitempty"`
	Stream    bool           `json:"stream"`
}

type message struct {
	Content []contentBlock `json:"content"`
	Role    string         `json:"role"`
}

// contentBlock is any block runnel sends. The field order gives every
// block type's keys in the order Anthropic's own SDK writes them.
type contentBlock struct {
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []contentBlock  `json:"content,omitempty"` // a tool_result's text
	IsError   bool            `json:"is_error,omitempty"`
	ID        string          `json:"id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Name      string          `json:"name,omitempty"`
	Data      string          `json:"data,omitempty"`
	Signature string          `json:"signature,omitempty"`
	// Thinking is present, if empty, on every thinking block.
	Thinking *string      `json:"thinking,omitempty"`
	Source   *imageSource `json:"source,omitempty"`
	Text     string       `json:"text,omitempty"`
	Type     string       `json:"type"`
}

type imageSource struct {
	Data      string `json:"data,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	URL       string `json:"url,omitempty"`
	Type      string `json:"type"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func body(req *provider.Request) *request {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	b := &request{Model: req.Model, MaxTokens: maxTokens, Stream: true}
	if system := systemText(req); system != "" {
		b.System = []contentBlock{{Type: "text", Text: system}}
	}
	b.Messages = messages(req.Messages)
	if len(req.Tools) > 0 {
		b.Tools = make([]tool, len(req.Tools))
		for i, t := range req.Tools {
			b.Tools[i] = tool{Name: t.Name, Description: t.Description, InputSchema: inputSchema(t.Schema)}
		}
	}
	return b
}

// systemText is the system prompt with any system messages folded in:
// normally they are folded into req.System already, and the API has no
// system role.
func systemText(req *provider.Request) string {
	system := req.System
	for _, m := range req.Messages {
		if m.Role == runnel.RoleSystem {
			if t := m.Text(); t != "" {
				if system != "" {
					system += "\n\n"
				}
				system += t
			}
		}
	}
	return system
}

// apiRole is the API role a message goes under, "" for none.
func apiRole(m runnel.Message) string {
	switch m.Role {
	case runnel.RoleAssistant:
		return "assistant"
	case runnel.RoleUser, runnel.RoleTool:
		return "user"
	}
	return ""
}

// converted is one message's blocks, for the cache.
type converted struct {
	key    provider.MessageKey
	role   string
	blocks []contentBlock
}

func convert(m runnel.Message) converted {
	c := converted{key: provider.KeyOf(m), role: apiRole(m)}
	switch c.role {
	case "assistant":
		c.blocks = assistantBlocks(m.Content)
	case "user":
		c.blocks = userBlocks(m.Content)
	}
	return c
}

// messages converts the conversation. tool messages become user messages;
// consecutive messages of one role are merged, since the API wants the
// roles to alternate, and a user message's tool results go first, as the
// API requires.
func messages(msgs []runnel.Message) []message {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		var role string
		var blocks []contentBlock
		switch m.Role {
		case runnel.RoleAssistant:
			role, blocks = "assistant", assistantBlocks(m.Content)
		case runnel.RoleUser, runnel.RoleTool:
			role, blocks = "user", userBlocks(m.Content)
		default:
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			if role == "user" {
				resultsFirst(out[n-1].Content)
			}
			continue
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	return out
}

// documentBlock is a resource as Anthropic takes files: a document from
// base64 data (PDF and plain text) or a URL, the text of a text resource;
// any other file is named in a text block, so the model knows it is there.
func documentBlock(b runnel.Block) contentBlock {
	mt := b.MimeType
	switch {
	case b.Data != "" && mt == "application/pdf":
		return contentBlock{Type: "document", Source: &imageSource{Type: "base64", MediaType: mt, Data: b.Data}}
	case b.Data != "" && mt == "text/plain":
		// Plain text documents are sent as text, not base64.
		if text, err := base64.StdEncoding.DecodeString(b.Data); err == nil && utf8.Valid(text) {
			return contentBlock{Type: "document", Source: &imageSource{Type: "text", MediaType: mt, Data: string(text)}}
		}
	case b.Data == "" && b.URI != "" && mt == "application/pdf":
		return contentBlock{Type: "document", Source: &imageSource{Type: "url", URL: b.URI}}
	case b.Text != "":
		return contentBlock{Type: "text", Text: b.Text}
	}
	name := b.Filename
	if name == "" {
		name = b.URI
	}
	return contentBlock{Type: "text", Text: fmt.Sprintf("[The user attached the file %s (%s), which this model cannot read.]", name, mt)}
}

func userBlocks(bs []runnel.Block) []contentBlock {
	var out []contentBlock
	for _, b := range bs {
		switch b.Type {
		case runnel.BlockText:
			if b.Text != "" {
				out = append(out, contentBlock{Type: "text", Text: b.Text})
			}
		case runnel.BlockResource:
			out = append(out, documentBlock(b))
		case runnel.BlockImage:
			switch {
			case b.Data != "":
				mt := b.MimeType
				if mt == "" {
					mt = "image/png"
				}
				out = append(out, contentBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: mt, Data: b.Data}})
			case b.URI != "":
				out = append(out, contentBlock{Type: "image", Source: &imageSource{Type: "url", URL: b.URI}})
			}
		case runnel.BlockToolResult:
			tr := contentBlock{Type: "tool_result", ToolUseID: b.ToolCallID, IsError: b.IsError}
			// The API refuses an empty text block; an empty result has no content.
			if t := b.OutputText(); t != "" {
				tr.Content = []contentBlock{{Type: "text", Text: t}}
			}
			out = append(out, tr)
		}
	}
	resultsFirst(out)
	return out
}

// resultsFirst moves tool_result blocks before the rest, keeping order
// within each group.
func resultsFirst(bs []contentBlock) {
	slices.SortStableFunc(bs, func(a, b contentBlock) int {
		ra, rb := a.Type == "tool_result", b.Type == "tool_result"
		switch {
		case ra == rb:
			return 0
		case ra:
			return -1
		}
		return 1
	})
}

// assistantBlocks replays thinking only with its signature (the API
// rejects unsigned thinking, e.g. reasoning from another provider).
func assistantBlocks(bs []runnel.Block) []contentBlock {
	var out []contentBlock
	for _, b := range bs {
		switch b.Type {
		case runnel.BlockReasoning:
			switch {
			case b.Signature != "":
				out = append(out, contentBlock{Type: "thinking", Signature: b.Signature, Thinking: &b.Text})
			case b.Text == "" && b.Data != "":
				out = append(out, contentBlock{Type: "redacted_thinking", Data: b.Data})
			}
		case runnel.BlockText:
			if b.Text != "" {
				out = append(out, contentBlock{Type: "text", Text: b.Text})
			}
		case runnel.BlockToolCall:
			out = append(out, contentBlock{Type: "tool_use", ID: b.ToolCallID, Name: b.ToolName, Input: toolUseInput(b.Input)})
		}
	}
	return out
}

// toolUseInput is a recorded call's input as the object the API demands;
// arguments that were never a JSON object are replayed as {}.
func toolUseInput(in json.RawMessage) json.RawMessage {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
		return json.RawMessage("{}")
	}
	return in
}

// inputSchema is a tool's JSON Schema as the API takes it: properties,
// required and "type":"object" first, then every other keyword as it was.
func inputSchema(schema json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(schema, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	var buf bytes.Buffer
	buf.WriteString(`{"properties":`)
	if p := bytes.TrimSpace(m["properties"]); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		buf.Write(p)
	} else {
		buf.WriteString("{}")
	}
	// Only the names in required that are strings are kept.
	var req []json.RawMessage
	_ = json.Unmarshal(m["required"], &req)
	names := make([]string, 0, len(req))
	for _, r := range req {
		var name string
		if json.Unmarshal(r, &name) == nil {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		rb, _ := json.Marshal(names) // strings always marshal
		buf.WriteString(`,"required":`)
		buf.Write(rb)
	}
	buf.WriteString(`,"type":"object"`)
	delete(m, "type")
	delete(m, "properties")
	delete(m, "required")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kb, _ := json.Marshal(k)
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(m[k])
	}
	buf.WriteByte('}')
	return buf.Bytes()
}
