package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/anthropic"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-ant-test-0123456789"

// serve starts the fake model server and returns it with a config that
// reaches it through a transport of the test's own, closed at the end so
// no connection goroutine outlives the test.
func serve(t *testing.T, rules ...llmtest.Rule) (*llmtest.Server, provider.Config) {
	t.Helper()
	srv := llmtest.NewServer(llmtest.Script{Rules: rules})
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return srv, provider.Config{BaseURL: srv.URL, APIKey: testKey, HTTPClient: &http.Client{Transport: tr}}
}

func stream(t *testing.T, m provider.Model, req *provider.Request) ([]provider.Chunk, *provider.Response, error) {
	t.Helper()
	var chunks []provider.Chunk
	resp, err := m.Stream(t.Context(), req, func(c provider.Chunk) { chunks = append(chunks, c) })
	return chunks, resp, err
}

func hello(text string) *provider.Request {
	return &provider.Request{Model: "claude-test", Messages: []runnel.Message{runnel.UserText(text)}}
}

func TestTextAndUsage(t *testing.T) {
	srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "Hello, world!", ChunkSize: 5, Usage: &llmtest.Usage{Input: 12, Output: 7}}})
	chunks, resp, err := stream(t, anthropic.New(cfg), hello("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantChunks := []provider.Chunk{
		{Kind: provider.ChunkText, Text: "Hello"},
		{Kind: provider.ChunkText, Text: ", wor"},
		{Kind: provider.ChunkText, Text: "ld!"},
	}
	if diff := cmp.Diff(wantChunks, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	want := &provider.Response{
		Content:    []runnel.Block{{Type: runnel.BlockText, Text: "Hello, world!"}},
		Usage:      runnel.Usage{Input: 12, Output: 7, Total: 19},
		StopReason: "end_turn",
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	var body struct {
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil || body.MaxTokens != 8192 {
		t.Errorf("max_tokens = %d (%v), want the default 8192", body.MaxTokens, err)
	}
}

func TestThinking(t *testing.T) {
	_, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Reasoning: "Let me think.", Text: "42", ChunkSize: 8}})
	chunks, resp, err := stream(t, anthropic.New(cfg), hello("question"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantChunks := []provider.Chunk{
		{Kind: provider.ChunkReasoning, Text: "Let me t"},
		{Kind: provider.ChunkReasoning, Text: "hink."},
		{Kind: provider.ChunkText, Text: "42"},
	}
	if diff := cmp.Diff(wantChunks, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if len(resp.Content) != 2 || !strings.HasPrefix(resp.Content[0].Signature, "sig_") {
		t.Fatalf("content %+v: want a signed thinking block and text", resp.Content)
	}
	resp.Content[0].Signature = ""
	wantContent := []runnel.Block{
		{Type: runnel.BlockReasoning, Text: "Let me think."},
		{Type: runnel.BlockText, Text: "42"},
	}
	if diff := cmp.Diff(wantContent, resp.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
}

func TestToolCalls(t *testing.T) {
	_, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "Let me check.", ChunkSize: 6, ToolCalls: []llmtest.ToolCall{
		{ID: "toolu_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "toolu_b", Name: "now"},
	}}})
	req := hello("weather?")
	req.Tools = []provider.Tool{
		{Name: "get_weather", Description: "Weather by city", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "now"},
	}
	chunks, resp, err := stream(t, anthropic.New(cfg), req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantChunks := []provider.Chunk{
		{Kind: provider.ChunkText, Text: "Let me"},
		{Kind: provider.ChunkText, Text: " check"},
		{Kind: provider.ChunkText, Text: "."},
		{Kind: provider.ChunkToolCall, Index: 0, ToolCallID: "toolu_a", ToolName: "get_weather"},
		{Kind: provider.ChunkToolArgs, Index: 0, Text: `{"city`},
		{Kind: provider.ChunkToolArgs, Index: 0, Text: `":"Par`},
		{Kind: provider.ChunkToolArgs, Index: 0, Text: `is"}`},
		{Kind: provider.ChunkToolCall, Index: 1, ToolCallID: "toolu_b", ToolName: "now"},
		{Kind: provider.ChunkToolArgs, Index: 1, Text: `{}`},
	}
	if diff := cmp.Diff(wantChunks, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	want := &provider.Response{
		Content: []runnel.Block{
			{Type: runnel.BlockText, Text: "Let me check."},
			{Type: runnel.BlockToolCall, ToolCallID: "toolu_a", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "toolu_b", ToolName: "now", Input: json.RawMessage(`{}`)},
		},
		Usage:      runnel.Usage{Input: 10, Output: 5, Total: 15},
		StopReason: "tool_use",
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestConversationReplay(t *testing.T) {
	srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
	msgs := []runnel.Message{
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockText, Text: "Weather in Paris?"},
			{Type: runnel.BlockImage, Data: "aGVsbG8=", MimeType: "image/jpeg"},
			{Type: runnel.BlockImage, URI: "https://example.com/map.png"},
		}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{
			{Type: runnel.BlockReasoning, Text: "I should look it up.", Signature: "sig_1"},
			{Type: runnel.BlockReasoning, Text: "unsigned, from another provider"},
			{Type: runnel.BlockReasoning, Data: "opaque"},
			{Type: runnel.BlockText, Text: "Checking."},
			{Type: runnel.BlockToolCall, ToolCallID: "toolu_1", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "toolu_2", ToolName: "get_time", Input: json.RawMessage(`"not json"`)},
		}},
		{Role: runnel.RoleTool, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "toolu_1", Output: runnel.TextOutput("sunny")},
		}},
		// A second tool message and a user message right after it merge
		// into one user turn, results first.
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockText, Text: "and hurry"},
			{Type: runnel.BlockToolResult, ToolCallID: "toolu_2", Output: runnel.TextOutput(""), IsError: true},
		}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: "It is sunny."}}},
		runnel.UserText("Thanks!"),
	}
	req := &provider.Request{Model: "claude-test", System: "Be brief.", Messages: msgs, MaxTokens: 100,
		Tools: []provider.Tool{{Name: "get_weather", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}}}
	if _, _, err := stream(t, anthropic.New(cfg), req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var body struct {
		System    json.RawMessage `json:"system"`
		MaxTokens int             `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	got := []string{string(body.System), fmt.Sprint(body.MaxTokens)}
	for _, m := range body.Messages {
		got = append(got, m.Role+" "+string(m.Content))
	}
	for _, tl := range body.Tools {
		got = append(got, string(tl.InputSchema))
	}
	want := []string{
		`[{"text":"Be brief.","type":"text"}]`,
		"100",
		`user [{"text":"Weather in Paris?","type":"text"},` +
			`{"source":{"data":"aGVsbG8=","media_type":"image/jpeg","type":"base64"},"type":"image"},` +
			`{"source":{"url":"https://example.com/map.png","type":"url"},"type":"image"}]`,
		`assistant [{"signature":"sig_1","thinking":"I should look it up.","type":"thinking"},` +
			`{"data":"opaque","type":"redacted_thinking"},` +
			`{"text":"Checking.","type":"text"},` +
			`{"id":"toolu_1","input":{"city":"Paris"},"name":"get_weather","type":"tool_use"},` +
			`{"id":"toolu_2","input":{},"name":"get_time","type":"tool_use"}]`,
		`user [{"tool_use_id":"toolu_1","content":[{"text":"sunny","type":"text"}],"type":"tool_result"},` +
			`{"tool_use_id":"toolu_2","is_error":true,"type":"tool_result"},` +
			`{"text":"and hurry","type":"text"}]`,
		`assistant [{"text":"It is sunny.","type":"text"}]`,
		`user [{"text":"Thanks!","type":"text"}]`,
		`{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object","additionalProperties":false}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestToolResultInUserMessage(t *testing.T) {
	srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
	msgs := []runnel.Message{
		runnel.UserText("Delete it"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockToolCall, ToolCallID: "toolu_9", ToolName: "delete", Input: json.RawMessage(`{}`)}}},
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "toolu_9", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)},
		}},
	}
	if _, _, err := stream(t, anthropic.New(cfg), &provider.Request{Model: "m", Messages: msgs}); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []llmtest.Message{
		{Role: "user", Text: "Delete it"},
		{Role: "assistant", ToolCalls: []llmtest.ToolCall{{ID: "toolu_9", Name: "delete", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolResults: []llmtest.ToolResult{{CallID: "toolu_9", Text: `{"approved":true}`}}},
	}
	if diff := cmp.Diff(want, srv.Requests()[0].Conversation.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestHeadersAndKey(t *testing.T) {
	for _, tc := range []struct{ version, want string }{{"", "2023-06-01"}, {"2024-01-01", "2024-01-01"}} {
		srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
		cfg.APIVersion = tc.version
		cfg.Headers = map[string]string{"Anthropic-Beta": "test-beta"}
		if _, _, err := stream(t, anthropic.New(cfg), hello("hi")); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		h := srv.Requests()[0].Header
		// Compare without printing: the value is a credential.
		if h.Get("X-Api-Key") != testKey {
			t.Error("the x-api-key header does not carry the API key")
		}
		if got := h.Get("Anthropic-Version"); got != tc.want {
			t.Errorf("anthropic-version = %q, want %q", got, tc.want)
		}
		if got := h.Get("Anthropic-Beta"); got != "test-beta" {
			t.Errorf("anthropic-beta = %q, want the configured header", got)
		}
	}
}

func TestRetryAfterThenSuccess(t *testing.T) {
	srv, cfg := serve(t, llmtest.Rule{
		Reply: llmtest.Reply{Text: "finally"},
		Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: "7", Times: 2},
	})
	_, _, err := stream(t, anthropic.New(cfg), hello("hi"))
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Stream = %v, want a *provider.Error", err)
	}
	if pe.Status != 429 || !pe.Retryable || pe.RetryAfter != 7*time.Second {
		t.Errorf("error: status %d, retryable %v, retry after %v; want 429, true, 7s", pe.Status, pe.Retryable, pe.RetryAfter)
	}
	if !strings.Contains(pe.Message, "anthropic messages: HTTP 429: llmtest: scripted 429") {
		t.Errorf("message %q does not carry the status and the API's message", pe.Message)
	}
	m := provider.WithPolicy(anthropic.New(cfg), provider.Policy{MaxBackoff: time.Millisecond})
	_, resp, err := stream(t, m, hello("hi"))
	if err != nil {
		t.Fatalf("Stream with policy: %v", err)
	}
	if len(srv.Requests()) != 3 || resp.Content[0].Text != "finally" {
		t.Errorf("requests %d, content %v; want 3 requests and the reply", len(srv.Requests()), resp.Content)
	}
}

func TestServerErrorExhaustsAttempts(t *testing.T) {
	srv, cfg := serve(t, llmtest.Rule{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 529}})
	_, _, err := stream(t, provider.WithPolicy(anthropic.New(cfg), provider.Policy{Attempts: 3, BaseBackoff: time.Millisecond}), hello("hi"))
	if code := runnel.ErrorCodeOf(err); code != runnel.CodeProviderError {
		t.Fatalf("error code %q (%v), want provider_error", code, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "HTTP 529") || !strings.HasSuffix(msg, "(after 3 attempts)") {
		t.Errorf("message %q: want the status and the attempts", msg)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}

// The faults strike at event 8, among the text deltas (after message_start,
// ping and content_block_start).
func TestBrokenStreams(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    llmtest.Fault
		requests int
		wantErr  string
	}{
		{"cut mid-way", llmtest.Fault{Kind: llmtest.FaultCut, AfterChunks: 8}, 1, "the stream broke off"},
		{"malformed event", llmtest.Fault{Kind: llmtest.FaultMalformed, AfterChunks: 8}, 1, "malformed"},
		{"cut before the response", llmtest.Fault{Kind: llmtest.FaultCut, Times: 1}, 2, ""},
		{"cut after the headers", llmtest.Fault{Kind: llmtest.FaultCut, FlushHeaders: true, Times: 1}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "a long enough answer", ChunkSize: 2}, Fault: &tc.fault})
			_, resp, err := stream(t, provider.WithPolicy(anthropic.New(cfg), provider.Policy{BaseBackoff: time.Millisecond}), hello("hi"))
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("requests = %d, want %d", n, tc.requests)
			}
			if tc.wantErr == "" {
				if err != nil || resp.Content[0].Text != "a long enough answer" {
					t.Errorf("Stream = %v, %v; want the retried answer", resp, err)
				}
				return
			}
			if runnel.ErrorCodeOf(err) != runnel.CodeProviderError || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Stream error = %v; want a provider_error saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    llmtest.Fault
		policy   provider.Policy
		requests int
		wantMsg  string
	}{{
		name:     "silent mid-stream",
		fault:    llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 8},
		policy:   provider.Policy{Attempts: 3, FirstTokenTimeout: time.Minute, IdleTimeout: 100 * time.Millisecond},
		requests: 1,
		wantMsg:  "(idle timeout), after 1 attempt",
	}, {
		name:     "no first token",
		fault:    llmtest.Fault{Kind: llmtest.FaultHang},
		policy:   provider.Policy{Attempts: 2, BaseBackoff: time.Millisecond, FirstTokenTimeout: 100 * time.Millisecond},
		requests: 2,
		wantMsg:  "the model sent nothing for 100ms (first-token timeout), after 2 attempts",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "never finished", ChunkSize: 2}, Fault: &tc.fault})
			_, _, err := stream(t, provider.WithPolicy(anthropic.New(cfg), tc.policy), hello("hi"))
			if runnel.ErrorCodeOf(err) != runnel.CodeTimeout || !strings.HasSuffix(err.Error(), tc.wantMsg) {
				t.Errorf("Stream error = %v; want a timeout ending %q", err, tc.wantMsg)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("requests = %d, want %d", n, tc.requests)
			}
		})
	}
}

func TestContextCancel(t *testing.T) {
	_, cfg := serve(t, llmtest.Rule{Fault: &llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 8}, Reply: llmtest.Reply{Text: "abcdefghijkl", ChunkSize: 1}})
	ctx, cancel := context.WithCancel(t.Context())
	_, err := anthropic.New(cfg).Stream(ctx, hello("hi"), func(provider.Chunk) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream = %v, want context.Canceled", err)
	}
}

// rawServer answers with an event stream as written.
func rawServer(t *testing.T, body string) provider.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return provider.Config{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: tr}}
}

func event(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

func TestStreamEvents(t *testing.T) {
	start := event("message_start", `{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}`)
	for _, tc := range []struct {
		name string
		body string
		want provider.Error // Err is not compared
	}{{
		name: "overloaded before any output",
		body: start + event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		want: provider.Error{Status: 200, Retryable: true, Message: "anthropic messages: the API reported an error mid-stream: overloaded_error: Overloaded"},
	}, {
		name: "overloaded after output is final",
		body: start + event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
			event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		want: provider.Error{Status: 200, Message: "anthropic messages: the API reported an error mid-stream: overloaded_error: Overloaded"},
	}, {
		name: "no message_stop",
		body: start + event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`),
		want: provider.Error{Status: 200, Retryable: true, Message: "anthropic messages: the stream ended without message_stop"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := stream(t, anthropic.New(rawServer(t, tc.body)), hello("hi"))
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Stream = %v, want a *provider.Error", err)
			}
			got := *pe
			got.Err = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("cached input and a tool call sent whole", func(t *testing.T) {
		body := start +
			event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}}`) +
			event("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`) +
			event("message_stop", `{"type":"message_stop"}`)
		_, resp, err := stream(t, anthropic.New(rawServer(t, body)), hello("hi"))
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		want := &provider.Response{
			Content:    []runnel.Block{{Type: runnel.BlockToolCall, ToolCallID: "toolu_1", ToolName: "f", Input: json.RawMessage(`{"a":1}`)}},
			Usage:      runnel.Usage{Input: 105, Output: 9, Total: 114},
			StopReason: "tool_use",
		}
		if diff := cmp.Diff(want, resp); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
	})
}

// TestEventsWithoutNames: the type inside the data is what counts, so a
// proxy that drops the event: lines still works, and pings are skipped.
func TestEventsWithoutNames(t *testing.T) {
	data := func(d string) string { return "data: " + d + "\n\n" }
	body := event("ping", `{"type":"ping"}`) +
		data(`{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}`) +
		data(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		data(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
		data(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`) +
		data(`{"type":"message_stop"}`)
	_, resp, err := stream(t, anthropic.New(rawServer(t, body)), hello("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := &provider.Response{Content: []runnel.Block{{Type: runnel.BlockText, Text: "hi"}}, Usage: runnel.Usage{Input: 3, Output: 2, Total: 5}, StopReason: "end_turn"}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}
