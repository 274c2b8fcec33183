package llmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// allAPIs are the four APIs; apis (the three with an official Go SDK in
// go.mod) drive the SDK tests.
var allAPIs = []string{APIChat, APIResponses, APIMessages, APIGemini}

// The Gemini API has no Go SDK in go.mod, so its tests speak HTTP and SSE by
// hand, as Gemini CLI's @google/genai client does.

// geminiPart and geminiChunk decode what the server sends.
type geminiWirePart struct {
	Text         string `json:"text,omitempty"`
	Thought      bool   `json:"thought,omitempty"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall,omitempty"`
}

type geminiWireChunk struct {
	Candidates []struct {
		Content struct {
			Role  string           `json:"role"`
			Parts []geminiWirePart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
}

// geminiHTTPError is a non-200 answer.
type geminiHTTPError struct {
	Status int
	Header http.Header
	Body   []byte
}

func (e *geminiHTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// geminiRequestBody is a one-turn request.
const geminiRequestBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

// geminiStream posts to :streamGenerateContent?alt=sse and decodes every
// data event, calling onChunk with the running count. It returns the chunks
// and the first error: the HTTP status, a read error, or a JSON one.
func geminiStream(ctx context.Context, t *testing.T, srv *Server, model, body string, onChunk func(int)) ([]geminiWireChunk, error) {
	t.Helper()
	url := srv.URL + "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "test-key")
	resp, err := testHTTPClient(t).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, &geminiHTTPError{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	var chunks []geminiWireChunk
	br := bufio.NewReader(resp.Body)
	for {
		// A line counts only once its newline arrived: a cut or cancelled
		// stream leaves a partial line that is no event.
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				err = nil
			}
			return chunks, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return chunks, fmt.Errorf("line %q is not an SSE data line", line)
		}
		var c geminiWireChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
		onChunk(len(chunks))
	}
}

// geminiPost posts to a Gemini path and returns the status and body.
func geminiPost(t *testing.T, srv *Server, path, body string) (int, []byte) {
	t.Helper()
	return post(t, srv, path, body)
}

// partsOf joins the parts of all chunks, merging adjacent text pieces of the
// same kind as a client does.
func partsOf(chunks []geminiWireChunk) []geminiWirePart {
	var out []geminiWirePart
	for _, c := range chunks {
		for _, cand := range c.Candidates {
			for _, p := range cand.Content.Parts {
				if n := len(out); n > 0 && p.FunctionCall == nil && out[n-1].FunctionCall == nil && out[n-1].Thought == p.Thought {
					out[n-1].Text += p.Text
					continue
				}
				out = append(out, p)
			}
		}
	}
	return out
}

func TestGeminiStream(t *testing.T) {
	reply := twoCalls()
	reply.Reasoning = "Two lookups."
	srv := start(t, Rule{When: Match{API: APIGemini, SystemContains: "weather bot", HasTool: "get_time"}, Reply: reply})
	body := `{"systemInstruction":{"parts":[{"text":"You are a Weather Bot."}]},
		"contents":[{"role":"user","parts":[{"text":"weather and time?"}]}],
		"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT"}},{"name":"get_time"}]}],
		"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`
	chunks, err := geminiStream(context.Background(), t, srv, "gemini-test", body, func(int) {})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(chunks) < 5 {
		t.Fatalf("%d chunks, want text and thoughts in several pieces and one chunk per call", len(chunks))
	}
	for i, c := range chunks {
		last := i == len(chunks)-1
		if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" || c.ModelVersion != "gemini-test" {
			t.Errorf("chunk %d: %+v", i, c)
		}
		if (c.Candidates[0].FinishReason == "STOP") != last || (c.UsageMetadata != nil) != last {
			t.Errorf("chunk %d: finishReason %q usage %v; want both on the last chunk only", i, c.Candidates[0].FinishReason, c.UsageMetadata)
		}
	}
	if u := chunks[len(chunks)-1].UsageMetadata; u.PromptTokenCount != 42 || u.CandidatesTokenCount != 7 || u.TotalTokenCount != 49 {
		t.Errorf("usage %+v", u)
	}
	type part struct {
		Text    string
		Thought bool
		ID      string
		Name    string
		Args    string
	}
	var got []part
	for _, p := range partsOf(chunks) {
		gp := part{Text: p.Text, Thought: p.Thought}
		if fc := p.FunctionCall; fc != nil {
			gp = part{ID: fc.ID, Name: fc.Name, Args: string(fc.Args)}
		}
		got = append(got, gp)
	}
	if len(got) != 4 || got[2].ID == "" {
		t.Fatalf("parts %+v", got)
	}
	want := []part{
		{Text: "Two lookups.", Thought: true},
		{Text: "Let me check."},
		{ID: got[2].ID, Name: "get_weather", Args: `{"city":"Paris","unit":"celsius"}`},
		{ID: "call_fixed", Name: "get_time", Args: `{"tz":"Europe/Paris"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	conv := reqs[0].Conversation
	wantConv := Conversation{API: APIGemini, Model: "gemini-test", Stream: true, System: "You are a Weather Bot.",
		Messages: []Message{{Role: RoleUser, Text: "weather and time?"}}, Tools: []string{"get_weather", "get_time"}}
	if diff := cmp.Diff(wantConv, conv); diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
	if reqs[0].API != APIGemini || reqs[0].Path != "/v1beta/models/gemini-test:streamGenerateContent" {
		t.Errorf("recorded api %q path %q", reqs[0].API, reqs[0].Path)
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	srv := start(t, Rule{When: Match{API: APIGemini, Model: "gemini-x"}, Reply: Reply{
		Text:      "Calling.",
		Reasoning: "Think.",
		ToolCalls: []ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
	}})
	status, body := geminiPost(t, srv, "/v1beta/models/gemini-x:generateContent", geminiRequestBody)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var res geminiWireChunk
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	parts := res.Candidates[0].Content.Parts
	if len(parts) != 3 || !parts[0].Thought || parts[0].Text != "Think." || parts[1].Text != "Calling." ||
		parts[2].FunctionCall == nil || string(parts[2].FunctionCall.Args) != `{"city":"Paris"}` {
		t.Errorf("one candidate with every part, got %s", body)
	}
	if res.Candidates[0].FinishReason != "STOP" || res.UsageMetadata == nil || res.UsageMetadata.TotalTokenCount != defaultInputTokens+defaultOutputTokens {
		t.Errorf("finish and usage: %s", body)
	}
	if r := srv.Requests()[0].Conversation; r.Stream || r.Model != "gemini-x" {
		t.Errorf("recorded stream %v model %q", r.Stream, r.Model)
	}
}

// Without alt=sse, streamGenerateContent answers the chunks as one JSON
// array, the REST API's default.
func TestGeminiStreamWithoutSSE(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "abcdef", ChunkSize: 2}})
	status, body := geminiPost(t, srv, "/v1beta/models/m:streamGenerateContent", geminiRequestBody)
	var chunks []geminiWireChunk
	if err := json.Unmarshal(body, &chunks); status != http.StatusOK || err != nil {
		t.Fatalf("status %d, %v: %s", status, err, body)
	}
	if len(chunks) != 3 || partsOf(chunks)[0].Text != "abcdef" || chunks[2].Candidates[0].FinishReason != "STOP" {
		t.Errorf("chunks %s", body)
	}
}

// v1 is the stable twin of v1beta.
func TestGeminiV1Path(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "ok"}})
	if status, body := geminiPost(t, srv, "/v1/models/m:generateContent", geminiRequestBody); status != http.StatusOK {
		t.Errorf("status %d: %s", status, body)
	}
}

func TestGeminiErrors(t *testing.T) {
	srv := start(t, Rule{When: Match{LastUserContains: "something else"}, Reply: Reply{Text: "x"}})
	type rpcStatus struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	cases := []struct {
		name, path, body string
		status           int
		code, contains   string
	}{
		{"no rule", "/v1beta/models/m:generateContent", geminiRequestBody, 400, "INVALID_ARGUMENT", "no rule matched this gemini request"},
		{"invalid body", "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":"x"}`, 400, "INVALID_ARGUMENT", "invalid request body"},
		{"unknown method", "/v1beta/models/m:embedContent", geminiRequestBody, 404, "NOT_FOUND", "no route"},
		{"no method", "/v1beta/models/m", geminiRequestBody, 404, "NOT_FOUND", "no route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := geminiPost(t, srv, tc.path, tc.body)
			var e rpcStatus
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			if status != tc.status || e.Error.Code != tc.status || e.Error.Status != tc.code || !strings.Contains(e.Error.Message, tc.contains) {
				t.Errorf("status %d body %s", status, body)
			}
		})
	}
}

// A token count is no model turn: it needs no rule and shifts nothing.
func TestCountTokens(t *testing.T) {
	srv := start(t, Rule{When: Match{LastUserContains: "never"}, Reply: Reply{Text: "x"}})
	body := `{"model":"m","messages":[{"role":"user","content":"count me"}]}`
	status, got := post(t, srv, "/v1/messages/count_tokens?beta=true", body)
	var anth struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(got, &anth); status != 200 || err != nil || anth.InputTokens != (len(body)+3)/4 {
		t.Errorf("anthropic count_tokens: %d %s", status, got)
	}
	status, got = geminiPost(t, srv, "/v1beta/models/m:countTokens", geminiRequestBody)
	var gem struct {
		TotalTokens int `json:"totalTokens"`
	}
	if err := json.Unmarshal(got, &gem); status != 200 || err != nil || gem.TotalTokens < 1 {
		t.Errorf("gemini countTokens: %d %s", status, got)
	}
	if status, got = post(t, srv, "/v1/messages/count_tokens", `{`); status != 400 || !bytes.Contains(got, []byte("invalid_request_error")) {
		t.Errorf("invalid body: %d %s", status, got)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests recorded, want none", n)
	}
}

func TestGeminiModels(t *testing.T) {
	srv := start(t, Rule{When: Match{Model: "gemini-mock"}})
	resp, err := testHTTPClient(t).Get(srv.URL + "/v1beta/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Models []struct{ Name string } `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	if diff := cmp.Diff([]string{"models/mockllm", "models/gemini-mock"}, names); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

// The history of TestNormalizeSDKRequests, as Gemini CLI sends it.
func TestNormalizeGemini(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "ok"}})
	body := `{"systemInstruction":{"role":"user","parts":[{"text":"You are helpful."}]},
		"contents":[
			{"role":"user","parts":[{"text":"What's the weather in Paris?"}]},
			{"role":"model","parts":[{"text":"Checking."},{"functionCall":{"id":"call_1","name":"get_weather","args":{"city": "Paris"}},"thoughtSignature":"sig"}]},
			{"role":"user","parts":[{"functionResponse":{"id":"call_1","name":"get_weather","response":{"output":"sunny"}}},{"text":"thanks"}]}],
		"tools":[{"functionDeclarations":[{"name":"get_weather"}]}]}`
	if status, got := geminiPost(t, srv, "/v1beta/models/m:generateContent", body); status != 200 {
		t.Fatalf("status %d: %s", status, got)
	}
	if diff := cmp.Diff(weatherConversation(APIGemini), srv.Requests()[0].Conversation); diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
}

// Shapes Gemini CLI's example above does not show but the API accepts.
func TestNormalizeGeminiShapes(t *testing.T) {
	body := `{"system_instruction":{"parts":[{"text":"A"},{"text":"B"}]},
		"contents":[
			{"parts":[{"text":"no role is a user"}]},
			{"role":"model","parts":[{"text":"plan","thought":true},{"thoughtSignature":"only"},{"function_call":{"name":"f","args":{"a":1}}}]},
			{"role":"function","parts":[{"function_response":{"name":"f","response":{"error":"boom"}}}]},
			{"role":"model","parts":[{"functionCall":{"name":"g"}}]},
			{"role":"user","parts":[{"functionResponse":{"name":"g","response":{"rows":[1,2]}}}]}],
		"tools":[{"function_declarations":[{"name":"f"}]},{"googleSearch":{}},{"functionDeclarations":[{"name":"g.v2"}]}]}`
	got, err := normalize(APIGemini, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := Conversation{API: APIGemini, System: "A\nB",
		Messages: []Message{
			{Role: RoleUser, Text: "no role is a user"},
			{Role: RoleAssistant, Reasoning: "plan", ToolCalls: []ToolCall{{Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}},
			{Role: RoleTool, ToolResults: []ToolResult{{CallID: "f", Text: "boom", IsError: true}}},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "g"}}},
			{Role: RoleTool, ToolResults: []ToolResult{{CallID: "g", Text: `{"rows":[1,2]}`}}},
		},
		Tools: []string{"f", "g.v2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
	if _, err := normalize(APIGemini, []byte(`{"contents":5}`)); err == nil {
		t.Error("contents that are no array: no error")
	}
}

// A scripted id-less call still gets an id, so Gemini CLI can answer by it.
func TestGeminiReplyIDsAreStable(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{ToolCalls: []ToolCall{{Name: "f"}}}})
	_, a := geminiPost(t, srv, "/v1beta/models/m:generateContent", geminiRequestBody)
	_, b := geminiPost(t, srv, "/v1beta/models/m:generateContent", geminiRequestBody)
	if !bytes.Equal(a, b) || !bytes.Contains(a, []byte(`"functionCall":{"id":"call_`)) {
		t.Errorf("replies:\n%s\n%s", a, b)
	}
}

// Faults apply to non-streaming Gemini calls (Gemini CLI's router uses
// generateContent) as to the other APIs.
func TestGeminiNonStreamingFaults(t *testing.T) {
	cases := []struct {
		name  string
		fault Fault
		check func(status int, body []byte, err error) bool
	}{
		{"status", Fault{Kind: FaultStatus, Status: 503}, func(status int, body []byte, err error) bool {
			return err == nil && status == 503 && bytes.Contains(body, []byte(`"status":"UNAVAILABLE"`))
		}},
		{"cut mid-body", Fault{Kind: FaultCut, AfterChunks: 1}, func(status int, body []byte, err error) bool {
			return status == 200 && errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{"malformed", Fault{Kind: FaultMalformed}, func(status int, body []byte, err error) bool {
			return err == nil && status == 200 && !json.Valid(body)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, faultRule(tc.fault))
			resp, err := testHTTPClient(t).Post(srv.URL+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(geminiRequestBody))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if !tc.check(resp.StatusCode, body, err) {
				t.Errorf("status %d, error %v, body %s", resp.StatusCode, err, body)
			}
		})
	}
}
