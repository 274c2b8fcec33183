package run

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/sandbox"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.Init(os.Args[2:])) // the isolated sandbox's init (sandbox_test.go)
	}
	if len(os.Args) > 1 && os.Args[1] == stdioFixtureCommand {
		os.Exit(serveStdioFixture()) // a stdio MCP server (faults_mcp_test.go)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if fakeAgent.dir != "" {
			os.RemoveAll(fakeAgent.dir)
		}
	}))
}

// Secrets the tests hand to runs; none may appear in what a run shows.
const (
	openAIKey    = "sk-openai-test-secret-0001"
	anthropicKey = "sk-ant-test-secret-0002"
	callbackAuth = "Bearer cb-token-secret-0003"
	callbackTok  = "cb-token-secret-0003"
)

// apis are the three model APIs every conversation test runs on.
var apis = []string{APIOpenAIChat, APIOpenAIResponses, APIAnthropic}

// baseRequest is a request for api against the fake model server.
func baseRequest(llm *llmtest.Server, api string, prompt string) *runnel.RunRequest {
	req := &runnel.RunRequest{
		Messages:  []runnel.Message{runnel.UserText(prompt)},
		SessionID: "sess-1",
		TurnID:    "turn-1",
		Tools:     []string{},
		Secrets:   map[string]string{"OPENAI_API_KEY": openAIKey, "ANTHROPIC_API_KEY": anthropicKey},
	}
	switch api {
	case APIAnthropic:
		req.Model = "anthropic/claude-test"
		req.Endpoint = &runnel.Endpoint{BaseURL: llm.URL}
	default:
		req.Model = api + "/gpt-test"
		req.Endpoint = &runnel.Endpoint{BaseURL: llm.URL + "/v1"}
	}
	return req
}

// envelopeIn is the callback body as the platform decodes it.
type envelopeIn struct {
	Data struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"data"`
}

// callbackCall is one request the platform stand-in received.
type callbackCall struct {
	Authorization  string
	ContentType    string
	Body           string
	IdempotencyKey string
}

// platform is a real toolCallback endpoint. answer decides each reply from
// the decoded envelope; by default it answers "<function name> ok".
type platform struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []callbackCall
	answer func(w http.ResponseWriter, r *http.Request, env envelopeIn)
}

func newPlatform(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, env envelopeIn)) *platform {
	t.Helper()
	p := &platform{answer: answer}
	if p.answer == nil {
		p.answer = func(w http.ResponseWriter, _ *http.Request, env envelopeIn) {
			writeContent(w, "STATUS_CODE_OK", "", env.Data.Function.Name+" ok")
		}
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.calls = append(p.calls, callbackCall{r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(body), r.Header.Get("Idempotency-Key")})
		p.mu.Unlock()
		var env envelopeIn
		_ = json.Unmarshal(body, &env)
		p.answer(w, r, env)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *platform) received() []callbackCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]callbackCall(nil), p.calls...)
}

func writeContent(w http.ResponseWriter, code, message, content string) {
	c, _ := json.Marshal(content)
	m, _ := json.Marshal(message)
	fmt.Fprintf(w, `{"call":{"id":"x","status":{"code":%q,"message":%s},"data":{"role":"tool","tool_call_id":"x","content":%s}}}`, code, m, c)
}

// callbackTool is a read-only callback tool spec with a required "city"
// argument: the default permission plan (allow_reads) lets it run.
func callbackTool(name string) runnel.ToolSpec {
	yes := true
	return runnel.ToolSpec{
		Name: name, Description: "Look something up", CallRef: "ref__" + name, ReadOnly: &yes,
		InputSchema: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`),
	}
}

// recorder is a sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []runnel.Event
}

func (r *recorder) Emit(e runnel.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// summary renders the stream as one line per event, with the deltas of a
// part joined, so a test can compare a whole stream whatever the chunking.
func (r *recorder) summary() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	var part *string
	for _, e := range r.events {
		switch e.Type {
		case runnel.EventMessageDelta, runnel.EventThoughtDelta:
			*part += e.Delta
			continue
		case runnel.EventMessageStart, runnel.EventThoughtStart:
			out = append(out, fmt.Sprintf("%s %s: ", strings.TrimSuffix(string(e.Type), "_start"), e.ID))
			part = &out[len(out)-1]
			continue
		case runnel.EventMessageEnd, runnel.EventThoughtEnd:
			continue
		}
		out = append(out, describe(e))
	}
	return out
}

func describe(e runnel.Event) string {
	switch e.Type {
	case runnel.EventToolCall:
		return fmt.Sprintf("tool_call %s %s %s", e.ID, e.Name, e.Input)
	case runnel.EventToolResult:
		if e.Denied {
			return fmt.Sprintf("tool_result %s denied %s", e.ID, e.Output)
		}
		return fmt.Sprintf("tool_result %s error=%v %s", e.ID, e.IsError, e.Output)
	case runnel.EventInteractionResponse:
		return fmt.Sprintf("interaction_response %s %s approved=%v", e.Answer.ID, e.Answer.ToolCallID, e.Answer.Approved)
	case runnel.EventUsage:
		return fmt.Sprintf("usage %d/%d/%d", e.Usage.Input, e.Usage.Output, e.Usage.Total)
	case runnel.EventDone:
		return "done " + e.StopReason
	case runnel.EventError:
		return fmt.Sprintf("error %s: %s", e.Code, e.Message)
	case runnel.EventNotice:
		return "notice: " + e.Text
	}
	return string(e.Type)
}

func (r *recorder) json(t *testing.T) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.Marshal(r.events)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastToolResult is what the fake model last received as a tool result.
func lastToolResult(t *testing.T, llm *llmtest.Server) llmtest.ToolResult {
	t.Helper()
	reqs := llm.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	c := reqs[len(reqs)-1].Conversation
	tr, ok := c.LastToolResult()
	if !ok {
		t.Fatal("the model's last request has no tool result")
	}
	return tr
}

func intp(n int) *int { return &n }
