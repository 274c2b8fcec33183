package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

func TestParseScript(t *testing.T) {
	cases := []struct {
		name, json, wantErr string
	}{
		{"minimal", `{"rules":[{"reply":{"text":"hi"}}]}`, ""},
		{"full", `{"rules":[{"name":"n","when":{"api":"chat","model":"m","lastRole":"tool","lastUserContains":"a",
			"lastToolResultContains":"b","systemContains":"c","hasTool":"t","toolResultsBelow":3,"toolResultsAtLeast":1},
			"reply":{"text":"x","reasoning":"r","toolCalls":[{"id":"i","name":"t","arguments":{"a":1}}],
			"usage":{"input":1,"output":2},"chunkSize":3,"tokenDelayMs":4},
			"fault":{"kind":"status","status":429,"retryAfter":"1","times":2}}]}`, ""},
		{"typo is loud", `{"rules":[{"when":{"lastUserContain":"x"},"reply":{}}]}`, `unknown field "lastUserContain"`},
		{"gemini api", `{"rules":[{"when":{"api":"gemini","hasTool":"runnel/echo"},"reply":{"toolCalls":[{"name":"runnel/echo","namespace":"ns"}]}}]}`, ""},
		{"unknown api", `{"rules":[{"when":{"api":"completions"}}]}`, `rule 0: when.api "completions"`},
		{"unknown role", `{"rules":[{"name":"r","when":{"lastRole":"system"}}]}`, `r: when.lastRole "system"`},
		{"unknown fault", `{"rules":[{"fault":{"kind":"slow"}}]}`, `fault.kind "slow"`},
		{"status without error code", `{"rules":[{"fault":{"kind":"status","status":200}}]}`, `fault.status 200`},
		{"nameless tool call", `{"rules":[{"reply":{"toolCalls":[{"arguments":{}}]}}]}`, `a tool call needs a name`},
		{"trailing data", `{"rules":[]} {}`, `unexpected data`},
		{"not json", `rules: []`, `decode`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScript([]byte(tc.json))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoadScriptMissingFile(t *testing.T) {
	if _, err := LoadScript(t.TempDir() + "/none.json"); err == nil {
		t.Fatal("no error for a missing file")
	}
}

func TestMatch(t *testing.T) {
	conv := Conversation{
		API: APIChat, Model: "gpt-x", System: "You are a Weather bot.",
		Messages: []Message{
			{Role: RoleUser, Text: "What's the Weather?"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "get_weather"}}},
			{Role: RoleTool, ToolResults: []ToolResult{{CallID: "1", Text: "Sunny"}}},
		},
		Tools: []string{"get_weather"},
	}
	cases := []struct {
		name string
		m    Match
		want bool
	}{
		{"zero matches all", Match{}, true},
		{"api", Match{API: APIChat}, true},
		{"other api", Match{API: APIMessages}, false},
		{"model", Match{Model: "gpt-x"}, true},
		{"model is exact", Match{Model: "gpt"}, false},
		{"last role", Match{LastRole: RoleTool}, true},
		{"last role user", Match{LastRole: RoleUser}, false},
		{"last user, any case", Match{LastUserContains: "weather"}, true},
		{"last user miss", Match{LastUserContains: "rain"}, false},
		{"tool result", Match{LastToolResultContains: "sunny"}, true},
		{"tool result miss", Match{LastToolResultContains: "cloudy"}, false},
		{"system", Match{SystemContains: "weather BOT"}, true},
		{"has tool", Match{HasTool: "get_weather"}, true},
		{"has tool exact", Match{HasTool: "weather"}, false},
		{"results below 2", Match{ToolResultsBelow: intp(2)}, true},
		{"results below 1", Match{ToolResultsBelow: intp(1)}, false},
		{"results at least 1", Match{ToolResultsAtLeast: intp(1)}, true},
		{"results at least 2", Match{ToolResultsAtLeast: intp(2)}, false},
		{"all must hold", Match{API: APIChat, LastRole: RoleTool, HasTool: "nope"}, false},
	}
	for _, tc := range cases {
		if got := tc.m.matches(&conv); got != tc.want {
			t.Errorf("%s: matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	empty := Conversation{}
	if (Match{LastToolResultContains: ""}).matches(&empty) != true || (Match{LastRole: RoleUser}).matches(&empty) {
		t.Error("an empty conversation: only the zero match holds")
	}
}

func TestResolvePlaceholdersAndIDs(t *testing.T) {
	conv := Conversation{Messages: []Message{
		{Role: RoleUser, Text: "first"},
		{Role: RoleTool, ToolResults: []ToolResult{{Text: "r1"}, {Text: "r2"}}},
		{Role: RoleUser, Text: "second"},
	}}
	reply := Reply{Text: "u={{last_user}} t={{last_tool_result}}", ToolCalls: []ToolCall{{Name: "a"}, {Name: "b", Arguments: []byte(" {\"k\": 1} ")}}}
	o := resolve(reply, &conv, []byte("body"), "toolu_")
	if o.text != "u=second t=r2" || o.model != "mockllm" {
		t.Errorf("text %q model %q", o.text, o.model)
	}
	if !strings.HasPrefix(o.calls[0].ID, "toolu_") || o.calls[0].ID == o.calls[1].ID {
		t.Errorf("ids %q %q: want distinct generated toolu_ ids", o.calls[0].ID, o.calls[1].ID)
	}
	if string(o.calls[0].Arguments) != "{}" || string(o.calls[1].Arguments) != `{"k":1}` {
		t.Errorf("arguments %s %s", o.calls[0].Arguments, o.calls[1].Arguments)
	}
	if other := resolve(reply, &conv, []byte("other body"), "toolu_"); other.calls[0].ID == o.calls[0].ID {
		t.Error("different requests got the same generated id")
	}
}

func TestPieces(t *testing.T) {
	cases := []struct {
		s     string
		chunk int
		want  []string
	}{
		{"", 0, nil},
		{"abcdefg", 0, []string{"abc", "def", "g"}},
		{"ab", 0, []string{"a", "b"}},
		{"abcdef", 4, []string{"abcd", "ef"}},
		{"héé", 1, []string{"h", "é", "é"}}, // never inside a UTF-8 sequence
		{"日本", 4, []string{"日本"[:6]}},
	}
	for _, tc := range cases {
		got := outcome{chunk: tc.chunk}.pieces(tc.s)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("pieces(%q, %d) (-want +got):\n%s", tc.s, tc.chunk, diff)
		}
		for _, p := range got {
			if !utf8.ValidString(p) {
				t.Errorf("pieces(%q): invalid piece %q", tc.s, p)
			}
		}
	}
}

// The README walk-through: the shipped example script drives one tool round trip.
func TestExampleScript(t *testing.T) {
	s, err := LoadScript("../../examples/mockllm/tool-call.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(s)
	defer srv.Close()
	client := openaiClient(t, srv)
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
	}
	ask := func(msgs ...openai.ChatCompletionMessageParamUnion) *openai.ChatCompletion {
		t.Helper()
		res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "any", Messages: msgs, Tools: tools,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	question := openai.UserMessage("What's the weather like?")
	first := ask(question)
	calls := first.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("first step: %s", first.RawJSON())
	}
	second := ask(question, first.Choices[0].Message.ToParam(), openai.ToolMessage("sunny, 21°C", calls[0].ID))
	if got := second.Choices[0].Message.Content; got != "The weather in Paris: sunny, 21°C" {
		t.Errorf("second step: %q", got)
	}
	if got := ask(openai.UserMessage("hi")).Choices[0].Message.Content; got != "Hello from mockllm." {
		t.Errorf("otherwise: %q", got)
	}
}

// Replies depend on the request content only: a side call between two
// identical requests changes nothing, and identical requests get identical bytes.
func TestRepliesDependOnContentOnly(t *testing.T) {
	s, err := LoadScript("../../examples/mockllm/tool-call.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(s)
	defer srv.Close()
	weather := `{"model":"m","stream":true,"messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}]}`
	side := `{"model":"m","messages":[{"role":"user","content":"Write a title for this chat"}]}`
	_, a := post(t, srv, "/v1/chat/completions", weather)
	_, title := post(t, srv, "/v1/chat/completions", side)
	_, b := post(t, srv, "/v1/chat/completions", weather)
	if !bytes.Equal(a, b) {
		t.Errorf("the same request got different replies:\n%s\n---\n%s", a, b)
	}
	if !bytes.Contains(a, []byte(`"name":"get_weather"`)) || !bytes.Contains(title, []byte("Hello from mockllm.")) {
		t.Errorf("replies:\n%s\n---\n%s", a, title)
	}
	var rules []string
	for _, r := range srv.Requests() {
		rules = append(rules, r.Rule)
	}
	if diff := cmp.Diff([]string{"call-get-weather", "hello", "call-get-weather"}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

func TestNoRuleMatched(t *testing.T) {
	srv := start(t, Rule{When: Match{LastUserContains: "something else"}, Reply: Reply{Text: "x"}})
	ctx := context.Background()
	oc := openaiClient(t, srv)
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Type != "invalid_request_error" ||
		!strings.Contains(oe.Message, `no rule matched this chat request`) || !strings.Contains(oe.Message, `"hi"`) {
		t.Errorf("chat: %v", err)
	}
	ac := anthropicClient(t, srv)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "claude-test", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" ||
		!strings.Contains(ae.Error(), "no rule matched this messages request") {
		t.Errorf("messages: %v", err)
	}
	for _, r := range srv.Requests() {
		if r.Rule != "" {
			t.Errorf("unmatched request recorded with rule %q", r.Rule)
		}
	}
}

func TestInvalidBodyAndUnknownRoute(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "x"}})
	status, body := post(t, srv, "/v1/messages", `{"messages":"nope"}`)
	if status != 400 || !bytes.Contains(body, []byte(`"invalid_request_error"`)) {
		t.Errorf("invalid body: %d %s", status, body)
	}
	status, body = post(t, srv, "/v1/embeddings", `{}`)
	if status != 404 || !bytes.Contains(body, []byte(`no route for POST /v1/embeddings`)) {
		t.Errorf("unknown route: %d %s", status, body)
	}
}

func TestModels(t *testing.T) {
	srv := start(t, Rule{When: Match{Model: "gpt-mock"}})
	client := openaiClient(t, srv)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff([]string{"mockllm", "gpt-mock"}, ids); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

// A slow reply ends as soon as the client goes away: the test would hang on
// the server's Close otherwise.
func TestTokenDelayHonoursCancellation(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "slow words here", TokenDelayMs: 3_600_000}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := streamWith(ctx, t, srv, APIChat, func(int) { cancel() })
	if n != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("%d events, error %v", n, err)
	}
}

// recordHandler passes log records to a channel.
type recordHandler struct{ ch chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Clone():
	default: // a test reads only what it needs
	}
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// TestServe runs `runnel mockllm` as plain HTTP and as HTTPS with HTTP/2.
func TestServe(t *testing.T) {
	cert, key, tlsClient, err := SelfSignedTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		files  TLSFiles
		scheme string
	}{
		{"http", TLSFiles{}, "http://"},
		{"https", TLSFiles{Cert: cert, Key: key}, "https://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := make(chan slog.Record, 64)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, "127.0.0.1:0", DefaultScript(), c.files, slog.New(recordHandler{logs})) }()
			var url string
			for url == "" {
				r := <-logs
				r.Attrs(func(a slog.Attr) bool {
					if r.Message == "mockllm listening" && a.Key == "url" {
						url = a.Value.String()
					}
					return true
				})
			}
			if !strings.HasPrefix(url, c.scheme) {
				t.Fatalf("listening on %s, want %s", url, c.scheme)
			}
			hc := tlsClient()
			defer hc.CloseIdleConnections()
			client := openaiClient(t, &Server{URL: url}, option.WithHTTPClient(hc))
			var raw *http.Response
			res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ping")},
			}, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Choices[0].Message.Content; got != "Hello from mockllm. You said: ping" {
				t.Errorf("reply %q", got)
			}
			if c.files.Cert != "" && raw.ProtoMajor != 2 {
				t.Errorf("answered over %s, want HTTP/2", raw.Proto)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve returned %v after its context ended", err)
			}
		})
	}
}

func TestServeErrors(t *testing.T) {
	bad := Script{Rules: []Rule{{Fault: &Fault{Kind: "boom"}}}}
	if err := Serve(context.Background(), "127.0.0.1:0", bad, TLSFiles{}, nil); err == nil {
		t.Error("Serve accepted an invalid script")
	}
	if err := Serve(context.Background(), "127.0.0.1:notaport", DefaultScript(), TLSFiles{}, nil); err == nil {
		t.Error("Serve accepted an invalid address")
	}
}

// TestServeKeepsNoRequests: `runnel mockllm` may answer for days, and every
// step of a conversation repeats the whole history.
func TestServeKeepsNoRequests(t *testing.T) {
	h := NewServeHandler(DefaultScript(), slog.New(slog.DiscardHandler))
	var seen atomic.Int64
	h.observe = func(Request) { seen.Add(1) }
	ts := httptest.NewServer(h)
	defer ts.Close()
	for range 3 {
		if status, body := post(t, &Server{URL: ts.URL}, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	if n := len(h.Requests()); seen.Load() != 3 || n != 0 {
		t.Errorf("%d requests answered, %d kept; want 3 answered and none kept", seen.Load(), n)
	}
}

func TestDefaultScriptAfterTool(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"42"}]}`
	srv := NewServer(DefaultScript())
	defer srv.Close()
	_, got := post(t, srv, "/v1/chat/completions", body)
	var res struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(got, &res); err != nil || len(res.Choices) != 1 || res.Choices[0].Message.Content != "Tool result: 42" {
		t.Errorf("reply %s (%v)", got, err)
	}
}
