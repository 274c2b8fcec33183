package run

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// twoToolScript makes the model call get_weather, then get_time, then
// answer with what the last tool said.
func twoToolScript() llmtest.Script {
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "answer", When: llmtest.Match{ToolResultsAtLeast: intp(2)},
			Reply: llmtest.Reply{Text: "It is {{last_tool_result}}."}},
		{Name: "time", When: llmtest.Match{LastRole: llmtest.RoleTool},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_t", Name: "get_time", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}},
		{Name: "weather", When: llmtest.Match{LastRole: llmtest.RoleUser},
			Reply: llmtest.Reply{Reasoning: "Look it up.", ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}},
	}}
}

func TestToolConversation(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(twoToolScript())
			defer llm.Close()
			p := newPlatform(t, nil)
			req := baseRequest(llm, api, "Weather and time in Paris?")
			req.CustomTools = []runnel.ToolSpec{callbackTool("get_weather"), callbackTool("get_time")}
			req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL + "/tools/call", Authorization: callbackAuth}
			rec := &recorder{}
			res, err := overHTTP(t, NewManager(nil)).Run(context.Background(), req, rec)
			if err != nil {
				t.Fatal(err)
			}

			wantEvents := []string{
				"thought thought_1: Look it up.",
				`tool_call call_w get_weather {"city":"Paris"}`,
				"usage 10/5/15",
				`tool_result call_w error=false "ref__get_weather ok"`,
				`tool_call call_t get_time {"city":"Paris"}`,
				"usage 20/10/30", // cumulative: the last usage event is the run's total
				`tool_result call_t error=false "ref__get_time ok"`,
				"message msg_3: It is ref__get_time ok.",
				"usage 30/15/45",
				"done end_turn",
			}
			if diff := cmp.Diff(wantEvents, rec.summary()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// A platform takes the last usage event as the run's total.
			var last runnel.Usage
			for _, e := range rec.events {
				if e.Type == runnel.EventUsage {
					last = *e.Usage
				}
			}
			if last != res.Usage {
				t.Errorf("last usage event %+v, result usage %+v: they must agree", last, res.Usage)
			}

			got := *res
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got.TraceID) {
				t.Errorf("traceId %q, want a fresh W3C trace id for a request without one", got.TraceID)
			}
			got.Messages, got.RequestID, got.TraceID = nil, "", ""
			want := runnel.Result{
				OK: true, Status: runnel.StatusCompleted, Output: "It is ref__get_time ok.",
				Usage: runnel.Usage{Input: 30, Output: 15, Total: 45}, StopReason: runnel.StopEndTurn,
				Interactions: []runnel.Interaction{}, Capabilities: capabilities(),
				SessionID: "sess-1", TurnID: "turn-1", Model: req.Model,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			var shape []string
			for _, m := range res.Messages {
				for _, b := range m.Content {
					shape = append(shape, string(m.Role)+":"+string(b.Type)+":"+b.ToolCallID+b.Text+b.OutputText())
				}
			}
			wantShape := []string{
				"assistant:reasoning:Look it up.", "assistant:tool_call:call_w",
				"tool:tool_result:call_wref__get_weather ok",
				"assistant:tool_call:call_t",
				"tool:tool_result:call_tref__get_time ok",
				"assistant:text:It is ref__get_time ok.",
			}
			if diff := cmp.Diff(wantShape, shape); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}

			wantCalls := []callbackCall{
				{callbackAuth, "application/json", `{"data":{"id":"call_w","type":"function","function":{"name":"ref__get_weather","arguments":{"city":"Paris"}}}}`, "call_w"},
				{callbackAuth, "application/json", `{"data":{"id":"call_t","type":"function","function":{"name":"ref__get_time","arguments":{"city":"Paris"}}}}`, "call_t"},
			}
			if diff := cmp.Diff(wantCalls, p.received()); diff != "" {
				t.Errorf("callback requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResultMessagesReplay sends a finished turn back with a new user
// message: the history this turn added must be accepted by the same API.
func TestResultMessagesReplay(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			script := twoToolScript()
			script.Rules = append([]llmtest.Rule{{Name: "followup", When: llmtest.Match{LastUserContains: "thanks"},
				Reply: llmtest.Reply{Text: "You're welcome."}}}, script.Rules...)
			llm := llmtest.NewServer(script)
			defer llm.Close()
			p := newPlatform(t, nil)
			req := baseRequest(llm, api, "Weather and time in Paris?")
			req.CustomTools = []runnel.ToolSpec{callbackTool("get_weather"), callbackTool("get_time")}
			req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
			m := NewManager(nil)
			first, err := m.Run(context.Background(), req, nil)
			if err != nil || !first.OK {
				t.Fatalf("first turn: %v %+v", err, first)
			}
			// The result goes back over the wire, as a platform would send it.
			raw, _ := json.Marshal(append(append(req.Messages, first.Messages...), runnel.UserText("thanks")))
			var history []runnel.Message
			if err := json.Unmarshal(raw, &history); err != nil {
				t.Fatal(err)
			}
			req.Messages = history
			second, err := m.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !second.OK || second.Output != "You're welcome." {
				t.Errorf("second turn = ok %v output %q error %q", second.OK, second.Output, second.Error)
			}
			conv := llm.Requests()[len(llm.Requests())-1].Conversation
			if n := conv.ToolResultCount(); n != 2 {
				t.Errorf("replayed history has %d tool results, want 2", n)
			}
		})
	}
}

func TestCallbackFailuresReachTheModel(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request, env envelopeIn)
		opts   *Options
		want   string
	}{
		{"error status", func(w http.ResponseWriter, _ *http.Request, _ envelopeIn) {
			writeContent(w, "STATUS_CODE_ERROR", "city unknown", "no such city")
		}, nil, "tool call ref__get_weather failed: city unknown\nno such city"},
		{"non-2xx", func(w http.ResponseWriter, _ *http.Request, _ envelopeIn) {
			http.Error(w, "internal details", http.StatusInternalServerError)
		}, nil, "tool call ref__get_weather failed: HTTP 500"},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request, _ envelopeIn) {
			w.Write([]byte("<html>"))
		}, nil, `tool call ref__get_weather failed: the tool endpoint answered with something other than the expected JSON envelope {"call": {...}}.`},
		{"timeout", func(_ http.ResponseWriter, r *http.Request, _ envelopeIn) {
			<-r.Context().Done()
		}, &Options{ToolTimeout: 1}, "tool call ref__get_weather timed out after 1ns without an answer."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
				{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Sorry."}},
				{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"X"}`)}}}},
			}})
			defer llm.Close()
			p := newPlatform(t, tt.answer)
			req := baseRequest(llm, APIOpenAIChat, "Weather?")
			req.CustomTools = []runnel.ToolSpec{callbackTool("get_weather")}
			req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
			res, err := NewManager(tt.opts).Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || res.Output != "Sorry." {
				t.Errorf("run = ok %v output %q, want it to continue after the tool error", res.OK, res.Output)
			}
			// Chat Completions has no error flag on tool messages: the model
			// reads the sentence, and the turn's history keeps the flag.
			if diff := cmp.Diff(llmtest.ToolResult{CallID: "c1", Text: tt.want}, lastToolResult(t, llm)); diff != "" {
				t.Errorf("what the model saw (-want +got):\n%s", diff)
			}
			wantBlock := runnel.Block{Type: runnel.BlockToolResult, ToolCallID: "c1", ToolName: "get_weather", Output: runnel.TextOutput(tt.want), IsError: true}
			if diff := cmp.Diff(wantBlock, res.Messages[1].Content[0]); diff != "" {
				t.Errorf("tool result in the turn's messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOversizeToolOutputIsCut(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Read it."}},
		{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "dump", Arguments: json.RawMessage(`{"city":"X"}`)}}}},
	}})
	defer llm.Close()
	p := newPlatform(t, func(w http.ResponseWriter, _ *http.Request, _ envelopeIn) {
		writeContent(w, "STATUS_CODE_OK", "", strings.Repeat("x", 1_000_123))
	})
	req := baseRequest(llm, APIOpenAIChat, "Dump it")
	req.CustomTools = []runnel.ToolSpec{callbackTool("dump")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
	res, err := NewManager(nil).Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := lastToolResult(t, llm).Text
	if want := strings.Repeat("x", 1_000_000) + " [... 123 bytes omitted]"; seen != want {
		t.Errorf("the model saw %d bytes ending %q, want 1,000,000 and the omission note", len(seen), seen[max(0, len(seen)-30):])
	}
	if !res.OK {
		t.Errorf("run failed: %s", res.Error)
	}
}

func TestMissingRequiredArgumentsAnsweredToTheModel(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "I will ask for the city."}},
		{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{}`)}}}},
	}})
	defer llm.Close()
	p := newPlatform(t, nil)
	// Anthropic carries is_error to the model, so the flag is checked too.
	req := baseRequest(llm, APIAnthropic, "Weather?")
	req.CustomTools = []runnel.ToolSpec{callbackTool("get_weather")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
	res, err := NewManager(nil).Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := llmtest.ToolResult{CallID: "c1", IsError: true,
		Text: "Tool 'get_weather' missing required argument(s): city. Retry the tool call with those argument fields populated."}
	if diff := cmp.Diff(want, lastToolResult(t, llm)); diff != "" {
		t.Errorf("what the model saw (-want +got):\n%s", diff)
	}
	if n := len(p.received()); n != 0 {
		t.Errorf("the callback was called %d times for an incomplete call", n)
	}
	if !res.OK || res.Output != "I will ask for the city." {
		t.Errorf("run = ok %v output %q", res.OK, res.Output)
	}
}

func TestMaxSteps(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"X"}`)}}}},
	}})
	defer llm.Close()
	p := newPlatform(t, nil)
	req := baseRequest(llm, APIOpenAIChat, "Loop forever")
	req.CustomTools = []runnel.ToolSpec{callbackTool("get_weather")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
	tests := []struct {
		name       string
		server     int
		limit      int
		wantModels int
	}{
		{"the request lowers the server's limit", 5, 2, 2},
		{"the request cannot raise it", 3, 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(llm.Requests())
			req.Limits = &runnel.Limits{MaxSteps: tt.limit}
			rec := &recorder{}
			res, err := NewManager(&Options{MaxSteps: tt.server}).Run(context.Background(), req, rec)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(llm.Requests()) - before; got != tt.wantModels {
				t.Errorf("model called %d times, want %d", got, tt.wantModels)
			}
			if !res.OK || res.StopReason != runnel.StopMaxSteps || res.Status != runnel.StatusCompleted {
				t.Errorf("result ok=%v status=%q stop=%q, want ok completed max_steps", res.OK, res.Status, res.StopReason)
			}
			if s := rec.summary(); s[len(s)-1] != "done max_steps" {
				t.Errorf("last event %q, want done max_steps", s[len(s)-1])
			}
		})
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
				{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Tool said: {{last_tool_result}}"}},
				{Reply: llmtest.Reply{Text: "You said {{last_user}}", ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "whoami", Arguments: json.RawMessage(`{"city":"X"}`)}}}},
			}})
			defer llm.Close()
			// A careless platform echoes the authorization it received.
			p := newPlatform(t, func(w http.ResponseWriter, r *http.Request, _ envelopeIn) {
				auth := r.Header.Get("Authorization")
				writeContent(w, "STATUS_CODE_OK", "", "auth was "+auth+"; token "+strings.TrimPrefix(auth, "Bearer "))
			})
			req := baseRequest(llm, api, "my keys are "+openAIKey+" and "+anthropicKey)
			req.CustomTools = []runnel.ToolSpec{callbackTool("whoami")}
			req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL, Authorization: callbackAuth}
			rec := &recorder{}
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			res, err := NewManager(&Options{Logger: logger}).Run(context.Background(), req, rec)
			if err != nil {
				t.Fatal(err)
			}
			// The platform did get the real value: redaction is for what runnel shows.
			if got := p.received()[0].Authorization; got != callbackAuth {
				t.Error("the callback did not receive the authorization verbatim")
			}
			resJSON, _ := json.Marshal(res)
			for what, b := range map[string][]byte{"events": rec.json(t), "result": resJSON, "logs": logs.Bytes()} {
				for _, s := range []string{openAIKey, anthropicKey, callbackTok} {
					if bytes.Contains(b, []byte(s)) {
						t.Errorf("%s contain a secret (of %d bytes)", what, len(s))
					}
				}
				if what != "logs" && !bytes.Contains(b, []byte("[REDACTED]")) {
					t.Errorf("%s show no redaction marker; the test did not exercise redaction", what)
				}
			}
			if !bytes.Contains(logs.Bytes(), []byte(`"msg":"run end"`)) {
				t.Error("the run logged nothing; the log check did not run")
			}
			if res.Output != "Tool said: auth was [REDACTED]; token [REDACTED]" {
				t.Errorf("output = %q", res.Output)
			}
		})
	}
}

func TestCancelMidRun(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "never"}},
		{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "slow", Arguments: json.RawMessage(`{"city":"X"}`)}}}},
	}})
	defer llm.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The tool is in flight when the caller goes away; its request must be
	// cancelled with the run, not abandoned.
	toolCancelled := make(chan struct{})
	p := newPlatform(t, func(_ http.ResponseWriter, r *http.Request, _ envelopeIn) {
		cancel()
		<-r.Context().Done()
		close(toolCancelled)
	})
	req := baseRequest(llm, APIOpenAIChat, "Be slow")
	req.CustomTools = []runnel.ToolSpec{callbackTool("slow")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL}
	rec := &recorder{}
	res, err := NewManager(nil).Run(ctx, req, rec)
	if err != nil {
		t.Fatal(err)
	}
	<-toolCancelled
	got := runnel.Result{OK: res.OK, Status: res.Status, StopReason: res.StopReason, ErrorCode: res.ErrorCode, Error: res.Error}
	want := runnel.Result{Status: runnel.StatusCancelled, StopReason: runnel.StopCancelled,
		ErrorCode: runnel.CodeCancelled, Error: "The run was cancelled before it finished."}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	s := rec.summary()
	if diff := cmp.Diff([]string{"error cancelled: The run was cancelled before it finished.", "done cancelled"}, s[len(s)-2:]); diff != "" {
		t.Errorf("stream end (-want +got):\n%s", diff)
	}
	if n := len(llm.Requests()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		name     string
		fault    llmtest.Fault
		limits   *runnel.Limits
		wantCode runnel.ErrorCode
		wantMsg  string
	}{
		{"provider error", llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400}, nil,
			runnel.CodeProviderError, "openai chat completions: HTTP 400"},
		{"total timeout lowered by the request", llmtest.Fault{Kind: llmtest.FaultHang}, &runnel.Limits{TotalTimeoutMs: 1},
			runnel.CodeTimeout, "The run exceeded its total timeout of 1ms."},
		{"idle timeout lowered by the request", llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 2}, &runnel.Limits{IdleTimeoutMs: 1},
			runnel.CodeTimeout, "the model sent nothing for 1ms (idle timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fault := tt.fault
			llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "hello"}, Fault: &fault}}})
			defer llm.Close()
			req := baseRequest(llm, APIOpenAIChat, "hi")
			req.Limits = tt.limits
			rec := &recorder{}
			res, err := NewManager(&Options{ProviderAttempts: 1}).Run(context.Background(), req, rec)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Status != runnel.StatusFailed || res.StopReason != runnel.StopError || res.ErrorCode != tt.wantCode {
				t.Errorf("result ok=%v status=%q stop=%q code=%q", res.OK, res.Status, res.StopReason, res.ErrorCode)
			}
			if !strings.HasPrefix(res.Error, tt.wantMsg) {
				t.Errorf("error = %q, want it to start with %q", res.Error, tt.wantMsg)
			}
			s := rec.summary()
			if diff := cmp.Diff([]string{"error " + string(tt.wantCode) + ": " + res.Error, "done error"}, s[len(s)-2:]); diff != "" {
				t.Errorf("stream end (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNotices: what a run accepts but does not act on as written is
// said, in the stream and in the result, never silently dropped.
func TestNotices(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	tests := []struct {
		name        string
		permissions string
		want        []string
	}{
		{"malformed permissions ask for everything", `"allow everything"`,
			[]string{"The permissions were not understood (permissions must be an object), so every tool call will ask for approval."}},
		{"dropped rules are named", `{"default":"allow","rules":[{"pattern":"Bash(","permission":"deny"},{"pattern":"Read","permission":"allow"},{"pattern":"Write"}]}`,
			[]string{
				`A permissions rule was dropped because it is not {pattern, permission} with a valid pattern and allow, ask or deny: {"pattern":"Bash(","permission":"deny"}`,
				`A permissions rule was dropped because it is not {pattern, permission} with a valid pattern and allow, ask or deny: {"pattern":"Write"}`,
			}},
		{"a good plan says nothing", `{"default":"ask","rules":[{"pattern":"Read","permission":"allow"}]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := baseRequest(llm, APIOpenAIChat, "hello")
			req.Permissions = json.RawMessage(tt.permissions)
			rec := &recorder{}
			res, err := NewManager(nil).Run(context.Background(), req, rec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Notices); diff != "" {
				t.Errorf("result notices (-want +got):\n%s", diff)
			}
			wantEvents := []string{}
			for _, n := range tt.want {
				wantEvents = append(wantEvents, "notice: "+n)
			}
			if diff := cmp.Diff(wantEvents, rec.summary()[:len(tt.want)]); diff != "" {
				t.Errorf("first events (-want +got):\n%s", diff)
			}
			if !res.OK || res.Output != "hi" {
				t.Errorf("run = ok %v output %q", res.OK, res.Output)
			}
		})
	}
}
