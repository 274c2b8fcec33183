// Package anthropic adapts the Anthropic Messages API to provider.Model.
//
// Requests are encoded here with encoding/json and posted with the
// configured http.Client; the event stream is read here too, and must end
// with message_stop. The official SDK (github.com/anthropics/anthropic-sdk-go)
// is not used at run time: its reflective request encoder cost more than
// the rest of a step put together (docs/decisions.md, "Providers"), and it
// reports a stream cut between events as a normal end. Retries belong to
// provider.WithPolicy, so one Stream call is one HTTP request.
//
//	m := anthropic.New(provider.Config{APIKey: key})
//	resp, err := m.Stream(ctx, &provider.Request{Model: "claude-sonnet-4-5", Messages: msgs}, emit)
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

const (
	api              = "anthropic messages"
	defaultBaseURL   = "https://api.anthropic.com/"
	defaultVersion   = "2023-06-01"
	defaultMaxTokens = 8192
)

// Messages streams from the Messages API. It is safe for concurrent use.
type Messages struct {
	url    string
	urlErr error
	header http.Header
	client *http.Client
	key    string

	// mu guards what is kept across a run's steps: each message's blocks
	// (conv, by position) and the conversation's encoding (history).
	mu      sync.Mutex
	conv    []converted
	history provider.EncodedMessages
	units   [][2]int // encode's, reused
}

// New returns a Messages API adapter. cfg.APIVersion, when set, is sent as
// the anthropic-version header (default 2023-06-01). Nothing is read from
// the environment.
func New(cfg provider.Config) *Messages {
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	h := http.Header{}
	h.Set("Accept", "application/json") // what the SDK sends, streaming or not
	h.Set("User-Agent", "runnel")
	h.Set("Anthropic-Version", defaultVersion)
	if cfg.APIKey != "" {
		h.Set("X-Api-Key", cfg.APIKey)
	}
	if cfg.APIVersion != "" {
		h.Set("Anthropic-Version", cfg.APIVersion)
	}
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	u, err := provider.EndpointURL(base, "v1/messages", nil)
	return &Messages{url: u, urlErr: err, header: h, client: provider.SameOriginClient(cfg.HTTPClient), key: cfg.APIKey}
}

// Stream implements provider.Model.
func (m *Messages) Stream(ctx context.Context, req *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	if m.urlErr != nil {
		return nil, &provider.Error{Message: api + ": " + m.urlErr.Error(), Err: m.urlErr}
	}
	parts, err := m.encode(req)
	if err != nil {
		return nil, &provider.Error{Message: api + ": the request could not be encoded", Err: err}
	}
	res, err := provider.OpenStream(ctx, m.client, &provider.StreamRequest{
		API: api, URL: m.url, Header: m.header, Parts: parts, Secret: m.key,
	})
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	er := provider.NewEventReader(res.Body)
	st := newStreamState(emit)
	for er.Next() {
		data := bytes.TrimSpace(er.Data())
		name := er.Name()
		if len(data) == 0 || string(name) == "ping" {
			continue
		}
		var ev event
		if err := provider.DecodeChunk(data, &ev); err != nil {
			return nil, provider.StreamError(api, st.emitted, err, "the server sent a malformed event: %s", provider.Scrub(provider.OneLine(err.Error()), m.key))
		}
		switch {
		case string(name) == "error" || ev.Type == "error":
			// The API failed after the 200 status.
			e := provider.StreamError(api, st.emitted, nil, "the API reported an error mid-stream: %s",
				provider.Scrub(provider.OneLine(ev.Error.Type+": "+ev.Error.Message), m.key))
			t := ev.Error.Type
			e.Retryable = e.Retryable && (t == "overloaded_error" || t == "api_error" || t == "rate_limit_error")
			return nil, e
		case ev.Type == "message_stop":
			return st.response(), nil
		}
		st.apply(&ev)
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err := er.Err(); err != nil {
		return nil, provider.StreamError(api, st.emitted, err, "the stream broke off: %v", err)
	}
	return nil, provider.StreamError(api, st.emitted, io.ErrUnexpectedEOF, "the stream ended without message_stop")
}

// event is one streamed event, decoded into the fields runnel reads.
type event struct {
	Type  string `json:"type"`
	Index int64  `json:"index"`
	// Message is message_start's.
	Message struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	// Usage is message_delta's, cumulative.
	Usage usage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
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

func (s *streamState) apply(ev *event) {
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
			s.stop = ev.Delta.StopReason
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

func (s *streamState) blockStart(ev *event) {
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
		if in := bytes.TrimSpace(cb.Input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
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

func (s *streamState) blockDelta(ev *event) {
	bl := s.byIndex[ev.Index]
	if bl == nil {
		return
	}
	// A delta for a block of another kind (text into a call's arguments)
	// is a broken stream's: dropped, rather than streamed as one thing
	// and recorded as another.
	d := ev.Delta
	switch t := bl.b.Type; {
	case d.Type == "text_delta" && t == runnel.BlockText:
		bl.text.WriteString(d.Text)
		s.send(provider.Chunk{Kind: provider.ChunkText, Text: d.Text})
	case d.Type == "thinking_delta" && t == runnel.BlockReasoning:
		bl.text.WriteString(d.Thinking)
		s.send(provider.Chunk{Kind: provider.ChunkReasoning, Text: d.Thinking})
	case d.Type == "signature_delta" && t == runnel.BlockReasoning:
		bl.b.Signature += d.Signature
	case d.Type == "input_json_delta" && t == runnel.BlockToolCall:
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

// encode writes the request body, in parts: the bytes encoding/json
// writes for body(req), with the conversation's encoding kept across the
// run's steps (provider.EncodedMessages). The API merges consecutive
// messages of a role, so the unit of encoding is such a run of messages;
// a message that converts to no block (skipped) joins the unit it sits in,
// as it does in messages.
func (m *Messages) encode(req *provider.Request) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msgs := req.Messages
	keep := 0
	for keep < len(m.conv) && keep < len(msgs) && m.conv[keep].key == provider.KeyOf(msgs[keep]) {
		keep++
	}
	m.conv = m.conv[:keep]
	for _, msg := range msgs[keep:] {
		m.conv = append(m.conv, convert(msg))
	}
	units := m.units[:0] // [start, end) of each unit's messages
	defer func() { m.units = units }()
	role := ""
	for i, c := range m.conv {
		switch {
		case len(units) == 0:
			units = append(units, [2]int{i, i + 1})
		case len(c.blocks) > 0 && role != "" && c.role != role:
			units = append(units, [2]int{i, i + 1})
		default:
			units[len(units)-1][1] = i + 1
		}
		if len(c.blocks) > 0 {
			role = c.role
		}
	}
	joined, err := m.history.JoinUnits(len(units), func(i int) []runnel.Message { return msgs[units[i][0]:units[i][1]] },
		func(i int) ([]byte, error) { return m.encodeUnit(units[i][0], units[i][1]) })
	if err != nil {
		return nil, err
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	head, err := provider.AppendJSON([]byte(`{"max_tokens":`), maxTokens)
	if err != nil {
		return nil, err
	}
	head = append(head, `,"messages":[`...)
	whole := body(&provider.Request{Model: req.Model, System: systemText(req), Tools: req.Tools})
	rest, err := provider.AppendJSON([]byte("]"), tail{Model: whole.Model, System: whole.System, Tools: whole.Tools, Stream: whole.Stream})
	if err != nil {
		return nil, err
	}
	rest[1] = ',' // the tail always has a model and stream
	return [][]byte{head, joined, append(rest, '\n')}, nil
}

// tail is the request's fields after its messages, in their order.
type tail struct {
	Model  string         `json:"model"`
	System []contentBlock `json:"system,omitempty"`
	Tools  []tool         `json:"tools,omitempty"`
	Stream bool           `json:"stream"`
}

// encodeUnit encodes the messages start to end, which the API takes as
// one message; nothing when none of them has a block.
func (m *Messages) encodeUnit(start, end int) ([]byte, error) {
	var content []contentBlock
	role := ""
	for _, c := range m.conv[start:end] {
		if len(c.blocks) > 0 {
			content = append(content, c.blocks...) // a copy: the cached blocks stay as they are
			role = c.role
		}
	}
	if len(content) == 0 {
		return nil, nil
	}
	if role == "user" && end-start > 1 {
		resultsFirst(content)
	}
	return provider.AppendJSON(nil, message{Content: content, Role: role})
}
