package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"sync"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

const chatAPI = "openai chat completions"

// Chat streams from the Chat Completions API. It is safe for concurrent use.
type Chat struct {
	ep endpoint
	// history keeps the messages' encodings across a run's steps; mu
	// guards it.
	mu      sync.Mutex
	history provider.EncodedMessages
	// maxCompletion sends max_completion_tokens, which OpenAI's reasoning
	// models require; compatible servers know only max_tokens.
	maxCompletion bool
}

// NewChat returns a Chat Completions adapter. cfg.BaseURL points it at any
// OpenAI-compatible server; cfg.APIVersion selects Azure OpenAI's
// api-version.
func NewChat(cfg provider.Config) *Chat {
	return &Chat{
		ep:            newEndpoint(chatAPI, "chat/completions", cfg),
		maxCompletion: cfg.BaseURL == "" || cfg.APIVersion != "",
	}
}

// Stream implements provider.Model.
func (c *Chat) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	body, err := c.encode(req)
	if err != nil {
		return nil, &provider.Error{Message: chatAPI + ": the request could not be encoded", Err: err}
	}
	res, err := c.ep.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	er := provider.NewEventReader(res.Body)
	st := &chatStream{emit: emit}
	for er.Next() {
		data := bytes.TrimSpace(er.Data())
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return st.response(), nil
		}
		if err := st.apply(data); err != nil {
			return nil, c.ep.scrubbed(err)
		}
	}
	return nil, streamEnd(ctx, chatAPI, er, st.emitted, "[DONE]")
}

// chatRequest is the request body: only the fields runnel sends.
type chatRequest struct {
	Model               string            `json:"model,omitempty"`
	Messages            []chatMessage     `json:"messages,omitempty"`
	Tools               []chatTool        `json:"tools,omitempty"`
	Stream              bool              `json:"stream"`
	StreamOptions       chatStreamOptions `json:"stream_options"`
	MaxTokens           int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens int               `json:"max_completion_tokens,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatTool struct {
	Type     string           `json:"type"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, or []chatPart for a user message with images.
	Content    any            `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// chatPart is a user content part; the field order gives the keys in the
// order OpenAI's own SDK writes them.
type chatPart struct {
	File     *chatFile     `json:"file,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
	Text     string        `json:"text,omitempty"`
	Type     string        `json:"type"`
}

// chatFile is a file given inline, as a data URL.
type chatFile struct {
	FileData string `json:"file_data,omitempty"`
	Filename string `json:"filename,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatCallFunction `json:"function"`
}

type chatCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// encode writes the request body: the bytes encoding/json writes for
// body(req), with each message's part taken from the run's cache.
func (c *Chat) encode(req *provider.Request) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.body(&provider.Request{Tools: req.Tools, MaxTokens: req.MaxTokens})
	tail.Messages = nil
	joined, err := c.history.Join(req.Messages, func(m runnel.Message) ([]byte, error) {
		return appendEach(nil, chatMessages("", []runnel.Message{m}))
	})
	if err != nil {
		return nil, err
	}
	return assemble(req.Model, "messages", tail, func(dst []byte) ([]byte, error) {
		if req.System != "" {
			return provider.AppendJSON(dst, chatMessage{Role: "system", Content: req.System})
		}
		return dst, nil
	}, joined)
}

func (c *Chat) body(req *provider.Request) *chatRequest {
	b := &chatRequest{
		Model:         req.Model,
		Messages:      chatMessages(req.System, req.Messages),
		Stream:        true,
		StreamOptions: chatStreamOptions{IncludeUsage: true},
	}
	if req.MaxTokens > 0 {
		if c.maxCompletion {
			b.MaxCompletionTokens = req.MaxTokens
		} else {
			b.MaxTokens = req.MaxTokens
		}
	}
	if len(req.Tools) > 0 {
		b.Tools = make([]chatTool, len(req.Tools))
		for i, t := range req.Tools {
			b.Tools[i] = chatTool{Type: "function", Function: chatToolFunction{
				Name: t.Name, Description: t.Description, Parameters: toolSchema(t.Schema),
			}}
		}
	}
	return b
}

// chatMessages converts the conversation. Tool results become tool
// messages wherever they sit, placed before the rest of their message
// because the API wants them right after the assistant's tool calls.
// Reasoning is not replayed: the API has no place for it.
func chatMessages(system string, msgs []runnel.Message) []chatMessage {
	out := make([]chatMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, chatMessage{Role: "system", Content: system})
	}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == runnel.BlockToolResult {
				out = append(out, chatMessage{Role: "tool", Content: b.OutputText(), ToolCallID: b.ToolCallID})
			}
		}
		switch m.Role {
		case runnel.RoleAssistant:
			if a, ok := chatAssistant(m.Content); ok {
				out = append(out, a)
			}
		case runnel.RoleSystem:
			if t := m.Text(); t != "" {
				out = append(out, chatMessage{Role: "system", Content: t})
			}
		case runnel.RoleUser:
			if content := chatUserContent(m.Content); content != nil {
				out = append(out, chatMessage{Role: "user", Content: content})
			}
		}
	}
	return out
}

// chatUserContent is a user message's content, nil when it has none. A
// lone text part is sent as a plain string, which every compatible server
// understands.
func chatUserContent(blocks []runnel.Block) any {
	var parts []chatPart
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText:
			if b.Text != "" {
				parts = append(parts, chatPart{Type: "text", Text: b.Text})
			}
		case runnel.BlockResource:
			switch {
			case b.Data != "":
				parts = append(parts, chatPart{Type: "file", File: &chatFile{FileData: dataURL(b.MimeType, b.Data), Filename: fileName(b)}})
			case b.Text != "":
				parts = append(parts, chatPart{Type: "text", Text: b.Text})
			case b.URI != "": // Chat Completions takes no file by URL
				parts = append(parts, chatPart{Type: "text", Text: fileMention(b)})
			}
		case runnel.BlockImage:
			if u := imageURL(b.MimeType, b.Data, b.URI); u != "" {
				parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: u}})
			}
		}
	}
	switch {
	case len(parts) == 0:
		return nil
	case len(parts) == 1 && parts[0].Type == "text":
		return parts[0].Text
	}
	return parts
}

func chatAssistant(blocks []runnel.Block) (chatMessage, bool) {
	a := chatMessage{Role: "assistant"}
	var text strings.Builder
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText:
			text.WriteString(b.Text)
		case runnel.BlockToolCall:
			a.ToolCalls = append(a.ToolCalls, chatToolCall{ID: b.ToolCallID, Type: "function", Function: chatCallFunction{
				Name: b.ToolName, Arguments: toolArguments(b.Input),
			}})
		}
	}
	if text.Len() == 0 && len(a.ToolCalls) == 0 {
		return chatMessage{}, false
	}
	if text.Len() > 0 {
		a.Content = text.String()
	}
	return a, true
}

// chatChunk is one streamed chunk. It is decoded here rather than with the
// SDK's ChatCompletionChunk because compatible servers send fields the SDK
// does not model (reasoning_content, reasoning) and leave out ones it
// assumes (a tool call's index).
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        string          `json:"reasoning"`
			ToolCalls        []chatToolDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type chatToolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatStream assembles a response from chunks.
type chatStream struct {
	emit      func(provider.Chunk)
	emitted   bool
	reasoning strings.Builder
	text      strings.Builder
	calls     []*chatCall
	byIndex   map[int]int // the server's tool call index → position in calls; made on first use
	finish    string
	usage     runnel.Usage
}

type chatCall struct {
	id, name string
	args     strings.Builder
	started  bool // its ChunkToolCall was emitted
}

func (s *chatStream) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

func (s *chatStream) apply(data []byte) error {
	var ch chatChunk
	if err := provider.DecodeChunk(data, &ch); err != nil {
		return provider.StreamError(chatAPI, s.emitted, err, "the server sent a malformed chunk: %v", err)
	}
	if len(ch.Error) > 0 && !bytes.Equal(ch.Error, []byte("null")) {
		return provider.StreamError(chatAPI, s.emitted, nil, "the server reported an error mid-stream: %s", provider.ErrorDetail(data))
	}
	if u := ch.Usage; u != nil {
		s.usage = runnel.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, Total: u.TotalTokens}
		if s.usage.Total == 0 {
			s.usage.Total = u.PromptTokens + u.CompletionTokens
		}
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // only one choice is ever requested
		}
		d := c.Delta
		if r := d.ReasoningContent; r != "" || d.Reasoning != "" {
			if r == "" {
				r = d.Reasoning
			}
			s.reasoning.WriteString(r)
			s.send(provider.Chunk{Kind: provider.ChunkReasoning, Text: r})
		}
		if d.Content != "" {
			s.text.WriteString(d.Content)
			s.send(provider.Chunk{Kind: provider.ChunkText, Text: d.Content})
		}
		for _, td := range d.ToolCalls {
			s.toolDelta(td)
		}
		if c.FinishReason != "" {
			s.finish = c.FinishReason
		}
	}
	return nil
}

// toolDelta adds a piece of a tool call. Servers differ: OpenAI sends the
// id and name once and then argument pieces under the same index; some
// compatible servers repeat the id on every piece, send every call under
// index 0 (or none) with distinct ids, or send a call whole in one piece.
// A delta continues the call at its index (or the latest call, without an
// index) unless it carries a different id.
func (s *chatStream) toolDelta(td chatToolDelta) {
	var call *chatCall
	pos := len(s.calls) - 1
	if td.Index != nil {
		p, ok := s.byIndex[*td.Index]
		if !ok {
			p = -1
		}
		pos = p
	}
	if pos >= 0 {
		call = s.calls[pos]
		if td.ID != "" && call.id != "" && td.ID != call.id {
			call = nil
		}
	}
	if call == nil {
		call = &chatCall{}
		s.calls = append(s.calls, call)
		pos = len(s.calls) - 1
		if td.Index != nil {
			if s.byIndex == nil {
				s.byIndex = map[int]int{}
			}
			s.byIndex[*td.Index] = pos
		}
	}
	if call.id == "" {
		call.id = td.ID
	}
	if call.name == "" {
		call.name = td.Function.Name
	}
	call.args.WriteString(td.Function.Arguments)
	switch {
	case !call.started && call.name != "":
		s.startCall(pos)
	case call.started && td.Function.Arguments != "":
		s.send(provider.Chunk{Kind: provider.ChunkToolArgs, Index: pos, Text: td.Function.Arguments})
	}
}

// startCall emits the ChunkToolCall of call pos, and the arguments that
// arrived before its name did.
func (s *chatStream) startCall(pos int) {
	call := s.calls[pos]
	if call.id == "" {
		call.id = "call_" + rand.Text()
	}
	call.started = true
	s.send(provider.Chunk{Kind: provider.ChunkToolCall, Index: pos, ToolCallID: call.id, ToolName: call.name})
	if call.args.Len() > 0 {
		s.send(provider.Chunk{Kind: provider.ChunkToolArgs, Index: pos, Text: call.args.String()})
	}
}

func (s *chatStream) response() *provider.Response {
	resp := &provider.Response{Usage: s.usage}
	if s.reasoning.Len() > 0 {
		resp.Content = append(resp.Content, runnel.Block{Type: runnel.BlockReasoning, Text: s.reasoning.String()})
	}
	if s.text.Len() > 0 {
		resp.Content = append(resp.Content, runnel.Block{Type: runnel.BlockText, Text: s.text.String()})
	}
	for i, c := range s.calls {
		if !c.started {
			s.startCall(i)
		}
		resp.Content = append(resp.Content, runnel.Block{
			Type: runnel.BlockToolCall, ToolCallID: c.id, ToolName: c.name, Input: toolInput(c.args.String()),
		})
	}
	resp.StopReason = chatStopReason(s.finish, len(s.calls) > 0)
	return resp
}

// chatStopReason normalises finish_reason. Some servers say "stop" after
// tool calls; the calls are what the loop must act on.
func chatStopReason(finish string, calls bool) string {
	switch {
	case finish == "length":
		return "max_tokens"
	case calls || finish == "tool_calls" || finish == "function_call":
		return "tool_use"
	case finish == "stop" || finish == "":
		return "end_turn"
	}
	return finish
}
