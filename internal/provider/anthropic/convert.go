package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

func params(req *provider.Request) anthropic.MessageNewParams {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(maxTokens),
	}
	system := req.System
	for _, m := range req.Messages {
		if m.Role == runnel.RoleSystem {
			// Normally folded into req.System already; the API has no
			// system role, so fold any that are left.
			if t := m.Text(); t != "" {
				if system != "" {
					system += "\n\n"
				}
				system += t
			}
		}
	}
	if system != "" {
		p.System = []anthropic.TextBlockParam{{Text: system}}
	}
	p.Messages = messages(req.Messages)
	for _, t := range req.Tools {
		tp := &anthropic.ToolParam{Name: t.Name, InputSchema: inputSchema(t.Schema)}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	return p
}

// messages converts the conversation. tool messages become user messages;
// consecutive messages of one role are merged, since the API wants the
// roles to alternate, and a user message's tool results go first, as the
// API requires.
func messages(msgs []runnel.Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	for _, m := range msgs {
		var role anthropic.MessageParamRole
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case runnel.RoleAssistant:
			role, blocks = anthropic.MessageParamRoleAssistant, assistantBlocks(m.Content)
		case runnel.RoleUser, runnel.RoleTool:
			role, blocks = anthropic.MessageParamRoleUser, userBlocks(m.Content)
		default:
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			if role == anthropic.MessageParamRoleUser {
				out[n-1].Content = resultsFirst(out[n-1].Content)
			}
			continue
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	return out
}

func userBlocks(bs []runnel.Block) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, b := range bs {
		switch b.Type {
		case runnel.BlockText, runnel.BlockResource:
			if b.Text != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case runnel.BlockImage:
			switch {
			case b.Data != "":
				mt := b.MimeType
				if mt == "" {
					mt = "image/png"
				}
				out = append(out, anthropic.NewImageBlockBase64(mt, b.Data))
			case b.URI != "":
				out = append(out, anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: b.URI}))
			}
		case runnel.BlockToolResult:
			tr := &anthropic.ToolResultBlockParam{ToolUseID: b.ToolCallID}
			if b.IsError {
				tr.IsError = anthropic.Bool(true)
			}
			// The API refuses an empty text block; an empty result has no content.
			if t := b.OutputText(); t != "" {
				tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: t}}}
			}
			out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: tr})
		}
	}
	return resultsFirst(out)
}

// resultsFirst moves tool_result blocks before the rest, keeping order
// within each group.
func resultsFirst(bs []anthropic.ContentBlockParamUnion) []anthropic.ContentBlockParamUnion {
	out := make([]anthropic.ContentBlockParamUnion, 0, len(bs))
	for _, b := range bs {
		if b.OfToolResult != nil {
			out = append(out, b)
		}
	}
	for _, b := range bs {
		if b.OfToolResult == nil {
			out = append(out, b)
		}
	}
	return out
}

// assistantBlocks replays thinking only with its signature (the API
// rejects unsigned thinking, e.g. reasoning from another provider).
func assistantBlocks(bs []runnel.Block) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, b := range bs {
		switch b.Type {
		case runnel.BlockReasoning:
			switch {
			case b.Signature != "":
				out = append(out, anthropic.NewThinkingBlock(b.Signature, b.Text))
			case b.Text == "" && b.Data != "":
				out = append(out, anthropic.NewRedactedThinkingBlock(b.Data))
			}
		case runnel.BlockText:
			if b.Text != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case runnel.BlockToolCall:
			out = append(out, anthropic.NewToolUseBlock(b.ToolCallID, toolUseInput(b.Input), b.ToolName))
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

// inputSchema splits a JSON Schema into the SDK's fields; everything other
// than properties and required travels as extra fields.
func inputSchema(schema json.RawMessage) anthropic.ToolInputSchemaParam {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil || m == nil {
		m = map[string]any{}
	}
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	delete(m, "type")
	delete(m, "properties")
	delete(m, "required")
	if len(m) > 0 {
		s.ExtraFields = m
	}
	return s
}
