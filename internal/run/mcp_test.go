package run

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	rmcp "github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/mcp/mcptest"
	"github.com/runnel/runnel/internal/server"
)

// mcpHeaderValue stands in for a secret the request sends to the server.
const mcpHeaderValue = "mcp-secret-header-value-0004"

// mcpFixture is a real MCP server (go-sdk, streamable HTTP on a loopback
// socket). It counts live sessions from the server's side, so a test can
// check that a run closed every session rather than assume it.
type mcpFixture struct {
	url           string
	slowStarted   chan struct{}
	slowCancelled chan struct{}

	// adds counts the calls of the add tool the server ran.
	adds atomic.Int32
	// requireKey makes the server answer 401 to a request without the
	// X-Api-Key header, as a real protected server does.
	requireKey atomic.Bool

	sessions *liveSessions

	mu         sync.Mutex
	badHeaders int
	// traceparents are the traceparent headers of the requests that
	// carried one.
	traceparents []string
}

func newMCPFixture(t *testing.T) *mcpFixture {
	t.Helper()
	f := &mcpFixture{slowStarted: make(chan struct{}, 4), slowCancelled: make(chan struct{}, 4), sessions: newLiveSessions()}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, f.sessions.serverOptions())
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type sumOut struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Adds two numbers.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, sumOut, error) {
			f.adds.Add(1)
			return nil, sumOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Runs until cancelled.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			f.slowStarted <- struct{}{}
			<-ctx.Done()
			f.slowCancelled <- struct{}{}
			return nil, nil, ctx.Err()
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("Traceparent"); tp != "" {
			f.mu.Lock()
			f.traceparents = append(f.traceparents, tp)
			f.mu.Unlock()
		}
		if r.Header.Get("X-Api-Key") != mcpHeaderValue {
			f.mu.Lock()
			f.badHeaders++
			f.mu.Unlock()
			if f.requireKey.Load() {
				http.Error(w, "missing or wrong X-Api-Key", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	f.url = hs.URL + "/mcp"
	return f
}

// requireClosed waits until the server has no live session. The bound only
// turns "never closed" into a failure instead of a hung test.
func (f *mcpFixture) requireClosed(t *testing.T) {
	t.Helper()
	if live := f.sessions.openAfter(10 * time.Second); live > 0 {
		t.Fatalf("%d MCP session(s) still open after the run ended", live)
	}
}

// liveSessions counts an MCP server's live sessions from its own side.
type liveSessions struct {
	mu      sync.Mutex
	live    int
	changed chan struct{} // closed and replaced at every change
}

func newLiveSessions() *liveSessions { return &liveSessions{changed: make(chan struct{})} }

// serverOptions count every session from its initialization to its end.
func (s *liveSessions) serverOptions() *mcp.ServerOptions {
	return &mcp.ServerOptions{InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
		s.update(+1)
		go func() { _ = req.Session.Wait(); s.update(-1) }()
	}}
}

func (s *liveSessions) update(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live += d
	close(s.changed)
	s.changed = make(chan struct{})
}

// openAfter waits up to bound for no session to be live and returns how
// many still are.
func (s *liveSessions) openAfter(bound time.Duration) int {
	deadline := time.After(bound)
	for {
		s.mu.Lock()
		live, changed := s.live, s.changed
		s.mu.Unlock()
		if live == 0 {
			return 0
		}
		select {
		case <-changed:
		case <-deadline:
			return live
		}
	}
}

func mcpManager() *Manager {
	return NewManager(&Options{MCPGuard: rmcp.GuardOptions{HostAllowlist: []string{"127.0.0.1"}}})
}

func mcpRequest(llm *llmtest.Server, f *mcpFixture, prompt string) *runnel.RunRequest {
	req := baseRequest(llm, APIOpenAIChat, prompt)
	req.McpServers = []runnel.McpServer{{Name: "mem", Connection: &runnel.McpConnection{
		Type: "http", URL: f.url, Headers: map[string]string{"X-Api-Key": mcpHeaderValue}}}}
	return req
}

func TestMCPToolThroughTheLoop(t *testing.T) {
	f := newMCPFixture(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "sum: {{last_tool_result}}"}},
		{When: llmtest.Match{HasTool: "mcp__mem__add"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "mcp__mem__add", Arguments: json.RawMessage(`{"a":2,"b":3}`)}}}},
	}})
	defer llm.Close()
	var events []runnel.Event
	res, err := mcpManager().Run(context.Background(), mcpRequest(llm, f, "add 2 and 3"),
		runnel.SinkFunc(func(e runnel.Event) { events = append(events, e) }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted || res.Output != `sum: {"sum":5}` {
		t.Errorf("result %q %q, want completed with the server's sum", res.Status, res.Output)
	}
	offered := llm.Requests()[0].Conversation.Tools
	if !slices.Contains(offered, "mcp__mem__add") || !slices.Contains(offered, "mcp__mem__slow") {
		t.Errorf("offered tools %v, want the server's tools as mcp__mem__<tool>", offered)
	}
	if !strings.Contains(string(llm.Requests()[0].Body), `"required"`) && !strings.Contains(string(llm.Requests()[0].Body), `"a"`) {
		t.Error("the model was not offered the tool's real input schema")
	}
	f.requireClosed(t)
	if f.badHeaders != 0 {
		t.Errorf("%d MCP requests lacked the configured header", f.badHeaders)
	}
	b, _ := json.Marshal(struct {
		E []runnel.Event
		R *runnel.Result
	}{events, res})
	if strings.Contains(string(b), mcpHeaderValue) {
		t.Error("the MCP header value reached the events or the result")
	}
}

func TestMCPServerPermissionAskPauses(t *testing.T) {
	f := newMCPFixture(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{HasTool: "mcp__mem__add"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "mcp__mem__add", Arguments: json.RawMessage(`{"a":2,"b":3}`)}}}},
	}})
	defer llm.Close()
	req := mcpRequest(llm, f, "add 2 and 3")
	req.McpServers[0].Policy = &runnel.McpPolicy{Permission: "ask"}
	res, err := mcpManager().Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusPaused || len(res.Interactions) != 1 || res.Interactions[0].ToolName != "mcp__mem__add" ||
		res.Interactions[0].Kind != runnel.InteractionApproval {
		t.Fatalf("status %q interactions %+v, want one approval for mcp__mem__add although the tool is read-only", res.Status, res.Interactions)
	}
	f.requireClosed(t)
}

func TestMCPUnreachableServerReported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	f := newMCPFixture(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{When: llmtest.Match{}, Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	req := mcpRequest(llm, f, "hello")
	req.McpServers = append(req.McpServers, runnel.McpServer{Name: "gone", URL: dead, Transport: "http"})
	var notices []string
	res, err := mcpManager().Run(context.Background(), req, runnel.SinkFunc(func(e runnel.Event) {
		if e.Type == runnel.EventNotice {
			notices = append(notices, e.Text)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted {
		t.Errorf("status %q: an unreachable server must not fail the run", res.Status)
	}
	mentions := func(list []string) bool {
		return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, `"gone"`) })
	}
	if !mentions(notices) || !mentions(res.Notices) {
		t.Errorf("notice events %q, result notices %q: both must name the unreachable server", notices, res.Notices)
	}
	if !slices.Contains(llm.Requests()[0].Conversation.Tools, "mcp__mem__add") {
		t.Error("the reachable server's tools were not offered")
	}
	f.requireClosed(t)
}

// Every session is closed whatever way the run ends.
func TestMCPSessionsClosedOnEveryEnding(t *testing.T) {
	slowCall := llmtest.Rule{When: llmtest.Match{HasTool: "mcp__mem__slow", LastRole: "user"}, Reply: llmtest.Reply{
		ToolCalls: []llmtest.ToolCall{{ID: "s1", Name: "mcp__mem__slow", Arguments: json.RawMessage(`{}`)}}}}
	tests := []struct {
		name   string
		rules  []llmtest.Rule
		limits *runnel.Limits
		cancel bool // cancel the run's context once the slow tool runs
		want   runnel.Status
		code   runnel.ErrorCode
	}{
		{name: "success", rules: []llmtest.Rule{{When: llmtest.Match{}, Reply: llmtest.Reply{Text: "hi"}}}, want: runnel.StatusCompleted},
		{name: "model error", rules: []llmtest.Rule{{When: llmtest.Match{}, Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400}}},
			want: runnel.StatusFailed, code: runnel.CodeProviderError},
		{name: "timeout", rules: []llmtest.Rule{slowCall}, limits: &runnel.Limits{TotalTimeoutMs: 300},
			want: runnel.StatusFailed, code: runnel.CodeTimeout},
		{name: "cancelled", rules: []llmtest.Rule{slowCall}, cancel: true, want: runnel.StatusCancelled, code: runnel.CodeCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMCPFixture(t)
			llm := llmtest.NewServer(llmtest.Script{Rules: tt.rules})
			defer llm.Close()
			req := mcpRequest(llm, f, "go")
			req.Limits = tt.limits
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				go func() {
					select {
					case <-f.slowStarted:
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			res, err := mcpManager().Run(ctx, req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.want || res.ErrorCode != tt.code {
				t.Errorf("status %q code %q, want %q %q", res.Status, res.ErrorCode, tt.want, tt.code)
			}
			if tt.limits != nil || tt.cancel {
				select {
				case <-f.slowCancelled:
				case <-time.After(10 * time.Second):
					t.Error("the in-flight MCP call was not cancelled on the server")
				}
			}
			f.requireClosed(t)
		})
	}
}

func TestMCPGuardAndShapeRefusals(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{When: llmtest.Match{}, Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	tests := []struct {
		name   string
		server runnel.McpServer
		code   runnel.ErrorCode
		want   string
	}{
		{"loopback without allowlist", runnel.McpServer{Name: "local", URL: "https://127.0.0.1/mcp"}, runnel.CodeRefused, "127.0.0.1"},
		{"stdio", runnel.McpServer{Name: "files", Command: "npx"}, runnel.CodeRefused, "isolated"},
		{"reserved name", runnel.McpServer{Name: "runnel", URL: "https://mcp.example/mcp"}, runnel.CodeInvalidRequest, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := baseRequest(llm, APIOpenAIChat, "hi")
			req.McpServers = []runnel.McpServer{tt.server}
			_, err := NewManager(nil).Run(context.Background(), req, nil)
			var re *runnel.Error
			if !errors.As(err, &re) || re.Code != tt.code || !strings.Contains(re.Message, tt.want) {
				t.Errorf("err %v, want a %s refusal mentioning %q", err, tt.code, tt.want)
			}
		})
	}
}

func TestCodeModeNeedsAServer(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{When: llmtest.Match{}, Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "hi")
	req.CodeMode = &runnel.CodeMode{Enabled: true}
	_, err := NewManager(nil).Run(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "needs at least one MCP server") {
		t.Errorf("err %v, want codeMode refused without an MCP server", err)
	}
}

// TestServerEverythingThroughTheLoop lists and calls the reference MCP
// server's tools through runnel's native loop: the model sees the server's
// tools and calls echo and get-sum in one step.
func TestServerEverythingThroughTheLoop(t *testing.T) {
	s := mcptest.StartEverything(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "done"}},
		{When: llmtest.Match{HasTool: "mcp__everything__echo"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "e1", Name: "mcp__everything__echo", Arguments: json.RawMessage(`{"message":"hello"}`)},
			{ID: "e2", Name: "mcp__everything__get-sum", Arguments: json.RawMessage(`{"a":2,"b":3}`)},
		}}},
	}})
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "use the tools")
	req.McpServers = []runnel.McpServer{{Name: "everything", Connection: &runnel.McpConnection{Type: "http", URL: s.URL}}}
	req.Permissions = json.RawMessage(`{"default":"allow"}`)
	m := NewManager(&Options{MCPGuard: rmcp.GuardOptions{HostAllowlist: []string{"127.0.0.1:" + s.Port}}})
	res, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted || len(res.Notices) != 0 {
		t.Fatalf("status %q notices %q", res.Status, res.Notices)
	}
	outputs := toolOutputs(res)
	want := []string{"Echo: hello", "The sum of 2 and 3 is 5."}
	if len(outputs) != 2 || !strings.HasPrefix(outputs[0], want[0]) || !strings.HasPrefix(outputs[1], want[1]) {
		t.Errorf("tool results %q, want results starting %q", outputs, want)
	}
	if !slices.Contains(llm.Requests()[0].Conversation.Tools, "mcp__everything__get-sum") {
		t.Errorf("offered %v, want the reference server's tools", llm.Requests()[0].Conversation.Tools)
	}
	s.WaitFor(t, "Received session termination request")
}

// A client that disconnects mid-run cancels the run through the real HTTP
// server, and the run's MCP sessions close: checked on the MCP server.
func TestMCPSessionsClosedOnClientDisconnect(t *testing.T) {
	f := newMCPFixture(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{When: llmtest.Match{HasTool: "mcp__mem__slow"}, Reply: llmtest.Reply{
		ToolCalls: []llmtest.ToolCall{{ID: "s1", Name: "mcp__mem__slow", Arguments: json.RawMessage(`{}`)}}}}}})
	defer llm.Close()
	hs := httptest.NewServer(server.New(mcpManager(), nil))
	defer hs.Close()

	body, _ := json.Marshal(mcpRequest(llm, f, "go"))
	ctx, disconnect := context.WithCancel(context.Background())
	defer disconnect()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/run", strings.NewReader(string(body)))
	req.Header.Set("Accept", "application/x-ndjson")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	done := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-f.slowStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow MCP tool never started")
	}
	disconnect()
	<-done
	select {
	case <-f.slowCancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the MCP call was not cancelled after the client disconnected")
	}
	f.requireClosed(t)
}

// toolOutputs are the texts of the tool results in a run's messages, in
// order.
func toolOutputs(res *runnel.Result) []string {
	var outputs []string
	for _, msg := range res.Messages {
		for _, b := range msg.Content {
			if b.Type == runnel.BlockToolResult {
				outputs = append(outputs, b.OutputText())
			}
		}
	}
	return outputs
}
