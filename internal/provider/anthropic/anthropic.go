// Package anthropic adapts the Anthropic Messages API to provider.Model.
//
// The official SDK builds, authenticates and sends each request and
// decodes the event stream (its own retries off: provider.WithPolicy owns
// retries); this package checks that the stream really ended with
// message_stop, because the SDK reports a stream cut between events as a
// normal end.
//
//	m := anthropic.New(provider.Config{APIKey: key})
//	resp, err := m.Stream(ctx, &provider.Request{Model: "claude-sonnet-4-5", Messages: msgs}, emit)
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

const (
	api              = "anthropic messages"
	defaultBaseURL   = "https://api.anthropic.com/"
	defaultMaxTokens = 8192
)

// Messages streams from the Messages API. It is safe for concurrent use.
type Messages struct {
	svc anthropic.MessageService
	key string
}

// New returns a Messages API adapter. cfg.APIVersion, when set, is sent as
// the anthropic-version header.
func New(cfg provider.Config) *Messages {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	// Built from these options alone, never anthropic.NewClient, which
	// would read ANTHROPIC_* variables and config files.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		// The SDK's own spans and trace headers would be steered by
		// ANTHROPIC_OPEN_TELEMETRY* variables; model-call spans are
		// runnel's to make.
		option.WithOpenTelemetryTraces(false),
		option.WithOpenTelemetryPropagation(false),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.APIVersion != "" {
		opts = append(opts, option.WithHeader("anthropic-version", cfg.APIVersion))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &Messages{svc: anthropic.NewMessageService(opts...), key: cfg.APIKey}
}

// Stream implements provider.Model.
func (m *Messages) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	var raw *http.Response
	body := &errorBody{}
	stream := m.svc.NewStreaming(ctx, params(req),
		option.WithMiddleware(body.middleware),
		option.WithResponseInto(&raw))
	defer stream.Close()
	st := newStreamState(emit)
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "message_stop" {
			return st.response(), nil
		}
		st.apply(&ev)
	}
	return nil, m.streamError(ctx, raw, body, stream.Err(), st.emitted)
}

// streamError classifies why the stream stopped before message_stop.
func (m *Messages) streamError(ctx context.Context, raw *http.Response, body *errorBody, err error, emitted bool) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	switch {
	case raw == nil:
		return provider.ConnError(api, err)
	case raw.StatusCode >= 400:
		return provider.HTTPError(api, raw.StatusCode, raw.Header, scrub(errorDetail(body.b), m.key))
	case err == nil:
		return provider.StreamError(api, emitted, io.ErrUnexpectedEOF, "the stream ended without message_stop")
	}
	var ae *anthropic.Error
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ae):
		// An error event: the API failed after the 200 status.
		typ, msg := errorEvent(ae.RawJSON())
		e := provider.StreamError(api, emitted, nil, "the API reported an error mid-stream: %s", scrub(oneLine(typ+": "+msg), m.key))
		e.Retryable = e.Retryable && (typ == "overloaded_error" || typ == "api_error" || typ == "rate_limit_error")
		return e
	case errors.As(err, &se), errors.As(err, &te), strings.HasPrefix(err.Error(), "received error while streaming"):
		return provider.StreamError(api, emitted, err, "the server sent a malformed event: %s", scrub(oneLine(err.Error()), m.key))
	}
	return provider.StreamError(api, emitted, err, "the stream broke off: %v", err)
}

// errorEvent reads an error event's {"error": {"type", "message"}}.
func errorEvent(raw string) (typ, msg string) {
	var v struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(raw), &v)
	return v.Error.Type, v.Error.Message
}

// errorBody keeps the body of an error response so its message can be
// reported whatever shape it has (the SDK keeps only its own error JSON).
type errorBody struct{ b []byte }

func (e *errorBody) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	e.b, _ = io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(e.b))
	return res, nil
}

// errorDetail extracts the API's message from an error body.
func errorDetail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			return oneLine(nested.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return oneLine(s)
		}
		return oneLine(v.Message)
	}
	if b[0] == '<' {
		return ""
	}
	return oneLine(string(b))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// scrub removes the API key from a server's message.
func scrub(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// streamState assembles a response from events. Blocks keep the order of
// their content index.
type streamState struct {
	emit    func(provider.Chunk)
	emitted bool
	blocks  []*block
	byIndex map[int64]*block
	calls   int
	stop    string
	usage   runnel.Usage
}

type block struct {
	b    runnel.Block
	text strings.Builder // text, thinking, or tool arguments
	call int             // a tool call's Chunk Index
	// initial is a tool_use's input from content_block_start, used when no
	// input_json_delta follows.
	initial json.RawMessage
}

func newStreamState(emit func(provider.Chunk)) *streamState {
	return &streamState{emit: emit, byIndex: map[int64]*block{}}
}

func (s *streamState) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

func (s *streamState) apply(ev *anthropic.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.usage.Input = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		s.usage.Output = u.OutputTokens
	case "content_block_start":
		s.blockStart(ev)
	case "content_block_delta":
		s.blockDelta(ev)
	case "message_delta":
		if ev.Delta.StopReason != "" {
			s.stop = string(ev.Delta.StopReason)
		}
		u := ev.Usage
		if in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens; in > 0 {
			s.usage.Input = in
		}
		if u.OutputTokens > 0 {
			s.usage.Output = u.OutputTokens // cumulative
		}
	}
}

func (s *streamState) blockStart(ev *anthropic.MessageStreamEventUnion) {
	cb := ev.ContentBlock
	bl := &block{}
	switch cb.Type {
	case "text":
		bl.b.Type = runnel.BlockText
	case "thinking":
		bl.b = runnel.Block{Type: runnel.BlockReasoning, Signature: cb.Signature}
	case "redacted_thinking":
		bl.b = runnel.Block{Type: runnel.BlockReasoning, Data: cb.Data}
	case "tool_use":
		bl.b = runnel.Block{Type: runnel.BlockToolCall, ToolCallID: cb.ID, ToolName: cb.Name}
		bl.call = s.calls
		s.calls++
		if in, err := json.Marshal(cb.Input); err == nil && cb.Input != nil {
			bl.initial = in
		}
		s.send(provider.Chunk{Kind: provider.ChunkToolCall, Index: bl.call, ToolCallID: cb.ID, ToolName: cb.Name})
	default:
		return // server tools and other blocks runnel does not replay
	}
	s.blocks = append(s.blocks, bl)
	s.byIndex[ev.Index] = bl
	switch {
	case cb.Type == "text" && cb.Text != "":
		bl.text.WriteString(cb.Text)
		s.send(provider.Chunk{Kind: provider.ChunkText, Text: cb.Text})
	case cb.Type == "thinking" && cb.Thinking != "":
		bl.text.WriteString(cb.Thinking)
		s.send(provider.Chunk{Kind: provider.ChunkReasoning, Text: cb.Thinking})
	}
}

func (s *streamState) blockDelta(ev *anthropic.MessageStreamEventUnion) {
	bl := s.byIndex[ev.Index]
	if bl == nil {
		return
	}
	d := ev.Delta
	switch d.Type {
	case "text_delta":
		bl.text.WriteString(d.Text)
		s.send(provider.Chunk{Kind: provider.ChunkText, Text: d.Text})
	case "thinking_delta":
		bl.text.WriteString(d.Thinking)
		s.send(provider.Chunk{Kind: provider.ChunkReasoning, Text: d.Thinking})
	case "signature_delta":
		bl.b.Signature += d.Signature
	case "input_json_delta":
		if d.PartialJSON != "" {
			bl.text.WriteString(d.PartialJSON)
			s.send(provider.Chunk{Kind: provider.ChunkToolArgs, Index: bl.call, Text: d.PartialJSON})
		}
	}
}

func (s *streamState) response() *provider.Response {
	resp := &provider.Response{Usage: s.usage}
	resp.Usage.Total = s.usage.Input + s.usage.Output
	for _, bl := range s.blocks {
		b := bl.b
		switch b.Type {
		case runnel.BlockText:
			b.Text = bl.text.String()
			if b.Text == "" {
				continue
			}
		case runnel.BlockReasoning:
			b.Text = bl.text.String()
		case runnel.BlockToolCall:
			args := bl.text.String()
			if args == "" && len(bl.initial) > 0 {
				args = string(bl.initial)
			}
			b.Input = toolInput(args)
		}
		resp.Content = append(resp.Content, b)
	}
	resp.StopReason = s.stop
	if resp.StopReason == "" {
		resp.StopReason = "end_turn"
		if s.calls > 0 {
			resp.StopReason = "tool_use"
		}
	}
	return resp
}

// toolInput is a tool call's complete arguments as a block's Input: empty
// becomes {}, and text that is not JSON is kept as a JSON string so the
// loop can tell the model its arguments were invalid.
func toolInput(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if a == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(a)) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(args) // a string always marshals
	return b
}
