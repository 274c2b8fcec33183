package run

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/testlog"
)

// The wire of an Agenta v0.113 deployment (DESIGN §3.7), each item over
// runnel's HTTP front door.

// TestMCPCredentialsAreHeaders: a secret header given as a credential
// bound to a header (connection.credentials) reaches the server, which
// requires it, and never shows in events, results or logs.
func TestMCPCredentialsAreHeaders(t *testing.T) {
	f := newMCPFixture(t)
	f.requireKey.Store(true)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "sum: {{last_tool_result}}"}},
		{When: llmtest.Match{HasTool: "mcp__mem__add"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "mcp__mem__add", Arguments: json.RawMessage(`{"a":2,"b":3}`)}}}},
		{Reply: llmtest.Reply{Text: "no tools"}},
	}})
	defer llm.Close()
	req := mcpRequest(llm, f, "add 2 and 3")
	req.McpServers[0].Connection.Headers = map[string]string{"X-Team": "public"}
	req.McpServers[0].Connection.Credentials = []runnel.Credential{{
		Binding: runnel.CredentialBinding{Kind: "header", Name: "X-Api-Key"}, Value: mcpHeaderValue, Usage: "opaque_http"}}
	req.McpServers[0].Policy = &runnel.McpPolicy{Permission: "allow"}
	logs := &testlog.Buffer{}
	m := mcpManager()
	m.log = logs.Logger()
	rec := &recorder{}
	res, err := overHTTP(t, m).Run(context.Background(), req, rec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != `sum: {"sum":5}` {
		t.Fatalf("output %q (notices %q), want the tool's answer: the credential header must reach the server", res.Output, res.Notices)
	}
	all, _ := json.Marshal(res)
	for what, text := range map[string]string{"result": string(all), "events": string(rec.json(t)), "logs": logs.String()} {
		if strings.Contains(text, mcpHeaderValue) {
			t.Errorf("the credential shows in the %s", what)
		}
	}
	f.requireClosed(t)
}

// TestRequiredMCPServerFailsTheRun: a server the request marks required,
// reached without its credential, fails the run with a sentence naming
// it; without required it is a notice and the model goes on.
func TestRequiredMCPServerFailsTheRun(t *testing.T) {
	f := newMCPFixture(t)
	f.requireKey.Store(true)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "no tools"}}}})
	defer llm.Close()
	req := mcpRequest(llm, f, "add 2 and 3")
	req.McpServers[0].Connection.Headers = nil // the credential is missing

	res, err := overHTTP(t, mcpManager()).Run(context.Background(), req, nil)
	if err != nil || res.Status != runnel.StatusCompleted || len(res.Notices) == 0 || !strings.Contains(res.Notices[0], `MCP server "mem" is unavailable`) {
		t.Fatalf("not required: %v, %+v; want a completed run with a notice", err, res)
	}

	// On a stream the failure is in the stream, as the platform reads it.
	req.McpServers[0].Policy = &runnel.McpPolicy{Required: true}
	res, err = overHTTP(t, mcpManager()).Run(context.Background(), req, nil)
	if err != nil || res.OK || res.ErrorCode != runnel.CodeUnavailable || !strings.Contains(res.Error, `MCP server "mem" is unavailable`) ||
		!strings.Contains(res.Error, "policy.required") {
		t.Fatalf("required: %v, %+v; want a failed result naming the server", err, res)
	}
	f.requireClosed(t)
}

// TestAgentaToolCallWire: what a callback call carries for an Agenta
// platform: ephemeral arguments gone (the permission decision saw them),
// the run kind header, and $ctx.session.id bound from sessionId.
func TestAgentaToolCallWire(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_r", "rename_session",
		`{"name":"Q3 plan","reason":"the user asked","session":"forged"}`)))
	defer llm.Close()
	kinds := make(chan string, 4)
	p := newPlatform(t, func(w http.ResponseWriter, r *http.Request, env envelopeIn) {
		kinds <- r.Header.Get("X-Agenta-Run-Kind")
		writeContent(w, "STATUS_CODE_OK", "", "renamed")
	})
	req := baseRequest(llm, APIOpenAIChat, "Rename this chat")
	req.SessionID = "sess-7"
	req.RunContext = json.RawMessage(`{"run":{"kind":"test"},"workflow":{"variant":{"id":"var_1"}}}`)
	req.Permissions = json.RawMessage(`{"default":"allow"}`)
	spec := writeTool("rename_session")
	spec.InputSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"reason":{"type":"string"}}}`)
	spec.EphemeralArgs = []string{"reason"}
	spec.ContextBindings = map[string]string{"session": "$ctx.session.id"}
	req.CustomTools = []runnel.ToolSpec{spec}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL + "/tools/call"}
	rec := &recorder{}
	res, err := overHTTP(t, NewManager(nil)).Run(context.Background(), req, rec)
	if err != nil || res.Status != runnel.StatusCompleted {
		t.Fatalf("%v, %+v", err, res)
	}
	calls := p.received()
	if len(calls) != 1 {
		t.Fatalf("callback calls %+v, want one", calls)
	}
	const want = `{"data":{"id":"call_r","type":"function","function":{"name":"ref__rename_session","arguments":{"name":"Q3 plan","session":"sess-7"}}}}`
	if calls[0].Body != want {
		t.Errorf("callback body\n%s\nwant\n%s", calls[0].Body, want)
	}
	if kind := <-kinds; kind != "test" {
		t.Errorf("x-agenta-run-kind %q, want test", kind)
	}
	// The event and the history keep what the model wrote.
	if s := rec.summary(); !strings.Contains(s[0], `"reason":"the user asked"`) {
		t.Errorf("tool_call event %q, want the model's arguments whole", s[0])
	}
}

// TestPolicyDenialIsMarkedDenied: a call the policy refuses streams as a
// tool_result with denied: true, which a frontend shows as declined.
func TestPolicyDenialIsMarkedDenied(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_d", "delete_item", deleteArgs)))
	defer llm.Close()
	p := newPlatform(t, nil)
	req := baseRequest(llm, APIOpenAIChat, "Delete it")
	req.CustomTools = []runnel.ToolSpec{writeTool("delete_item")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL + "/tools/call"}
	req.Permissions = json.RawMessage(`{"default":"deny"}`)
	rec := &recorder{}
	if _, err := overHTTP(t, NewManager(nil)).Run(context.Background(), req, rec); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rec.json(t)), `{"type":"tool_result","id":"call_d","output":"Tool call execution denied.`) ||
		!strings.Contains(string(rec.json(t)), `"isError":true,"denied":true}`) {
		t.Errorf("events %s, want the refusal as a denied tool_result", rec.json(t))
	}
}

// TestKillEndsALongRun: POST /kill for the session ends a run whose model
// never answers, with the real manager behind the real server.
func TestKillEndsALongRun(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Fault: &llmtest.Fault{Kind: llmtest.FaultHang}}}})
	defer llm.Close()
	h := overHTTP(t, NewManager(nil))
	req := baseRequest(llm, APIOpenAIChat, "Think hard")
	req.SessionID, req.ProjectID = "sess-long", "proj-1"
	done := make(chan *runnel.Result, 1)
	go func() {
		res, err := h.Run(context.Background(), req, nil)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for deadline := time.Now().Add(time.Minute); len(llm.Requests()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the model never got the request")
		}
	}
	resp, err := h.client.Post(strings.TrimSuffix(h.url, "/run")+"/kill", "application/json",
		strings.NewReader(`{"sessionId":"sess-long","projectId":"proj-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case res := <-done:
		if res == nil || res.Status != runnel.StatusCancelled {
			t.Errorf("the killed run = %+v, want cancelled", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("the run did not end after /kill")
	}
}
