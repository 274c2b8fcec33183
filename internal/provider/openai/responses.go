package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

const responsesAPI = "openai responses"

// Responses streams from the Responses API. Requests are sent with
// store=false: runnel replays the whole conversation on every call and
// keeps nothing on the provider's side. It is safe for concurrent use.
type Responses struct {
	svc responses.ResponseService
	key string
}

// NewResponses returns a Responses API adapter.
func NewResponses(cfg provider.Config) *Responses {
	return &Responses{svc: responses.NewResponseService(clientOptions(cfg)...), key: cfg.APIKey}
}

// Stream implements provider.Model.
func (r *Responses) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	var raw *http.Response
	body := &errorBody{}
	_, err := r.svc.New(ctx, responsesParams(req),
		option.WithJSONSet("stream", true),
		option.WithMiddleware(body.middleware),
		option.WithResponseBodyInto(&raw))
	if err != nil {
		return nil, requestError(ctx, responsesAPI, r.key, raw, body, err)
	}
	if err := checkStream(responsesAPI, raw); err != nil {
		return nil, err
	}
	dec := ssestream.NewDecoder(raw)
	defer dec.Close()
	st := &responsesStream{emit: emit, items: map[int64]*respItem{}}
	for dec.Next() {
		data := sseData(dec.Event())
		if len(data) == 0 {
			continue
		}
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, provider.StreamError(responsesAPI, st.emitted, err, "the server sent a malformed event: %v", err)
		}
		resp, err := st.apply(&ev)
		if err != nil || resp != nil {
			return resp, err
		}
	}
	return nil, streamEnd(ctx, responsesAPI, dec, st.emitted, "response.completed")
}

func responsesParams(req *provider.Request) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model: shared.ResponsesModel(req.Model),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responsesInput(req.Messages)},
		Store: openai.Bool(false),
	}
	if req.System != "" {
		p.Instructions = openai.String(req.System)
	}
	if req.MaxTokens > 0 {
		p.MaxOutputTokens = openai.Int(int64(req.MaxTokens))
	}
	for _, t := range req.Tools {
		// strict defaults to true here, which would reject most schemas
		// written for other APIs.
		fn := &responses.FunctionToolParam{Name: t.Name, Parameters: schemaMap(t.Schema), Strict: openai.Bool(false)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	return p
}

// responsesInput converts the conversation to input items. Tool results
// become function_call_output items wherever they sit; reasoning is not
// replayed, since the API accepts it only as its own encrypted items.
func responsesInput(msgs []runnel.Message) responses.ResponseInputParam {
	var items responses.ResponseInputParam
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == runnel.BlockToolResult {
				out := responses.ResponseInputItemParamOfFunctionCallOutput(b.OutputText())
				out.OfFunctionCallOutput.CallID = openai.String(b.ToolCallID)
				items = append(items, out)
			}
		}
		switch m.Role {
		case runnel.RoleAssistant:
			items = append(items, responsesAssistant(m.Content)...)
		case runnel.RoleSystem:
			if t := m.Text(); t != "" {
				items = append(items, message(t, responses.EasyInputMessageRoleSystem))
			}
		case runnel.RoleUser:
			if parts := responsesUserParts(m.Content); len(parts) > 0 {
				items = append(items, message(parts, responses.EasyInputMessageRoleUser))
			}
		}
	}
	return items
}

// message is an input message item with its type spelt out: OpenAI infers
// it, but some compatible servers insist on it.
func message[T string | responses.ResponseInputMessageContentListParam](content T, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfMessage(content, role)
	it.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return it
}

func responsesUserParts(blocks []runnel.Block) responses.ResponseInputMessageContentListParam {
	var parts responses.ResponseInputMessageContentListParam
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText, runnel.BlockResource:
			if b.Text != "" {
				parts = append(parts, responses.ResponseInputContentParamOfInputText(b.Text))
			}
		case runnel.BlockImage:
			if u := imageURL(b.MimeType, b.Data, b.URI); u != "" {
				img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
				img.OfInputImage.ImageURL = openai.String(u)
				parts = append(parts, img)
			}
		}
	}
	return parts
}

// responsesAssistant keeps the assistant's order: text up to a tool call
// is one message item, then the call.
func responsesAssistant(blocks []runnel.Block) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			items = append(items, message(text.String(), responses.EasyInputMessageRoleAssistant))
			text.Reset()
		}
	}
	for _, b := range blocks {
		switch b.Type {
		case runnel.BlockText:
			text.WriteString(b.Text)
		case runnel.BlockToolCall:
			flush()
			items = append(items, responses.ResponseInputItemParamOfFunctionCall(toolArguments(b.Input), b.ToolCallID, b.ToolName))
		}
	}
	flush()
	return items
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

func (s *responsesStream) item(index int64, kind string) *respItem {
	it := s.items[index]
	if it == nil {
		it = &respItem{index: index, kind: kind}
		s.items[index] = it
	}
	return it
}

// apply handles one event; it returns the response once the terminating
// event arrived.
func (s *responsesStream) apply(ev *responses.ResponseStreamEventUnion) (*provider.Response, error) {
	switch ev.Type {
	case "response.output_item.added":
		s.itemAdded(ev)
	case "response.output_text.delta":
		it := s.item(ev.OutputIndex, "message")
		it.text.WriteString(ev.Delta)
		s.send(provider.Chunk{Kind: provider.ChunkText, Text: ev.Delta})
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		it := s.item(ev.OutputIndex, "reasoning")
		delta := ev.Delta
		if ev.SummaryIndex != it.summary && it.text.Len() > 0 {
			delta = "\n\n" + delta
		}
		it.summary = ev.SummaryIndex
		it.text.WriteString(delta)
		s.send(provider.Chunk{Kind: provider.ChunkReasoning, Text: delta})
	case "response.function_call_arguments.delta":
		s.callArgs(s.item(ev.OutputIndex, "function_call"), ev.Delta)
	case "response.function_call_arguments.done":
		if it := s.item(ev.OutputIndex, "function_call"); it.text.Len() == 0 {
			s.callArgs(it, ev.Arguments)
		}
	case "response.output_item.done":
		s.itemDone(ev)
	case "response.completed", "response.incomplete":
		return s.response(&ev.Response), nil
	case "response.failed":
		return nil, s.failure(string(ev.Response.Error.Code), ev.Response.Error.Message)
	case "error":
		return nil, s.failure(ev.Code, ev.Message)
	}
	return nil, nil
}

func (s *responsesStream) itemAdded(ev *responses.ResponseStreamEventUnion) {
	switch ev.Item.Type {
	case "function_call":
		it := s.item(ev.OutputIndex, "function_call")
		it.callID, it.name = ev.Item.CallID, ev.Item.Name
		s.startCall(it)
		s.callArgs(it, ev.Item.Arguments.OfString)
	case "message", "reasoning":
		s.item(ev.OutputIndex, ev.Item.Type)
	}
}

// itemDone fills in what a server sent only in the finished item.
func (s *responsesStream) itemDone(ev *responses.ResponseStreamEventUnion) {
	switch ev.Item.Type {
	case "function_call":
		it := s.item(ev.OutputIndex, "function_call")
		if it.callID == "" {
			it.callID, it.name = ev.Item.CallID, ev.Item.Name
		}
		s.startCall(it)
		if it.text.Len() == 0 {
			s.callArgs(it, ev.Item.Arguments.OfString)
		}
	case "message":
		it := s.item(ev.OutputIndex, "message")
		if it.text.Len() > 0 {
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
	e := provider.StreamError(responsesAPI, s.emitted, nil, "the response failed: %s", oneLine(strings.TrimSpace(code+" "+msg)))
	// Only a server-side or rate failure is worth another attempt.
	e.Retryable = e.Retryable && (code == "server_error" || code == "rate_limit_exceeded")
	return e
}

func (s *responsesStream) response(r *responses.Response) *provider.Response {
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
	slices.SortFunc(its, func(a, b *respItem) int { return int(a.index - b.index) })
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
