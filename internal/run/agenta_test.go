package run

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// onePixelPNG is a real 1×1 PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// TestInlineFilesReachEachAPI: an image and a PDF in the user's message
// reach the model in each API's own format.
func TestInlineFilesReachEachAPI(t *testing.T) {
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 tiny"))
	want := map[string][]string{
		APIOpenAIChat: {`{"image_url":{"url":"data:image/png;base64,` + onePixelPNG + `"},"type":"image_url"}`,
			`{"file":{"file_data":"data:application/pdf;base64,` + pdf + `","filename":"q3.pdf"},"type":"file"}`},
		APIOpenAIResponses: {`{"detail":"auto","image_url":"data:image/png;base64,` + onePixelPNG + `","type":"input_image"}`,
			`{"file_data":"data:application/pdf;base64,` + pdf + `","filename":"q3.pdf","type":"input_file"}`},
		APIAnthropic: {`{"source":{"data":"` + onePixelPNG + `","media_type":"image/png","type":"base64"},"type":"image"}`,
			`{"source":{"data":"` + pdf + `","media_type":"application/pdf","type":"base64"},"type":"document"}`},
	}
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "A pixel and a PDF."}}}})
			defer llm.Close()
			req := baseRequest(llm, api, "")
			req.Messages = []runnel.Message{{Role: runnel.RoleUser, Content: []runnel.Block{
				{Type: runnel.BlockImage, MimeType: "image/png", Data: onePixelPNG},
				{Type: runnel.BlockResource, MimeType: "application/pdf", Data: pdf, Filename: "q3.pdf"},
				{Type: runnel.BlockText, Text: "What are these?"},
			}}}
			req.ModelCapabilities = &runnel.ModelCapabilities{InputModalities: []string{"text", "image", "file"}}
			res, err := overHTTP(t, NewManager(nil)).Run(context.Background(), req, nil)
			if err != nil || res.Status != runnel.StatusCompleted {
				t.Fatalf("%v, %+v", err, res)
			}
			body := string(llm.Requests()[0].Body)
			for _, part := range want[api] {
				if !strings.Contains(body, part) {
					t.Errorf("the request body lacks %s:\n%s", part, body)
				}
			}
		})
	}
}

// TestAttachmentsAreFetchedOrReported: an attachment block that carries
// only its id is fetched from the attachments endpoint and reaches the
// model; without an endpoint it is reported, never dropped silently; one
// the model cannot take goes into the workspace.
func TestAttachmentsAreFetchedOrReported(t *testing.T) {
	png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
	const id = "019c471b-5b91-71d2-9d4b-5486013e6e9b"
	var got struct {
		mu         sync.Mutex
		path, auth string
	}
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.mu.Lock()
		got.path, got.auth = r.URL.RequestURI(), r.Header.Get("Authorization")
		got.mu.Unlock()
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	}))
	defer store.Close()
	attached := func(llm *llmtest.Server) *runnel.RunRequest {
		req := baseRequest(llm, APIAnthropic, "")
		req.SessionID = "sess-att"
		req.Messages = []runnel.Message{{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockAttachment, AttachmentID: id, Filename: "photo.png", MimeType: "image/png", Size: int64(len(png))},
			{Type: runnel.BlockText, Text: "Describe this image."},
		}}}
		req.Telemetry = json.RawMessage(`{"exporters":{"otlp":{"endpoint":"https://otlp.example/v1/traces","headers":{"authorization":"Access tok-123"}}}}`)
		return req
	}
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "A pixel."}}}})
	defer llm.Close()

	t.Run("fetched", func(t *testing.T) {
		m := NewManager(&Options{AttachmentsURL: store.URL + "/api/sessions/attachments/{id}/content?session_id={sessionId}"})
		res, err := overHTTP(t, m).Run(context.Background(), attached(llm), nil)
		if err != nil || res.Status != runnel.StatusCompleted || len(res.Notices) != 0 {
			t.Fatalf("%v, %+v", err, res)
		}
		body := string(llm.Requests()[len(llm.Requests())-1].Body)
		if !strings.Contains(body, `{"source":{"data":"`+onePixelPNG+`","media_type":"image/png","type":"base64"},"type":"image"}`) {
			t.Errorf("the model did not get the image: %s", body)
		}
		got.mu.Lock()
		defer got.mu.Unlock()
		if got.path != "/api/sessions/attachments/"+id+"/content?session_id=sess-att" || got.auth != "Access tok-123" {
			t.Errorf("fetched %s with %q, want the attachment's path and the run's credential", got.path, got.auth)
		}
	})
	t.Run("no endpoint", func(t *testing.T) {
		res, err := overHTTP(t, NewManager(nil)).Run(context.Background(), attached(llm), nil)
		if err != nil || res.Status != runnel.StatusCompleted {
			t.Fatalf("%v, %+v", err, res)
		}
		if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "photo.png (image/png) was not given to the model") ||
			!strings.Contains(res.Notices[0], "RUNNEL_ATTACHMENTS_URL") {
			t.Errorf("notices %q, want one naming the file and the setting", res.Notices)
		}
		if body := string(llm.Requests()[len(llm.Requests())-1].Body); !strings.Contains(body, "photo.png (image/png), but it could not be loaded") {
			t.Errorf("the model was not told of the file: %s", body)
		}
	})
	t.Run("a model without images", func(t *testing.T) {
		m := NewManager(&Options{AttachmentsURL: store.URL + "/a/{id}", WorkspaceRoot: t.TempDir()})
		req := attached(llm)
		req.Tools = []string{"read"}
		req.ModelCapabilities = &runnel.ModelCapabilities{InputModalities: []string{"text"}}
		res, err := overHTTP(t, m).Run(context.Background(), req, nil)
		if err != nil || res.Status != runnel.StatusCompleted || len(res.Notices) != 0 {
			t.Fatalf("%v, %+v", err, res)
		}
		body := string(llm.Requests()[len(llm.Requests())-1].Body)
		if strings.Contains(body, onePixelPNG) || !strings.Contains(body, "saved in the workspace at attachments/"+id+"/photo.png") {
			t.Errorf("want the image kept from the model and saved in the workspace: %s", body)
		}
	})
}

// TestAgentaApprovalShape: Agenta sends a person's answer as a tool_result
// right after the call, in the same assistant message, without a kind, its
// output {approved, interactionToken}. The call runs, and the answer is
// reported under the token.
func TestAgentaApprovalShape(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_d", "delete_item", deleteArgs)))
	defer llm.Close()
	p := newPlatform(t, nil)
	m := overHTTP(t, NewManager(nil))
	req, first := pausedRun(t, m, llm, p, APIOpenAIChat)
	it := first.Interactions[0]
	history := append([]runnel.Message(nil), req.Messages...)
	history = append(history, runnel.Message{Role: runnel.RoleAssistant, Content: []runnel.Block{
		{Type: runnel.BlockToolCall, ToolCallID: "call_d", ToolName: "delete_item", Input: json.RawMessage(deleteArgs)},
		{Type: runnel.BlockToolResult, ToolCallID: "call_d", ToolName: "delete_item",
			Output: json.RawMessage(`{"approved":true,"interactionToken":"` + it.ID + `"}`)},
	}})
	rec := &recorder{}
	res, err := m.Run(context.Background(), withHistory(t, req, history), rec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted || len(p.received()) != 1 {
		t.Fatalf("status %q with %d callback calls, want the approved call run once", res.Status, len(p.received()))
	}
	if s := rec.summary(); len(s) < 2 || s[1] != "interaction_response "+it.ID+" call_d approved=true" {
		t.Errorf("events %q, want the answer reported under the token", s)
	}
}
