package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

const responsesAPI = "openai responses"

// Responses streams from the Responses API. Requests are sent with
// store=false: runnel replays the whole conversation on every call and
// keeps nothing on the provider's side. It is safe for concurrent use.
type Responses struct {
	ep endpoint
	// history keeps the messages' encodings across a run's steps; mu
	// guards it.
	mu      sync.Mutex
	history provider.EncodedMessages
}

// NewResponses returns a Responses API adapter.
func NewResponses(cfg provider.Config) *Responses {
	return &Responses{ep: newEndpoint(responsesAPI, "responses", cfg)}
}

// Stream implements provider.Model.
func (r *Responses) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	body, err := r.encode(req)
	if err != nil {
		return nil, &provider.Error{Message: responsesAPI + ": the request could not be encoded", Err: err}
	}
	res, err := r.ep.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	er := provider.NewEventReader(res.Body)
	st := &responsesStream{emit: emit, items: map[int64]*respItem{}}
	for er.Next() {
		data := bytes.TrimSpace(er.Data())
		if len(data) == 0 {
			continue
		}
		var ev respEvent
		if err := provider.DecodeChunk(data, &ev); err != nil {
			// A field of an unexpected type in an event runnel does not
			// read is the server's business; anything else is malformed.
			if provider.IsTypeMismatch(err) && !ev.matters() {
				continue
			}
			return nil, provider.StreamError(responsesAPI, st.emitted, err, "the server sent a malformed event: %v", err)
		}
		resp, err := st.apply(&ev)
		if err != nil {
			return nil, r.ep.scrubbed(err)
		}
		if resp != nil {
			return resp, nil
		}
	}
	return nil, streamEnd(ctx, responsesAPI, er, st.emitted, "response.completed")
}

// responsesRequest is the request body: only the fields runnel sends.
type responsesRequest struct {
	Model           string          `json:"model,omitempty"`
	Input           []respInputItem `json:"input,omitempty"`
	Instructions    string          `json:"instructions,omitempty"`
	MaxOutputTokens int             `json:"max_output_tokens,omitempty"`
	Store           bool            `json:"store"`
	Stream          bool            `json:"stream"`
	Tools           []respTool      `json:"tools,omitempty"`
}

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is sent as false: the API's default, true, would reject most
	// schemas written for other APIs.
	Strict bool `json:"strict"`
}

// respInputItem is a message, function_call or function_call_output item.
type respInputItem struct {
	Type string `json:"type"`
	Role string `json:"role,omitempty"`
	// Content is a string, or []respPart for a user message.
	Content   any     `json:"content,omitempty"`
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments string  `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"` // may be empty, never absent
}

// respPart is a user content part; the field order gives the keys in the
// order OpenAI's own SDK writes them.
type respPart struct {
	Detail   string `json:"detail,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	Filename string `json:"filename,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Text     string `json:"text,omitempty"`
	Type     string `json:"type"`
}

// encode writes the request body: the bytes encoding/json writes for
// responsesBody(req), with each message's items taken from the run's
// cache.
func (r *Responses) encode(req *provider.Request) ([][]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tail := responsesBody(&provider.Request{System: req.System, Tools: req.Tools, MaxTokens: req.MaxTokens})
	tail.Input = nil
	joined, err := r.history.Join(req.Messages, func(m runnel.Message) ([]byte, error) {
		return appendEach(nil, responsesInput([]runnel.Message{m}))
	})
	if err != nil {
		return nil, err
	}
	return assemble(req.Model, "input", tail, func(dst []byte) ([]byte, error) { return dst, nil }, joined)
}

func responsesBody(req *provider.Request) *responsesRequest {
	b := &responsesRequest{
		Model:           req.Model,
		Input:           responsesInput(req.Messages),
		Instructions:    req.System,
		MaxOutputTokens: max(req.MaxTokens, 0),
		Stream:          true,
	}
	if len(req.Tools) > 0 {
		b.Tools = make([]respTool, len(req.Tools))
		for i, t := range req.Tools {
			b.Tools[i] = respTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: toolSchema(t.Schema)}
		}
	}
	return b
}

// responsesInput converts the conversation to input items. Tool results
// become function_call_output items wherever they sit; reasoning is not
// replayed, since the API accepts it only as its own encrypted items.
// Message items spell out their type: OpenAI infers it, but some
// compatible servers insist on it.
func responsesInput(msgs []runnel.Message) []respInputItem {
	items := make([]respInputItem, 0, len(msgs))
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == runnel.BlockToolResult {
				out := b.OutputText()
				items = append(items, respInputItem{Type: "function_call_output", CallID: b.ToolCallID, Output: &out})
			}
		}
		switch m.Role {
		case runnel.RoleAssistant:
			items = responsesAssistant(items, m.Content)
		case runnel.RoleSystem:
			if t := m.Text(); t != "" {
				items = append(items, respInputItem{Type: "message", Role: "system", Content: t})
			}
		case runnel.RoleUser:
			if parts := responsesUserParts(m.Content); len(parts) > 0 {
				items = append(items, respInputItem{Type: "message", Role: "user", Content: parts})
			}
		}
	}
	return items
}

func responsesUserParts(blocks []runnel.Block) []respPart {
	var parts []respPart
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText:
			if b.Text != "" {
				parts = append(parts, respPart{Type: "input_text", Text: b.Text})
			}
		case runnel.BlockResource:
			switch {
			case b.Data != "":
				parts = append(parts, respPart{Type: "input_file", FileData: dataURL(b.MimeType, b.Data), Filename: fileName(b)})
			case b.Text != "":
				parts = append(parts, respPart{Type: "input_text", Text: b.Text})
			case b.URI != "":
				parts = append(parts, respPart{Type: "input_file", FileURL: b.URI})
			}
		case runnel.BlockImage:
			if u := imageURL(b.MimeType, b.Data, b.URI); u != "" {
				parts = append(parts, respPart{Type: "input_image", Detail: "auto", ImageURL: u})
			}
		}
	}
	return parts
}

// responsesAssistant appends the assistant's items in its order: text up
// to a tool call is one message item, then the call.
func responsesAssistant(items []respInputItem, blocks []runnel.Block) []respInputItem {
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			items = append(items, respInputItem{Type: "message", Role: "assistant", Content: text.String()})
			text.Reset()
		}
	}
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText:
			text.WriteString(b.Text)
		case runnel.BlockToolCall:
			flush()
			items = append(items, respInputItem{Type: "function_call", CallID: b.ToolCallID, Name: b.ToolName, Arguments: toolArguments(b.Input)})
		}
	}
	flush()
	return items
}

// respEvent is one streamed event, decoded into the fields runnel reads.
type respEvent struct {
	Type         string        `json:"type"`
	OutputIndex  int64         `json:"output_index"`
	SummaryIndex int64         `json:"summary_index"`
	Delta        string        `json:"delta"`
	Arguments    string        `json:"arguments"`
	Item         respEventItem `json:"item"`
	Response     respResult    `json:"response"`
	// Code and Message are an error event's.
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respEventItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type respResult struct {
	Status string `json:"status"`
	Error  struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	IncompleteDetails struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// matters reports whether apply acts on the event, judged by its type
// (and its item's type) alone.
func (ev *respEvent) matters() bool {
	switch ev.Type {
	case "response.output_item.added", "response.output_item.done":
		return ev.Item.Type == "function_call" || ev.Item.Type == "message"
	case "response.output_text.delta",
		"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
		"response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.completed", "response.incomplete", "response.failed", "error":
		return true
	}
	return false
}

// responsesStream assembles a response from events, keyed by the
// output_index each event names.
type responsesStream struct {
	emit    func(provider.Chunk)
	emitted bool
	items   map[int64]*respItem
	calls   int // tool calls started so far
}

type respItem struct {
	index   int64
	kind    string // "reasoning", "message" or "function_call"
	text    strings.Builder
	summary int64 // the reasoning summary part being written
	callID  string
	name    string
	call    int // this call's Chunk Index
	started bool
}

func (s *responsesStream) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

// item is output item index, made as kind on first use; nil when index
// names an item of another kind. Such an event is a broken stream's, and
// what it carries is dropped rather than streamed as one thing and
// recorded as another (text into a call's arguments, say).
func (s *responsesStream) item(index int64, kind string) *respItem {
	it := s.items[index]
	if it == nil {
		it = &respItem{index: index, kind: kind}
		s.items[index] = it
	}
	if it.kind != kind {
		return nil
	}
	return it
}

// apply handles one event; it returns the response once the terminating
// event arrived.
func (s *responsesStream) apply(ev *respEvent) (*provider.Response, error) {
	switch ev.Type {
	case "response.output_item.added":
		s.itemAdded(ev)
	case "response.output_text.delta":
		it := s.item(ev.OutputIndex, "message")
		if it == nil {
			break
		}
		it.text.WriteString(ev.Delta)
		s.send(provider.Chunk{Kind: provider.ChunkText, Text: ev.Delta})
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		it := s.item(ev.OutputIndex, "reasoning")
		if it == nil {
			break
		}
		delta := ev.Delta
		if ev.SummaryIndex != it.summary && it.text.Len() > 0 {
			delta = "\n\n" + delta
		}
		it.summary = ev.SummaryIndex
		it.text.WriteString(delta)
		s.send(provider.Chunk{Kind: provider.ChunkReasoning, Text: delta})
	case "response.function_call_arguments.delta":
		if it := s.item(ev.OutputIndex, "function_call"); it != nil {
			s.callArgs(it, ev.Delta)
		}
	case "response.function_call_arguments.done":
		if it := s.item(ev.OutputIndex, "function_call"); it != nil && it.text.Len() == 0 {
			s.callArgs(it, ev.Arguments)
		}
	case "response.output_item.done":
		s.itemDone(ev)
	case "response.completed", "response.incomplete":
		return s.response(&ev.Response), nil
	case "response.failed":
		return nil, s.failure(ev.Response.Error.Code, ev.Response.Error.Message)
	case "error":
		return nil, s.failure(ev.Code, ev.Message)
	}
	return nil, nil
}

func (s *responsesStream) itemAdded(ev *respEvent) {
	switch ev.Item.Type {
	case "function_call":
		it := s.item(ev.OutputIndex, "function_call")
		if it == nil {
			return
		}
		it.callID, it.name = ev.Item.CallID, ev.Item.Name
		s.startCall(it)
		s.callArgs(it, ev.Item.Arguments)
	case "message", "reasoning":
		s.item(ev.OutputIndex, ev.Item.Type)
	}
}

// itemDone fills in what a server sent only in the finished item.
func (s *responsesStream) itemDone(ev *respEvent) {
	switch ev.Item.Type {
	case "function_call":
		it := s.item(ev.OutputIndex, "function_call")
		if it == nil {
			return
		}
		if it.callID == "" {
			it.callID, it.name = ev.Item.CallID, ev.Item.Name
		}
		s.startCall(it)
		if it.text.Len() == 0 {
			s.callArgs(it, ev.Item.Arguments)
		}
	case "message":
		it := s.item(ev.OutputIndex, "message")
		if it == nil || it.text.Len() > 0 {
			return
		}
		for _, c := range ev.Item.Content {
			if c.Type == "output_text" && c.Text != "" {
				it.text.WriteString(c.Text)
				s.send(provider.Chunk{Kind: provider.ChunkText, Text: c.Text})
			}
		}
	}
}

func (s *responsesStream) startCall(it *respItem) {
	if it.started {
		return
	}
	it.started, it.call = true, s.calls
	s.calls++
	s.send(provider.Chunk{Kind: provider.ChunkToolCall, Index: it.call, ToolCallID: it.callID, ToolName: it.name})
}

func (s *responsesStream) callArgs(it *respItem, delta string) {
	if delta == "" {
		return
	}
	s.startCall(it)
	it.text.WriteString(delta)
	s.send(provider.Chunk{Kind: provider.ChunkToolArgs, Index: it.call, Text: delta})
}

func (s *responsesStream) failure(code, msg string) error {
	e := provider.StreamError(responsesAPI, s.emitted, nil, "the response failed: %s", provider.OneLine(strings.TrimSpace(code+" "+msg)))
	// Only a server-side or rate failure is worth another attempt.
	e.Retryable = e.Retryable && (code == "server_error" || code == "rate_limit_exceeded")
	return e
}

func (s *responsesStream) response(r *respResult) *provider.Response {
	resp := &provider.Response{Usage: runnel.Usage{
		Input: r.Usage.InputTokens, Output: r.Usage.OutputTokens, Total: r.Usage.TotalTokens,
	}}
	if resp.Usage.Total == 0 {
		resp.Usage.Total = resp.Usage.Input + resp.Usage.Output
	}
	its := make([]*respItem, 0, len(s.items))
	for _, it := range s.items {
		its = append(its, it)
	}
	slices.SortFunc(its, func(a, b *respItem) int { return cmp.Compare(a.index, b.index) })
	for _, it := range its {
		switch it.kind {
		case "reasoning":
			if it.text.Len() > 0 {
				resp.Content = append(resp.Content, runnel.Block{Type: runnel.BlockReasoning, Text: it.text.String()})
			}
		case "message":
			if it.text.Len() > 0 {
				resp.Content = append(resp.Content, runnel.Block{Type: runnel.BlockText, Text: it.text.String()})
			}
		case "function_call":
			if !it.started {
				continue // never announced: an empty delta for an item no event added
			}
			resp.Content = append(resp.Content, runnel.Block{
				Type: runnel.BlockToolCall, ToolCallID: it.callID, ToolName: it.name, Input: toolInput(it.text.String()),
			})
		}
	}
	switch {
	case r.Status == "incomplete" && r.IncompleteDetails.Reason == "max_output_tokens":
		resp.StopReason = "max_tokens"
	case r.Status == "incomplete" && r.IncompleteDetails.Reason != "":
		resp.StopReason = r.IncompleteDetails.Reason
	case s.calls > 0:
		resp.StopReason = "tool_use"
	default:
		resp.StopReason = "end_turn"
	}
	return resp
}
