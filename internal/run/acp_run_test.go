package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/harness/acp"
)

// The fake ACP agent (internal/harness/acp/fakeagent), built once when a
// test first needs it and removed when the tests end.
var fakeAgent struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func fakeAgentBin(t *testing.T) string {
	t.Helper()
	fakeAgent.once.Do(func() {
		fakeAgent.dir, fakeAgent.err = os.MkdirTemp("", "runnel-run-fakeagent-")
		if fakeAgent.err != nil {
			return
		}
		fakeAgent.bin = filepath.Join(fakeAgent.dir, "fakeagent")
		out, err := exec.Command("go", "build", "-o", fakeAgent.bin, "../harness/acp/fakeagent").CombinedOutput()
		if err != nil {
			fakeAgent.err = fmt.Errorf("building the fake agent: %v\n%s", err, out)
		}
	})
	if fakeAgent.err != nil {
		t.Fatal(fakeAgent.err)
	}
	return fakeAgent.bin
}

// acpTestbed is runnel with the fake agent installed as "claude" through
// RUNNEL_HARNESS_CLAUDE_COMMAND: the real recipe writes its HOME and
// environment, and the fake reports what it got.
type acpTestbed struct {
	scenario, log, homes string
	agents               *agents.Registry
}

func newACPTestbed(t *testing.T, scenario string) *acpTestbed {
	t.Helper()
	dir := t.TempDir()
	b := &acpTestbed{scenario: filepath.Join(dir, "scenario.json"), log: filepath.Join(dir, "agent.log"), homes: filepath.Join(dir, "homes")}
	if err := os.WriteFile(b.scenario, []byte(scenario), 0o600); err != nil {
		t.Fatal(err)
	}
	// env(1) carries the fake's own settings past the recipe's scrubbed
	// environment, as a wrapper script would.
	b.agents = agents.NewRegistry(agents.Options{
		Dir:      filepath.Join(dir, "agents"),
		HomeRoot: b.homes,
		Commands: map[string][]string{"claude": {"/usr/bin/env", "FAKE_ACP_SCENARIO=" + b.scenario, "FAKE_ACP_LOG=" + b.log, fakeAgentBin(t)}},
	})
	return b
}

// manager is one replica: a Manager with the testbed's agents and signing.
func (b *acpTestbed) manager(t *testing.T) *httpRunner {
	return overHTTP(t, NewManager(&Options{
		Agents:            b.agents,
		InteractionSecret: []byte("replica-shared-secret-0123456789"),
		WorkspaceRoot:     t.TempDir(),
		ACPTimeouts:       acp.Timeouts{ExitGrace: 500 * time.Millisecond},
	}))
}

// notes are the fake agent's log notes of one name, over every run.
func (b *acpTestbed) notes(t *testing.T, name string) []map[string]any {
	t.Helper()
	raw, _ := os.ReadFile(b.log)
	var out []map[string]any
	for _, line := range strings.Split(string(raw), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["t"] == "note" && e["note"] == name {
			d, _ := e["data"].(map[string]any)
			out = append(out, d)
		}
	}
	return out
}

// prompts are the prompt texts the fake agent received.
func (b *acpTestbed) prompts(t *testing.T) []string {
	t.Helper()
	raw, _ := os.ReadFile(b.log)
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		var e struct {
			T      string `json:"t"`
			Method string `json:"method"`
			Params struct {
				Prompt []struct{ Text string } `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.T == "recv" && e.Method == "session/prompt" {
			var texts []string
			for _, p := range e.Params.Prompt {
				texts = append(texts, p.Text)
			}
			out = append(out, strings.Join(texts, ""))
		}
	}
	return out
}

// claudeRequest is a request for the claude harness with one callback
// tool that writes (so allow_reads asks before it runs).
func claudeRequest(cb *platform, prompt string) *runnel.RunRequest {
	return &runnel.RunRequest{
		Harness:  "claude",
		Model:    "anthropic/claude-test",
		Endpoint: &runnel.Endpoint{BaseURL: "http://127.0.0.1:9"},
		Secrets:  map[string]string{"ANTHROPIC_API_KEY": anthropicKey},
		Messages: []runnel.Message{runnel.UserText(prompt)},
		CustomTools: []runnel.ToolSpec{{Name: "delete_file", Description: "Delete a file", CallRef: "ref__delete",
			InputSchema: json.RawMessage(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`)}},
		ToolCallback: &runnel.ToolCallback{Endpoint: cb.srv.URL, Authorization: callbackAuth},
		SessionID:    "sess-acp",
	}
}

// The claude-like agent asks before calling runnel's tool; a cold resume
// re-issues the call under a new id.
const deleteScenario = `{"turns":[
 {"whenPromptContains":"APPROVED delete_file","whenMode":"default","steps":[
  {"toolCall":{"toolCallId":"toolu_B","title":"mcp__runnel__delete_file","name":"mcp__runnel__delete_file","kind":"delete","status":"pending","rawInput":{"path":"q3.docx"}}},
  {"permission":{"toolCall":{"toolCallId":"toolu_B","name":"mcp__runnel__delete_file","title":"mcp__runnel__delete_file","rawInput":{"path":"q3.docx"}},
   "onAllow":[{"mcpCall":{"server":"runnel","tool":"delete_file","arguments":{"path":"q3.docx"},"timeout":"20s"}},
              {"toolCallUpdate":{"toolCallId":"toolu_B","status":"completed"}},
              {"text":"Deleted: {{last_tool_result}}"}],
   "onReject":[{"text":"The deletion was refused."}]}}]},
 {"whenPromptContains":"DENIED delete_file","steps":[{"text":"Understood, I will not delete it."}]},
 {"whenPromptContains":"delete","whenMode":"default","steps":[
  {"toolCall":{"toolCallId":"toolu_A","title":"mcp__runnel__delete_file","name":"mcp__runnel__delete_file","kind":"delete","status":"pending","rawInput":{"path":"q3.docx"}}},
  {"permission":{"toolCall":{"toolCallId":"toolu_A","name":"mcp__runnel__delete_file","title":"mcp__runnel__delete_file","rawInput":{"path":"q3.docx"}},
   "onAllow":[{"mcpCall":{"server":"runnel","tool":"delete_file","arguments":{"path":"q3.docx"}}},{"text":"ran without asking"}],
   "onCancelled":[{"end":{}}]}}]}]}`

// An approval round trip across two replicas: the first pauses on the
// agent's permission request with a signed interaction and runs nothing;
// the second, given the signed approval in the replayed conversation,
// starts a fresh session whose prompt renders the history, and when the
// agent makes the call again (a new id) the stored approval answers the
// gate: the call runs once.
func TestACPApprovalAcrossReplicas(t *testing.T) {
	t.Setenv("RUNNEL_TEST_HOST_SECRET", "host-env-must-not-reach-the-agent")
	cb := newPlatform(t, nil)
	bed := newACPTestbed(t, deleteScenario)
	first, second := bed.manager(t), bed.manager(t)

	req := claudeRequest(cb, "please delete q3.docx")
	const callerTrace = "0af7651916cd43dd8448eb211c80319c"
	req.Context = &runnel.TraceContext{Propagation: &struct {
		Traceparent string `json:"traceparent,omitempty"`
		Baggage     string `json:"baggage,omitempty"`
	}{Traceparent: "00-" + callerTrace + "-b7ad6b7169203331-01"}}
	rec := &recorder{}
	paused, err := first.Run(t.Context(), req, rec)
	if err != nil {
		t.Fatal(err)
	}
	if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 {
		t.Fatalf("first turn: %+v", paused)
	}
	it := paused.Interactions[0]
	if it.ToolCallID != "toolu_A" || it.ToolName != "delete_file" || it.Signature == "" || string(it.Input) != `{"path":"q3.docx"}` {
		t.Fatalf("interaction %+v", it)
	}
	if n := len(cb.received()); n != 0 {
		t.Fatalf("the callback ran %d times before anyone approved", n)
	}

	answer, _ := json.Marshal(map[string]any{"approved": true, "interactionId": it.ID, "signature": it.Signature})
	next := resumeRequest(t, req, paused, approval(it.ToolCallID, it.ToolName, string(answer)))
	rec2 := &recorder{}
	done, err := second.Run(t.Context(), next, rec2)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != runnel.StatusCompleted || done.Output != "Deleted: ref__delete ok" {
		t.Fatalf("second turn: %+v", done)
	}
	if calls := cb.received(); len(calls) != 1 || !strings.Contains(calls[0].Body, `"q3.docx"`) || calls[0].Authorization != callbackAuth {
		t.Fatalf("callback calls %+v, want exactly one", calls)
	}
	var responses []runnel.InteractionAnswer
	for _, e := range rec2.events {
		if e.Type == runnel.EventInteractionResponse {
			responses = append(responses, *e.Answer)
		}
	}
	if len(responses) != 1 || !responses[0].Approved || responses[0].ID != it.ID || responses[0].ToolCallID != "toolu_A" {
		t.Errorf("interaction_response events %+v, want the one approval, for the interaction the person saw", responses)
	}
	prompts := bed.prompts(t)
	if len(prompts) != 2 || !strings.Contains(prompts[1], "Conversation so far:") ||
		!strings.Contains(prompts[1], "[user APPROVED delete_file; the call has NOT run yet.") {
		t.Errorf("prompts %q", prompts)
	}

	// What the recipe gave the agent: its mode, its key, a HOME of its
	// own (gone now), nothing of runnel's environment.
	envs := bed.notes(t, "env")
	if len(envs) != 2 {
		t.Fatalf("%d env notes", len(envs))
	}
	for _, env := range envs {
		if env["ANTHROPIC_API_KEY"] != anthropicKey || env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:9" || env["ANTHROPIC_MODEL"] != "claude-test" {
			t.Errorf("agent env %v", env)
		}
		for k := range env {
			if strings.HasPrefix(k, "RUNNEL_TEST") || k == "GOPATH" || k == "GOFLAGS" {
				t.Errorf("the agent got runnel's variable %s", k)
			}
		}
		// The agent's spans join the run's: its parent is the run's
		// span, in the caller's trace.
		if tp, _ := env["TRACEPARENT"].(string); !strings.HasPrefix(tp, "00-"+callerTrace+"-") || strings.Contains(tp, "b7ad6b7169203331") {
			t.Errorf("the agent got TRACEPARENT %q, want the run span's in trace %s", tp, callerTrace)
		}
		home, _ := env["HOME"].(string)
		if !strings.HasPrefix(home, bed.homes) {
			t.Errorf("HOME %q is not under the homes root", home)
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("the agent's HOME %s outlived its run (%v)", home, err)
		}
	}
	// No agent process outlived its run.
	for _, p := range bed.notes(t, "process") {
		if pid, ok := p["pid"].(float64); ok {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", int(pid))); err == nil {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", int(pid))); !strings.Contains(string(b), ") Z") {
					t.Errorf("agent process %d outlived its run", int(pid))
				}
			}
		}
	}
}

// A denial: the next turn tells the agent the person declined, and if it
// made the call anyway the gate would refuse it; nothing runs.
func TestACPDenial(t *testing.T) {
	cb := newPlatform(t, nil)
	bed := newACPTestbed(t, deleteScenario)
	r := bed.manager(t)
	req := claudeRequest(cb, "please delete q3.docx")
	paused, err := r.Run(t.Context(), req, &recorder{})
	if err != nil || paused.Status != runnel.StatusPaused {
		t.Fatalf("first turn: %+v, %v", paused, err)
	}
	it := paused.Interactions[0]
	next := resumeRequest(t, req, paused, approval(it.ToolCallID, it.ToolName, `{"approved":false,"reason":"keep it"}`))
	done, err := r.Run(t.Context(), next, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != runnel.StatusCompleted || done.Output != "Understood, I will not delete it." || len(cb.received()) != 0 {
		t.Fatalf("after a denial: %+v, %d callback calls", done, len(cb.received()))
	}
}

// A client tool: the agent's call reaches runnel's server, which gives it
// no response and pauses for the browser; the browser's output, replayed,
// answers the call the agent makes again.
func TestACPClientTool(t *testing.T) {
	scenario := `{"turns":[
	 {"whenPromptContains":"pick_date returned","steps":[{"text":"You picked the date."}]},
	 {"whenPromptContains":"date","whenMode":"default","steps":[
	  {"permission":{"toolCall":{"toolCallId":"toolu_D","name":"mcp__runnel__pick_date","title":"mcp__runnel__pick_date","rawInput":{"label":"Start"}},
	   "onAllow":[{"mcpCall":{"server":"runnel","tool":"pick_date","arguments":{"label":"Start"},"ignoreCancel":true,"timeout":"20s"}},
	              {"text":"got {{last_tool_result}}"}]}}]}]}`
	bed := newACPTestbed(t, scenario)
	r := bed.manager(t)
	cb := newPlatform(t, nil)
	req := claudeRequest(cb, "choose a start date")
	req.CustomTools = []runnel.ToolSpec{{Name: "pick_date", Kind: runnel.ToolKindClient, Render: json.RawMessage(`{"kind":"date"}`),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"}}}`)}}
	req.ToolCallback = nil
	paused, err := r.Run(t.Context(), req, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 || paused.Interactions[0].Kind != runnel.InteractionClientTool ||
		paused.Interactions[0].ToolCallID != "toolu_D" {
		t.Fatalf("first turn: %+v", paused)
	}
	closed := false
	for _, n := range bed.notes(t, "mcp tools/call result") {
		closed = closed || n["closed"] == true
	}
	if !closed {
		t.Errorf("the agent's tools/call got an answer; it must get none: %v", bed.notes(t, "mcp tools/call result"))
	}
	it := paused.Interactions[0]
	next := resumeRequest(t, req, paused, clientOutput(it.ToolCallID, it.ToolName, `"2026-12-01"`))
	done, err := r.Run(t.Context(), next, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != runnel.StatusCompleted || done.Output != "You picked the date." {
		t.Fatalf("second turn: %+v", done)
	}
	if p := bed.prompts(t); len(p) != 2 || !strings.Contains(p[1], `[pick_date returned: 2026-12-01]`) {
		t.Errorf("prompts %q", p)
	}
}

// A harness that is known but not installed is refused inside the
// stream, naming the command that installs it.
func TestACPNotInstalled(t *testing.T) {
	reg := agents.NewRegistry(agents.Options{Dir: t.TempDir(), HomeRoot: t.TempDir()})
	r := overHTTP(t, NewManager(&Options{Agents: reg}))
	cb := newPlatform(t, nil)
	_, err := r.Run(context.Background(), claudeRequest(cb, "hi"), &recorder{})
	if runnel.ErrorCodeOf(err) != runnel.CodeInvalidRequest || !strings.Contains(err.Error(), "run `runnel agents install claude`") {
		t.Fatalf("err %v, want the refusal naming the install command", err)
	}
}
