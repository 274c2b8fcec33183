package run

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/codemode"
	"github.com/runnel/runnel/internal/llmtest"
	rmcp "github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/mcp/mcptest"
)

// scriptCall is a model reply that runs script through run_mcp_script.
func scriptCall(id, script string, timeoutMs int) llmtest.Reply {
	args := map[string]any{"script": script}
	if timeoutMs > 0 {
		args["timeoutMs"] = timeoutMs
	}
	b, _ := json.Marshal(args)
	return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: id, Name: "run_mcp_script", Arguments: b}}}
}

// codeModeRequest is mcpRequest with code mode on and a model that runs
// script once, then repeats the script's output as its answer.
func codeModeRequest(t *testing.T, f *mcpFixture, script string, timeoutMs int) (*runnel.RunRequest, *llmtest.Server) {
	t.Helper()
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "{{last_tool_result}}"}},
		{When: llmtest.Match{HasTool: "run_mcp_script"}, Reply: scriptCall("s1", script, timeoutMs)},
	}})
	t.Cleanup(llm.Close)
	req := mcpRequest(llm, f, "use a script")
	req.CodeMode = &runnel.CodeMode{Enabled: true}
	return req, llm
}

// scriptOutput runs req and returns the run_mcp_script output the model
// read, decoded.
func scriptOutput(t *testing.T, req *runnel.RunRequest) (out struct {
	Result json.RawMessage `json:"result"`
	Logs   []string        `json:"logs"`
	Error  string          `json:"error"`
}) {
	t.Helper()
	res, err := mcpManager().Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted {
		t.Fatalf("status %q (%s: %s), want completed", res.Status, res.ErrorCode, res.Error)
	}
	if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
		t.Fatalf("the model read %q, want the script's {result, logs, error?}: %v", res.Output, err)
	}
	return out
}

// The model lists the tools, reads JavaScript signatures, and runs a
// script that chains twenty calls of a real MCP server's tool.
func TestCodeModeThroughTheLoop(t *testing.T) {
	f := newMCPFixture(t)
	const script = `let total = 0;
for (let i = 1; i <= 20; i++) total = (await tools.mem.add({a: total, b: i})).sum;
console.log("total", total);
return {total};`
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastToolResultContains: `"result"`}, Reply: llmtest.Reply{Text: "script: {{last_tool_result}}"}},
		{When: llmtest.Match{LastToolResultContains: "async function tools.mem.add(args)"}, Reply: scriptCall("s1", script, 0)},
		{When: llmtest.Match{HasTool: "list_mcp_tools"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "l1", Name: "list_mcp_tools", Arguments: json.RawMessage(`{}`)}}}},
	}})
	defer llm.Close()
	req := mcpRequest(llm, f, "sum 1 to 20")
	req.CodeMode = &runnel.CodeMode{Enabled: true, TimeoutMs: 10000}
	res, err := mcpManager().Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `script: {"result":{"total":210},"logs":["total 210"]}`
	if res.Status != runnel.StatusCompleted || res.Output != want {
		t.Errorf("status %q output %q, want completed with %q", res.Status, res.Output, want)
	}
	if n := f.adds.Load(); n != 20 {
		t.Errorf("the server ran add %d times, want 20", n)
	}
	first := llm.Requests()[0]
	for _, name := range []string{"list_mcp_tools", "run_mcp_script", "mcp__mem__add"} {
		if !slices.Contains(first.Conversation.Tools, name) {
			t.Errorf("offered %v, want %s among them", first.Conversation.Tools, name)
		}
	}
	if !strings.Contains(string(first.Body), "default 10000") {
		t.Error("run_mcp_script's schema does not give the platform's default budget")
	}
	f.requireClosed(t)
}

// Calls inside a script pass the same gates as direct calls: what needs
// approval or is denied rejects in the script, and the server never sees
// it. The script itself does not ask, even under a default of ask; a rule
// naming it does.
func TestCodeModePermissions(t *testing.T) {
	const catching = `try { return await tools.mem.add({a: 1, b: 2}); } catch (e) { return e.message; }`
	tests := []struct {
		name        string
		permissions string
		server      string // the server's policy.permission
		script      string
		want        string // in the script's result
	}{
		{name: "allowed", permissions: `{"default":"ask","rules":[{"pattern":"mcp__mem__add","permission":"allow"}]}`,
			script: `return await tools.mem.add({a: 1, b: 2})`, want: `{"sum":3}`},
		{name: "ask by default", permissions: `{"default":"ask"}`, script: catching,
			want: "Tool mem.add needs the user's approval; scripts cannot pause for approval. Call mcp__mem__add directly (outside run_mcp_script) so the user can approve it."},
		{name: "ask by the server", server: "ask", script: catching, want: "needs the user's approval"},
		{name: "denied by a rule", permissions: `{"default":"allow","rules":[{"pattern":"mcp__mem__add","permission":"deny"}]}`,
			script: catching, want: "Tool call execution denied. The permission policy of this run does not allow the tool 'mcp__mem__add'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMCPFixture(t)
			req, _ := codeModeRequest(t, f, tt.script, 0)
			req.Permissions = json.RawMessage(tt.permissions)
			if tt.server != "" {
				req.McpServers[0].Policy = &runnel.McpPolicy{Permission: tt.server}
			}
			out := scriptOutput(t, req)
			if !strings.Contains(string(out.Result), tt.want) || out.Error != "" {
				t.Errorf("script result %s error %q, want a result containing %q", out.Result, out.Error, tt.want)
			}
			if ran, wantRan := f.adds.Load(), tt.name == "allowed"; (ran == 1) != wantRan || ran > 1 {
				t.Errorf("the server ran add %d times", ran)
			}
			f.requireClosed(t)
		})
	}

	t.Run("script asked for by a rule", func(t *testing.T) {
		f := newMCPFixture(t)
		req, _ := codeModeRequest(t, f, `return 1`, 0)
		req.Permissions = json.RawMessage(`{"default":"allow","rules":[{"pattern":"run_mcp_script","permission":"ask"}]}`)
		res, err := mcpManager().Run(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != runnel.StatusPaused || len(res.Interactions) != 1 || res.Interactions[0].ToolName != "run_mcp_script" {
			t.Errorf("status %q interactions %+v, want a pause for the script", res.Status, res.Interactions)
		}
	})
}

// A script's budget ends it, whatever it waits for: a loop in the sandbox,
// or a tool call that would run on. The call is cancelled on the server
// before the model reads the script's error, and the session closes.
func TestCodeModeBudget(t *testing.T) {
	tests := []struct {
		name, script string
		slow         bool
	}{
		{name: "synchronous loop", script: `while (true) {}`},
		{name: "slow tool call", script: `return await tools.mem.slow({})`, slow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMCPFixture(t)
			req, _ := codeModeRequest(t, f, tt.script, 300)
			out := scriptOutput(t, req)
			if !strings.HasPrefix(out.Error, "the script did not finish within 300ms") || string(out.Result) != "null" {
				t.Errorf("result %s error %q, want the 300ms budget reported", out.Result, out.Error)
			}
			if tt.slow {
				select {
				case <-f.slowCancelled:
				default:
					t.Error("the script returned, but the server's slow call was not cancelled before the run went on")
				}
			}
			f.requireClosed(t)
		})
	}
}

func TestCodeModePlanRefusals(t *testing.T) {
	f := newMCPFixture(t)
	tests := []struct {
		name   string
		modify func(*runnel.RunRequest)
		want   string
	}{
		{name: "budget over the maximum", modify: func(r *runnel.RunRequest) { r.CodeMode.TimeoutMs = 120001 },
			want: "codeMode.timeoutMs must be between 1 and 120000"},
		{name: "custom tool named like a code-mode tool", modify: func(r *runnel.RunRequest) {
			r.CustomTools = []runnel.ToolSpec{{Name: "run_mcp_script", Kind: runnel.ToolKindClient}}
		}, want: `Tool name "run_mcp_script" is taken by code mode`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, llm := codeModeRequest(t, f, `return 1`, 0)
			tt.modify(req)
			_, err := mcpManager().Run(context.Background(), req, nil)
			var re *runnel.Error
			if !errors.As(err, &re) || re.Code != runnel.CodeInvalidRequest || !strings.Contains(re.Message, tt.want) {
				t.Errorf("err %v, want invalid_request saying %q", err, tt.want)
			}
			if len(llm.Requests()) != 0 {
				t.Error("the model was called for a refused request")
			}
		})
	}
}

// Code mode over the reference MCP server: a script calls two of its tools,
// one whose name is not a JavaScript identifier.
func TestCodeModeServerEverything(t *testing.T) {
	s := mcptest.StartEverything(t)
	const script = `const echo = await tools.everything.echo({message: "hi"});
const sum = await tools.everything["get-sum"]({a: 2, b: 3});
return [echo, sum];`
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "{{last_tool_result}}"}},
		{When: llmtest.Match{HasTool: "run_mcp_script"}, Reply: scriptCall("s1", script, 0)},
	}})
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "use a script")
	req.McpServers = []runnel.McpServer{{Name: "everything", Connection: &runnel.McpConnection{Type: "http", URL: s.URL}}}
	req.Permissions = json.RawMessage(`{"default":"allow"}`)
	req.CodeMode = &runnel.CodeMode{Enabled: true}
	m := NewManager(&Options{MCPGuard: rmcp.GuardOptions{HostAllowlist: []string{"127.0.0.1:" + s.Port}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Run(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":["Echo: hi","The sum of 2 and 3 is 5."],"logs":[]}`
	if res.Status != runnel.StatusCompleted || res.Output != want {
		t.Errorf("status %q output %q, want %q", res.Status, res.Output, want)
	}
	s.WaitFor(t, "Received session termination request")
}

// A run cancelled while a script waits on a tool call ends the script and
// cancels the call on the server; the session closes.
func TestCodeModeRunCancelled(t *testing.T) {
	f := newMCPFixture(t)
	req, _ := codeModeRequest(t, f, `return await tools.mem.slow({})`, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.slowStarted:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := mcpManager().Run(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCancelled {
		t.Errorf("status %q, want cancelled", res.Status)
	}
	select {
	case <-f.slowCancelled:
	case <-time.After(10 * time.Second):
		t.Error("the script's call was not cancelled on the server")
	}
	f.requireClosed(t)
}

// TestCodeModeScriptsNeverUseStoredApprovals: an approval the history
// holds for a direct call answers that call, never a script's call with
// the same key: the person approved a call they saw, not one a script
// makes.
func TestCodeModeScriptsNeverUseStoredApprovals(t *testing.T) {
	f := newMCPFixture(t)
	const catching = `try { return await tools.mem.add({a: 1, b: 2}); } catch (e) { return e.message; }`
	req, _ := codeModeRequest(t, f, catching, 0)
	req.Permissions = json.RawMessage(`{"default":"ask"}`)
	req.Messages = append(req.Messages, runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{{
		Type: runnel.BlockToolResult, ToolCallID: "old", ToolName: "mcp__mem__add", Input: json.RawMessage(`{"a":1,"b":2}`),
		Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":true}`)}}})
	out := scriptOutput(t, req)
	if !strings.Contains(string(out.Result), "needs the user's approval") {
		t.Errorf("script result %s, want the call refused as needing approval", out.Result)
	}
	if n := f.adds.Load(); n != 0 {
		t.Errorf("the server ran add %d times on an approval given for a direct call", n)
	}
	f.requireClosed(t)
}

// TestCodeModeWarm runs scripts through a Manager whose sandboxes a
// codemode.Warm keeps ready, as runnel serve does: each run's script gets
// a sandbox of its own, and nothing one script leaves reaches the next.
func TestCodeModeWarm(t *testing.T) {
	f := newMCPFixture(t)
	warm := codemode.NewWarm(nil)
	defer warm.Close()
	m := NewManager(&Options{MCPGuard: rmcp.GuardOptions{HostAllowlist: []string{"127.0.0.1"}}, ScriptWarm: warm})
	const script = `if (typeof left !== "undefined") throw new Error("the last script's global is here");
globalThis.left = 1;
return (await tools.mem.add({a: 1, b: 2})).sum`
	for i := range 3 {
		req, _ := codeModeRequest(t, f, script, 0)
		res, err := m.Run(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"result":3,"logs":[]}`; res.Status != runnel.StatusCompleted || res.Output != want {
			t.Errorf("run %d: status %q output %q, want completed with %q", i, res.Status, res.Output, want)
		}
	}
	f.requireClosed(t)
}
