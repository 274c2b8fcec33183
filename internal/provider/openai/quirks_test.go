package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/openai"
)

// rawServer answers every request with status and body as written, which
// lets a test speak like a particular OpenAI-compatible server.
func rawServer(t *testing.T, status int, contentType, body string) provider.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return provider.Config{BaseURL: srv.URL + "/v1", HTTPClient: &http.Client{Transport: tr}}
}

// sse writes data lines as an event stream.
func sse(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		b.WriteString("data: " + d + "\n\n")
	}
	return b.String()
}

func TestChatCompatibleServers(t *testing.T) {
	call := func(id, name, args string) runnel.Block {
		return runnel.Block{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(args)}
	}
	for _, tc := range []struct {
		name string
		body string
		want *provider.Response
	}{{
		name: "every call under index 0, each whole, finish_reason stop (Gemini, older Ollama)",
		body: sse(
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`),
		want: &provider.Response{Content: []runnel.Block{call("a", "f", `{"x":1}`), call("b", "g", `{}`)}, StopReason: "tool_use"},
	}, {
		name: "no index, id repeated on every piece",
		body: sse(
			`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":":2}"}}]}}]}`,
			`{"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			`[DONE]`),
		want: &provider.Response{Content: []runnel.Block{call("a", "f", `{"x":2}`)}, StopReason: "tool_use", Usage: runnel.Usage{Input: 3, Output: 4, Total: 7}},
	}, {
		name: "reasoning field, content null, length",
		body: sse(
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning":"hmm"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"length"}]}`,
			`[DONE]`),
		want: &provider.Response{Content: []runnel.Block{{Type: runnel.BlockReasoning, Text: "hmm"}, {Type: runnel.BlockText, Text: "hi"}}, StopReason: "max_tokens"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rawServer(t, 200, "text/event-stream", tc.body)
			chunks, resp, err := stream(t, openai.NewChat(cfg), hello("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(tc.want, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			// Every call is announced once, before its arguments.
			started := map[int]bool{}
			for _, c := range chunks {
				switch c.Kind {
				case provider.ChunkToolCall:
					if started[c.Index] {
						t.Errorf("tool call %d announced twice", c.Index)
					}
					started[c.Index] = true
				case provider.ChunkToolArgs:
					if !started[c.Index] {
						t.Errorf("arguments of tool call %d before its announcement", c.Index)
					}
				}
			}
		})
	}
}

func TestChatStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        provider.Error // Err is not compared
	}{{
		name: "no [DONE]", status: 200, contentType: "text/event-stream",
		body: sse(`{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}`),
		want: provider.Error{Status: 200, Message: "openai chat completions: the stream ended without [DONE]"},
	}, {
		name: "error object mid-stream", status: 200, contentType: "text/event-stream",
		body: sse(`{"error":{"message":"model crashed"}}`),
		want: provider.Error{Status: 200, Retryable: true, Message: "openai chat completions: the server reported an error mid-stream: model crashed"},
	}, {
		name: "not a stream", status: 200, contentType: "application/json",
		body: `{"choices":[]}`,
		want: provider.Error{Status: 200, Message: "openai chat completions: the server answered with application/json instead of an event stream"},
	}, {
		name: "error as a plain string (Ollama)", status: 404, contentType: "application/json",
		body: `{"error":"model \"llama9\" not found, try pulling it first"}`,
		want: provider.Error{Status: 404, Message: `openai chat completions: HTTP 404: model "llama9" not found, try pulling it first`},
	}, {
		name: "error detail (vLLM)", status: 400, contentType: "application/json",
		body: `{"detail":"max_tokens is too large"}`,
		want: provider.Error{Status: 400, Message: "openai chat completions: HTTP 400: max_tokens is too large"},
	}, {
		name: "HTML error page", status: 502, contentType: "text/html",
		body: `<html><body>Bad gateway</body></html>`,
		want: provider.Error{Status: 502, Retryable: true, Message: "openai chat completions: HTTP 502 Bad Gateway"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rawServer(t, tc.status, tc.contentType, tc.body)
			_, _, err := stream(t, openai.NewChat(cfg), hello("hi"))
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
}

func TestResponsesFailedEvent(t *testing.T) {
	body := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\"}}\n\n" +
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n"
	cfg := rawServer(t, 200, "text/event-stream", body)
	_, _, err := stream(t, openai.NewResponses(cfg), hello("hi"))
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Retryable || pe.Message != "openai responses: the response failed: server_error boom" {
		t.Errorf("Stream = %#v, want a retryable failure naming the code and message", err)
	}
}

// TestResponsesUnknownEvents: events runnel does not read may carry fields
// of any shape (newer APIs, other servers) without failing the stream.
func TestResponsesUnknownEvents(t *testing.T) {
	body := sse(
		`{"type":"response.created","response":{"status":"in_progress","output":[]}}`,
		`{"type":"response.mcp_call_arguments.delta","output_index":0,"delta":{"partial":true}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"mcp_list_tools","content":"not a list"}}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"message","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","output_index":1,"delta":"hi"}`,
		`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":2,"output_tokens":1}}}`)
	_, resp, err := stream(t, openai.NewResponses(rawServer(t, 200, "text/event-stream", body)), hello("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := &provider.Response{Content: []runnel.Block{{Type: runnel.BlockText, Text: "hi"}}, StopReason: "end_turn", Usage: runnel.Usage{Input: 2, Output: 1, Total: 3}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	// The same mismatch in an event runnel reads is a malformed stream.
	body = sse(`{"type":"response.output_text.delta","output_index":0,"delta":{"text":"hi"}}`)
	_, _, err = stream(t, openai.NewResponses(rawServer(t, 200, "text/event-stream", body)), hello("hi"))
	if err == nil || !strings.Contains(err.Error(), "malformed event") {
		t.Errorf("Stream = %v, want a malformed event", err)
	}
}

// TestChatMaxCompletionTokens: Azure (an api-version) and OpenAI itself get
// max_completion_tokens, which reasoning models require.
func TestChatMaxCompletionTokens(t *testing.T) {
	srv, cfg := serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "ok"}})
	cfg.APIVersion = "2025-04-01-preview"
	req := hello("hi")
	req.MaxTokens = 64
	if _, _, err := stream(t, openai.NewChat(cfg), req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var b struct {
		MaxTokens           *int `json:"max_tokens"`
		MaxCompletionTokens *int `json:"max_completion_tokens"`
	}
	mustUnmarshal(t, srv.Requests()[0].Body, &b)
	if b.MaxTokens != nil || b.MaxCompletionTokens == nil || *b.MaxCompletionTokens != 64 {
		t.Errorf("max_tokens %v, max_completion_tokens %v; want unset and 64", b.MaxTokens, b.MaxCompletionTokens)
	}
}

func TestBadBaseURL(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		_, _, err := stream(t, a.new(provider.Config{BaseURL: "localhost:11434/v1?key=" + testKey}), hello("hi"))
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(pe.Message, "base URL") || strings.Contains(pe.Message, testKey) {
			t.Errorf("Stream = %v, want a non-retryable error about the base URL, without the URL", err)
		}
	})
}
