package openai_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/openai"
	"github.com/runnel/runnel/internal/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = providertest.Key

// adapter is one of the package's two adapters, as the tests drive it.
type adapter struct {
	name string
	api  string // the llmtest API it speaks
	new  func(provider.Config) provider.Model
}

// openAI is what both adapters share as providertest drives them: the
// base path and the model id. So serve and hello serve both.
var (
	openAI = providertest.Adapter{BasePath: "/v1", Model: "gpt-test"}
	serve  = openAI.Serve
	stream = providertest.Stream
	hello  = openAI.Hello
)

func TestFailures(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		providertest.Failures(t, a.shared())
	})
}

// shared is the adapter as providertest drives it.
func (a adapter) shared() providertest.Adapter {
	s := openAI
	s.New = a.new
	return s
}

// forEach runs f once per adapter.
func forEach(t *testing.T, f func(t *testing.T, a adapter)) {
	for _, a := range []adapter{
		{"chat", llmtest.APIChat, func(c provider.Config) provider.Model { return openai.NewChat(c) }},
		{"responses", llmtest.APIResponses, func(c provider.Config) provider.Model { return openai.NewResponses(c) }},
	} {
		t.Run(a.name, func(t *testing.T) { f(t, a) })
	}
}

func TestTextAndUsage(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		a.shared().TextAndUsage(t)
	})
}

func TestReasoning(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		_, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Reasoning: "Let me think.", Text: "42", ChunkSize: 8}})
		chunks, resp, err := stream(t, a.new(cfg), hello("question"))
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
		wantContent := []runnel.Block{
			{Type: runnel.BlockReasoning, Text: "Let me think."},
			{Type: runnel.BlockText, Text: "42"},
		}
		if diff := cmp.Diff(wantContent, resp.Content); diff != "" {
			t.Errorf("content (-want +got):\n%s", diff)
		}
	})
}

func TestToolCalls(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		_, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{ChunkSize: 6, ToolCalls: []llmtest.ToolCall{
			{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
			{ID: "call_b", Name: "now"},
			{ID: "call_c", Name: "broken", Arguments: json.RawMessage(`{"x":`)},
		}}})
		req := hello("weather?")
		req.Tools = []provider.Tool{
			{Name: "get_weather", Description: "Weather by city", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "now"},
			{Name: "broken"},
		}
		chunks, resp, err := stream(t, a.new(cfg), req)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		wantChunks := []provider.Chunk{
			{Kind: provider.ChunkToolCall, Index: 0, ToolCallID: "call_a", ToolName: "get_weather"},
			{Kind: provider.ChunkToolArgs, Index: 0, Text: `{"city`},
			{Kind: provider.ChunkToolArgs, Index: 0, Text: `":"Par`},
			{Kind: provider.ChunkToolArgs, Index: 0, Text: `is"}`},
			{Kind: provider.ChunkToolCall, Index: 1, ToolCallID: "call_b", ToolName: "now"},
			{Kind: provider.ChunkToolArgs, Index: 1, Text: `{}`},
			{Kind: provider.ChunkToolCall, Index: 2, ToolCallID: "call_c", ToolName: "broken"},
			{Kind: provider.ChunkToolArgs, Index: 2, Text: `{"x":`},
		}
		if diff := cmp.Diff(wantChunks, chunks); diff != "" {
			t.Errorf("chunks (-want +got):\n%s", diff)
		}
		want := []runnel.Block{
			{Type: runnel.BlockToolCall, ToolCallID: "call_a", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "call_b", ToolName: "now", Input: json.RawMessage(`{}`)},
			// Invalid arguments stay a JSON string for the loop to answer.
			{Type: runnel.BlockToolCall, ToolCallID: "call_c", ToolName: "broken", Input: json.RawMessage(`"{\"x\":"`)},
		}
		if diff := cmp.Diff(want, resp.Content); diff != "" {
			t.Errorf("content (-want +got):\n%s", diff)
		}
		if resp.StopReason != "tool_use" {
			t.Errorf("StopReason = %q, want tool_use", resp.StopReason)
		}
	})
}

// history is a conversation with every kind of block, replayed to the API.
func history() []runnel.Message {
	return []runnel.Message{
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockText, Text: "Weather in Paris?"},
			{Type: runnel.BlockImage, Data: "aGVsbG8=", MimeType: "image/jpeg"},
			{Type: runnel.BlockImage, URI: "https://example.com/map.png"},
		}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{
			{Type: runnel.BlockReasoning, Text: "I should look it up."},
			{Type: runnel.BlockText, Text: "Checking."},
			{Type: runnel.BlockToolCall, ToolCallID: "call_1", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "call_2", ToolName: "get_time", Input: json.RawMessage(`"not json"`)},
		}},
		{Role: runnel.RoleTool, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "call_1", Output: runnel.TextOutput("sunny")},
			{Type: runnel.BlockToolResult, ToolCallID: "call_2", Output: json.RawMessage(`{"error":"bad input"}`), IsError: true},
		}},
		{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: "It is sunny."}}},
		runnel.UserText("Thanks!"),
	}
}

func TestConversationReplay(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
		req := &provider.Request{Model: "gpt-test", System: "Be brief.", Messages: history(), MaxTokens: 100,
			Tools: []provider.Tool{{Name: "get_weather", Schema: json.RawMessage(`{"type":"object"}`)}}}
		if _, _, err := stream(t, a.new(cfg), req); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		got := srv.Requests()[0].Conversation
		want := llmtest.Conversation{
			API: a.api, Model: "gpt-test", Stream: true, System: "Be brief.", Tools: []string{"get_weather"},
			Messages: []llmtest.Message{
				{Role: "user", Text: "Weather in Paris?"},
				{Role: "assistant", Text: "Checking.", ToolCalls: []llmtest.ToolCall{
					{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
					// Invalid arguments go back as the model sent them.
					{ID: "call_2", Name: "get_time", Arguments: json.RawMessage(`"not json"`)},
				}},
				{Role: "tool", ToolResults: []llmtest.ToolResult{
					{CallID: "call_1", Text: "sunny"},
					{CallID: "call_2", Text: `{"error":"bad input"}`},
				}},
				{Role: "assistant", Text: "It is sunny."},
				{Role: "user", Text: "Thanks!"},
			},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("conversation the server saw (-want +got):\n%s", diff)
		}
		checkWire(t, a.api, srv.Requests()[0].Body)
	})
}

// checkWire checks what the normalised view cannot show: the exact shape
// of roles, ids, images and settings on the wire.
func checkWire(t *testing.T, api string, body []byte) {
	t.Helper()
	switch api {
	case llmtest.APIChat:
		var b struct {
			Messages []struct {
				Role       string          `json:"role"`
				ToolCallID string          `json:"tool_call_id"`
				Content    json.RawMessage `json:"content"`
			} `json:"messages"`
			MaxCompletionTokens int             `json:"max_completion_tokens"`
			MaxTokens           int             `json:"max_tokens"`
			StreamOptions       json.RawMessage `json:"stream_options"`
		}
		mustUnmarshal(t, body, &b)
		var roles []string
		for _, m := range b.Messages {
			roles = append(roles, m.Role+":"+m.ToolCallID)
		}
		if diff := cmp.Diff([]string{"system:", "user:", "assistant:", "tool:call_1", "tool:call_2", "assistant:", "user:"}, roles); diff != "" {
			t.Errorf("roles (-want +got):\n%s", diff)
		}
		wantUser := `[{"text":"Weather in Paris?","type":"text"},{"image_url":{"url":"data:image/jpeg;base64,aGVsbG8="},"type":"image_url"},{"image_url":{"url":"https://example.com/map.png"},"type":"image_url"}]`
		if got := string(b.Messages[1].Content); got != wantUser {
			t.Errorf("user content = %s\nwant %s", got, wantUser)
		}
		// A custom base URL is a compatible server, which knows max_tokens.
		if b.MaxTokens != 100 || b.MaxCompletionTokens != 0 {
			t.Errorf("max_tokens = %d, max_completion_tokens = %d; want 100 and unset", b.MaxTokens, b.MaxCompletionTokens)
		}
		if string(b.StreamOptions) != `{"include_usage":true}` {
			t.Errorf("stream_options = %s", b.StreamOptions)
		}
	case llmtest.APIResponses:
		var b struct {
			Instructions    string `json:"instructions"`
			Store           *bool  `json:"store"`
			MaxOutputTokens int    `json:"max_output_tokens"`
			Input           []struct {
				Type    string          `json:"type"`
				Role    string          `json:"role"`
				CallID  string          `json:"call_id"`
				Content json.RawMessage `json:"content"`
			} `json:"input"`
			Tools []struct {
				Strict *bool `json:"strict"`
			} `json:"tools"`
		}
		mustUnmarshal(t, body, &b)
		var items []string
		for _, it := range b.Input {
			items = append(items, it.Type+":"+it.Role+it.CallID)
		}
		want := []string{"message:user", "message:assistant", "function_call:call_1", "function_call:call_2",
			"function_call_output:call_1", "function_call_output:call_2", "message:assistant", "message:user"}
		if diff := cmp.Diff(want, items); diff != "" {
			t.Errorf("input items (-want +got):\n%s", diff)
		}
		wantUser := `[{"text":"Weather in Paris?","type":"input_text"},{"detail":"auto","image_url":"data:image/jpeg;base64,aGVsbG8=","type":"input_image"},{"detail":"auto","image_url":"https://example.com/map.png","type":"input_image"}]`
		if got := string(b.Input[0].Content); got != wantUser {
			t.Errorf("user content = %s\nwant %s", got, wantUser)
		}
		if b.Instructions != "Be brief." || b.Store == nil || *b.Store || b.MaxOutputTokens != 100 {
			t.Errorf("instructions %q, store %v, max_output_tokens %d; want the system prompt, false, 100", b.Instructions, b.Store, b.MaxOutputTokens)
		}
		if len(b.Tools) != 1 || b.Tools[0].Strict == nil || *b.Tools[0].Strict {
			t.Errorf("tools must be sent with strict false")
		}
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode request body: %v", err)
	}
}

func TestToolResultInUserMessage(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
		msgs := []runnel.Message{
			runnel.UserText("Delete it"),
			{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockToolCall, ToolCallID: "call_9", ToolName: "delete", Input: json.RawMessage(`{}`)}}},
			{Role: runnel.RoleUser, Content: []runnel.Block{
				{Type: runnel.BlockText, Text: "go on"},
				{Type: runnel.BlockToolResult, ToolCallID: "call_9", Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)},
			}},
		}
		if _, _, err := stream(t, a.new(cfg), &provider.Request{Model: "m", Messages: msgs}); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		want := []llmtest.Message{
			{Role: "user", Text: "Delete it"},
			{Role: "assistant", ToolCalls: []llmtest.ToolCall{{ID: "call_9", Name: "delete", Arguments: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolResults: []llmtest.ToolResult{{CallID: "call_9", Text: `{"approved":true}`}}},
			{Role: "user", Text: "go on"},
		}
		if diff := cmp.Diff(want, srv.Requests()[0].Conversation.Messages); diff != "" {
			t.Errorf("messages (-want +got):\n%s", diff)
		}
	})
}

// recorder is a transport that notes each request's URL, proving
// cfg.HTTPClient is the client used.
type recorder struct {
	next http.RoundTripper
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.urls = append(r.urls, req.URL.Path+"?"+req.URL.RawQuery)
	return r.next.RoundTrip(req)
}

func TestHeadersKeyAndClient(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
		rec := &recorder{next: cfg.HTTPClient.Transport}
		cfg.HTTPClient = &http.Client{Transport: rec}
		cfg.Headers = map[string]string{"X-Title": "runnel-test"}
		cfg.APIVersion = "2025-04-01-preview"
		if _, _, err := stream(t, a.new(cfg), hello("hi")); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		h := srv.Requests()[0].Header
		// Compare without printing: the values are credentials.
		if h.Get("Authorization") != "Bearer "+testKey {
			t.Error("the Authorization header does not carry the API key as a bearer token")
		}
		if h.Get("Api-Key") != testKey {
			t.Error("with an api-version, the api-key header does not carry the API key")
		}
		if got := h.Get("X-Title"); got != "runnel-test" {
			t.Errorf("X-Title = %q, want the configured header", got)
		}
		if len(rec.urls) != 1 || !strings.HasSuffix(rec.urls[0], "?api-version=2025-04-01-preview") {
			t.Errorf("requests through cfg.HTTPClient = %q, want one with the api-version query", rec.urls)
		}
	})
}
