package run

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
