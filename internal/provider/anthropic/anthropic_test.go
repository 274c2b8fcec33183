package anthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/anthropic"
	"github.com/runnel/runnel/internal/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = providertest.Key

// claude is the adapter as providertest drives it; serve, stream and hello
// are its helpers.
var (
	claude = providertest.Adapter{New: func(c provider.Config) provider.Model { return anthropic.New(c) }, Model: "claude-test"}
	serve  = claude.Serve
	stream = providertest.Stream
	hello  = claude.Hello
)

func TestFailures(t *testing.T) { providertest.Failures(t, claude) }

func TestTextAndUsage(t *testing.T) {
	srv := claude.TextAndUsage(t)
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
