package acp

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/harness"
	"github.com/runnel/runnel/internal/sandbox"
)

func readScenario(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("fakeagent/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A text turn: thought and message parts, the output, the messages, the
// agent's name, and the stop reason the agent gave.
func TestTurnText(t *testing.T) {
	r := runFake(t, readScenario(t, "text.json"), turnOpts{prompt: "hello there"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.out.StopReason != runnel.StopEndTurn || r.out.Output != "Hello! You said: hello there" {
		t.Errorf("outcome %+v", r.out)
	}
	if got := r.events.text(); got != "Hello! You said: hello there" {
		t.Errorf("message deltas %q", got)
	}
	if n := len(r.events.ofType(runnel.EventThoughtDelta)); n != 1 {
		t.Errorf("%d thought deltas, want 1", n)
	}
	want := []runnel.Message{{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: "Hello! You said: hello there"}}}}
	if toJSON(r.out.Messages) != toJSON(want) {
		t.Errorf("messages %s", toJSON(r.out.Messages))
	}
	// No tools: runnel's server is not offered.
	news := r.received(t, "session/new")
	if len(news) != 1 || toJSON(news[0]["params"].(map[string]any)["mcpServers"]) != "[]" {
		t.Errorf("session/new %v", news)
	}
}

// Claude's way: the mode that asks is set, the permission request comes
// with the tool's programmatic name, the gate looks, the agent calls
// runnel's server, the gate decides and runs the call — one call, under
// the agent's id, with the arguments runnel's server read.
func TestTurnClaudeLikeToolCall(t *testing.T) {
	r := runFake(t, readScenario(t, "claude-mcp-permission.json"), turnOpts{tools: []Tool{weatherTool}, mode: "default"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if modes := r.received(t, "session/set_mode"); len(modes) != 1 || toJSON(modes[0]["params"].(map[string]any)["modeId"]) != `"default"` {
		t.Fatalf("set_mode %v, want one to \"default\"", modes)
	}
	if got := r.events.text(); got != `The weather: ran get_weather {"city":"Paris"}` {
		t.Errorf("text %q", got)
	}
	calls := r.events.ofType(runnel.EventToolCall)
	results := r.events.ofType(runnel.EventToolResult)
	if len(calls) != 1 || calls[0].ID != "toolu_01" || calls[0].Name != "get_weather" || string(calls[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("tool_call events %+v", calls)
	}
	if len(results) != 1 || results[0].ID != "toolu_01" || results[0].IsError || string(results[0].Output) != `"ran get_weather {\"city\":\"Paris\"}"` {
		t.Fatalf("tool_result events %+v", results)
	}
	if len(r.gate.permit) != 1 || r.gate.permit[0].Owner != harness.OwnerRunnel || r.gate.permit[0].Name != "get_weather" {
		t.Errorf("Permit calls %+v", r.gate.permit)
	}
	if len(r.gate.calls) != 1 || r.gate.calls[0].ID != "toolu_01" || !r.gate.calls[0].Reissued {
		t.Errorf("Dispatch calls %+v", r.gate.calls)
	}
	if outcome := r.notes(t, "permission outcome"); len(outcome) != 1 || !strings.Contains(toJSON(outcome[0]), `"allow-once"`) {
		t.Errorf("permission outcome %v, want allow-once (by kind)", outcome)
	}
	// The server's entry carries the turn's bearer token.
	news := r.received(t, "session/new")
	servers := toJSON(news[0]["params"].(map[string]any)["mcpServers"])
	if !strings.Contains(servers, `"name":"runnel"`) || !strings.Contains(servers, `"Bearer `) {
		t.Errorf("mcpServers %s", servers)
	}
	want := `[{"role":"assistant","content":[{"type":"tool_call","toolCallId":"toolu_01","toolName":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"tool","content":[{"type":"tool_result","toolCallId":"toolu_01","toolName":"get_weather","output":"ran get_weather {\"city\":\"Paris\"}"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"The weather: ran get_weather {\"city\":\"Paris\"}"}]}]`
	if got := toJSON(r.out.Messages); got != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

// An approval pauses without answering the gate: runnel cancels the
// session, answers the request "cancelled", and the turn ends paused on
// the call, which has no result; the agent's later text is not the turn's.
func TestTurnApprovalPause(t *testing.T) {
	r := runFake(t, readScenario(t, "approval-pause.json"), turnOpts{
		tools:  []Tool{{Name: "delete_file", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}},
		policy: map[string]string{"delete_file": "pause"}, prompt: "delete q3.docx",
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.out.StopReason != runnel.StopPaused || len(r.out.Interactions) != 1 || r.out.Interactions[0].ToolCallID != "toolu_02" {
		t.Fatalf("outcome %+v", r.out)
	}
	if got := r.notes(t, "permission outcome"); len(got) != 1 || !strings.Contains(toJSON(got[0]), "cancelled") {
		t.Errorf("permission outcome %v, want cancelled", got)
	}
	if n := len(r.received(t, "session/cancel")); n != 1 {
		t.Errorf("%d session/cancel, want 1", n)
	}
	// The cancel must reach the agent before the answer: an agent that
	// reads "cancelled" first takes it for a refused call and goes on with
	// its turn, calling the model again after runnel paused it.
	if got := r.order(t); !slices.Equal(got, []string{"session/cancel", "permission answer"}) {
		t.Errorf("the agent read %v, want session/cancel before the permission answer", got)
	}
	if reqs := r.events.ofType(runnel.EventInteractionRequest); len(reqs) != 1 {
		t.Errorf("interaction requests %+v", reqs)
	}
	if res := r.events.ofType(runnel.EventToolResult); len(res) != 0 {
		t.Errorf("the parked call got results %+v", res)
	}
	if strings.Contains(r.events.text(), "never sent") || len(r.gate.calls) != 0 {
		t.Errorf("text %q, dispatches %v: nothing may run after the pause", r.events.text(), r.gate.calls)
	}
	if got := toJSON(r.out.Messages); got != `[{"role":"assistant","content":[{"type":"tool_call","toolCallId":"toolu_02","toolName":"delete_file","input":{"path":"q3.docx"}}]}]` {
		t.Errorf("messages %s", got)
	}
}

// An agent that calls runnel's server without asking first (Codex in a
// mode that does not ask for MCP tools) is paused there: the tools/call
// gets no response at all, so the agent records no result for it.
func TestTurnPauseAtToolsCall(t *testing.T) {
	scenario := `{"turns":[{"steps":[
		{"toolCall":{"toolCallId":"call_9","title":"get_weather","kind":"other","status":"in_progress","rawInput":{"city":"Paris"}}},
		{"mcpCall":{"server":"runnel","tool":"get_weather","arguments":{"city":"Paris"},"timeout":"20s","ignoreCancel":true}},
		{"text":"after: {{last_tool_result}}"}]}],"leaveInProgressOnCancel":true}`
	r := runFake(t, scenario, turnOpts{tools: []Tool{weatherTool}, policy: map[string]string{"dispatch:get_weather": "pause"}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.out.StopReason != runnel.StopPaused || len(r.out.Interactions) != 1 || r.out.Interactions[0].ToolCallID != "call_9" {
		t.Fatalf("outcome %+v", r.out)
	}
	res := r.notes(t, "mcp tools/call result")
	if len(res) != 1 || !strings.Contains(toJSON(res[0]), `"closed":true`) {
		t.Errorf("the agent's tools/call ended %v, want a connection closed with no response", res)
	}
	if strings.Contains(r.events.text(), "after") {
		t.Errorf("text after the pause reached the turn: %q", r.events.text())
	}
}

// A denial is the agent's reject-once option, chosen by kind, and the
// call's result says it was declined.
func TestTurnDenied(t *testing.T) {
	r := runFake(t, readScenario(t, "claude-mcp-permission.json"), turnOpts{
		tools: []Tool{weatherTool}, mode: "default", policy: map[string]string{"get_weather": "deny"},
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.notes(t, "permission outcome"); len(got) != 1 || !strings.Contains(toJSON(got[0]), `"reject"`) {
		t.Errorf("permission outcome %v, want the reject option", got)
	}
	res := r.events.ofType(runnel.EventToolResult)
	if len(res) != 1 || !res[0].Denied || !res[0].IsError || res[0].ID != "toolu_01" {
		t.Errorf("tool results %+v, want one denial", res)
	}
	if len(r.gate.calls) != 0 || r.events.text() != "I was not allowed to check the weather." {
		t.Errorf("dispatches %v, text %q", r.gate.calls, r.events.text())
	}
}

// Gemini asks before any tool_call, names the tool only in a human title
// and sends the arguments as text; it offers no option named like
// Claude's. The call is still runnel's get_weather, allowed once.
func TestTurnGeminiLike(t *testing.T) {
	r := runFake(t, readScenario(t, "gemini-permission.json"), turnOpts{tools: []Tool{weatherTool}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.gate.permit) != 1 || r.gate.permit[0].Owner != harness.OwnerRunnel || r.gate.permit[0].Name != "get_weather" {
		t.Fatalf("Permit calls %+v", r.gate.permit)
	}
	if got := r.notes(t, "permission outcome"); len(got) != 1 || !strings.Contains(toJSON(got[0]), `"proceed_once"`) {
		t.Errorf("permission outcome %v, want proceed_once", got)
	}
	calls := r.events.ofType(runnel.EventToolCall)
	if len(calls) != 1 || calls[0].ID != "mcp_runnel_get_weather-1764000000000" {
		t.Errorf("tool calls %+v, want the permission's call, once", calls)
	}
	if len(r.gate.calls) != 1 || r.gate.calls[0].ID != "mcp_runnel_get_weather-1764000000000" {
		t.Errorf("Dispatch %+v: the server's call must be tied to the permission's", r.gate.calls)
	}
}

// What real agents send and runnel must take in its stride: string ids,
// a tool_call sent twice, a status going backwards, rawInput late, an
// update for an id never announced, unknown notifications and kinds (a
// made-up "…_chunk" with content is not text of the turn), a line that is
// not JSON, and an agent's own tool that runs and completes.
func TestTurnQuirks(t *testing.T) {
	scenario := `{"idStyle":"string","turns":[{"steps":[
		{"toolCall":{"toolCallId":"b1","title":"Bash","name":"Bash","kind":"execute","status":"pending","rawInput":{}}},
		{"toolCall":{"toolCallId":"b1","title":"Bash","name":"Bash","kind":"execute","status":"pending","rawInput":{}}},
		{"permission":{"toolCall":{"toolCallId":"b1","name":"Bash","title":"Bash","rawInput":{"command":"ls -la"}},"onAllow":[
			{"toolCallUpdate":{"toolCallId":"b1","status":"in_progress"}},
			{"toolCallUpdate":{"toolCallId":"b1","status":"pending"}},
			{"toolCallUpdate":{"toolCallId":"b1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a b c"}}]}}]}},
		{"toolCallUpdate":{"toolCallId":"ghost","status":"completed"}},
		{"notify":{"update":{"sessionUpdate":"usage_update","used":10,"size":100}}},
		{"notify":{"update":{"sessionUpdate":"mystery_chunk","content":{"type":"text","text":"NOT TEXT"}}}},
		{"notify":{"method":"_auth/status_update","params":{"x":1}}},
		{"notify":{"method":"something/else","params":{}}},
		{"raw":"{this is not json"},
		{"text":"done"}]}]}`
	r := runFake(t, scenario, turnOpts{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.events.text() != "done" {
		t.Errorf("text %q", r.events.text())
	}
	calls := r.events.ofType(runnel.EventToolCall)
	results := r.events.ofType(runnel.EventToolResult)
	if len(calls) < 1 || calls[0].ID != "b1" || calls[0].Name != "Bash" || string(calls[0].Input) != `{"command":"ls -la"}` {
		t.Fatalf("tool calls %+v", calls)
	}
	var b1 []runnel.Event
	for _, e := range results {
		if e.ID == "b1" {
			b1 = append(b1, e)
		}
	}
	if len(b1) != 1 || string(b1[0].Output) != `"a b c"` {
		t.Errorf("results of b1 %+v, want one with its output", b1)
	}
	if len(r.gate.permit) != 1 || r.gate.permit[0].Owner != harness.OwnerAgent || string(r.gate.permit[0].Input) != `{"command":"ls -la"}` {
		t.Errorf("Permit %+v", r.gate.permit)
	}
	if got := r.notes(t, "permission outcome"); len(got) != 1 || !strings.Contains(toJSON(got[0]), "allow-once") {
		t.Errorf("permission outcome %v (string request id)", got)
	}
}

// An agent that never answers initialize fails the turn within the
// timeout, and is killed.
func TestTurnAgentNeverInitializes(t *testing.T) {
	start := time.Now()
	r := runFake(t, `{"initialize":{"hang":true}}`, turnOpts{timeouts: Timeouts{Initialize: 300 * time.Millisecond}})
	if runnel.ErrorCodeOf(r.err) != runnel.CodeAgentError || !strings.Contains(r.err.Error(), "did not answer initialize within 300ms") {
		t.Fatalf("err %v", r.err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %s", d)
	}
	if len(r.pids(t)) == 0 {
		t.Error("no process note: the leak check checked nothing")
	}
}

// An agent that crashes mid-turn fails it with what it last printed, and
// the processes it started are gone with it, even one in a session of
// its own (with the host's containment).
func TestTurnAgentCrashes(t *testing.T) {
	c, err := sandbox.ProbeContainment(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Mechanism() == sandbox.MechanismProcessGroup {
		t.Skip("this host contains processes by process group only")
	}
	ws, err := sandbox.NewWorkspace(t.TempDir(), &sandbox.WorkspaceOptions{Containment: c})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	scenario := `{"turns":[{"steps":[{"text":"working"},{"spawn":{"setsid":true}},{"spawn":{}},{"crash":{"code":3}}]}]}`
	r := runFake(t, scenario, turnOpts{ws: ws})
	if runnel.ErrorCodeOf(r.err) != runnel.CodeAgentError || !strings.Contains(r.err.Error(), "exited (status 3)") {
		t.Fatalf("err %v", r.err)
	}
	if n := len(r.pids(t)); n != 3 {
		t.Errorf("%d pids noted, want the agent and two children", n)
	}
}

// An agent that floods its output fails the turn at the cap, with a
// sentence, instead of growing runnel's memory.
func TestTurnAgentFloods(t *testing.T) {
	r := runFake(t, `{"turns":[{"steps":[{"flood":{"bytes":4194304,"chunk":8192}},{"text":"end"}]}]}`, turnOpts{maxOut: 1 << 20})
	if runnel.ErrorCodeOf(r.err) != runnel.CodeAgentError || !strings.Contains(r.err.Error(), "streamed more than 1 MiB") {
		t.Fatalf("err %v", r.err)
	}
}

// A harness that cannot take MCP tools over HTTP is refused, naming the
// capability and how many tools would be lost, before any event.
func TestTurnRefusedWithoutMCP(t *testing.T) {
	r := runFake(t, `{"initialize":{"agentCapabilities":{"mcpCapabilities":{"http":false}}}}`, turnOpts{tools: []Tool{weatherTool, {Name: "x", Schema: json.RawMessage(`{"type":"object"}`)}}})
	if runnel.ErrorCodeOf(r.err) != runnel.CodeRefused || !strings.Contains(r.err.Error(), "mcpCapabilities.http, so 2 tool(s) would be lost") {
		t.Fatalf("err %v", r.err)
	}
	if r.out.Emitted != 0 || len(r.events.all) != 0 {
		t.Errorf("a refusal emitted %d events", len(r.events.all))
	}
	// An agent that takes its tools through its config (Pi) is not refused.
	r = runFake(t, `{"initialize":{"agentCapabilities":{"mcpCapabilities":{"http":false}}},"turns":[{"steps":[{"text":"ok"}]}]}`,
		turnOpts{tools: []Tool{weatherTool}, inConfig: true})
	if r.err != nil || r.events.text() != "ok" {
		t.Errorf("with tools in its config: %v, %q", r.err, r.events.text())
	}
}

// runnel never runs an agent in a mode that skips its gate: a mode the
// agent does not offer is a failure that says which modes it offers.
func TestTurnModeNotOffered(t *testing.T) {
	r := runFake(t, `{"newSession":{"modes":{"currentModeId":"auto","availableModes":[{"id":"auto","name":"Auto"}]}}}`, turnOpts{mode: "default"})
	if runnel.ErrorCodeOf(r.err) != runnel.CodeAgentError || !strings.Contains(r.err.Error(), `session mode "default"`) || !strings.Contains(r.err.Error(), `"auto"`) {
		t.Fatalf("err %v", r.err)
	}
}

// Codex 2.6 leaves a call in progress after a cancel: the paused turn
// settles it with DEFERRED_NOT_EXECUTED, so the next turn never sees an
// unanswered call.
func TestTurnPauseSettlesOpenCalls(t *testing.T) {
	scenario := `{"leaveInProgressOnCancel":true,"turns":[{"steps":[
		{"toolCall":{"toolCallId":"x1","title":"Bash","name":"Bash","kind":"execute","status":"in_progress","rawInput":{"command":"make"}}},
		{"permission":{"toolCall":{"toolCallId":"x2","name":"Write","title":"Write","kind":"edit","rawInput":{"path":"a.txt","content":"x"}}}}]}]}`
	r := runFake(t, scenario, turnOpts{policy: map[string]string{"Write": "pause"}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.out.StopReason != runnel.StopPaused {
		t.Fatalf("outcome %+v", r.out)
	}
	res := r.events.ofType(runnel.EventToolResult)
	if len(res) != 1 || res[0].ID != "x1" || !strings.Contains(string(res[0].Output), "DEFERRED_NOT_EXECUTED") {
		t.Errorf("results %+v, want x1 deferred", res)
	}
}

// Codex's way: the call is announced in progress with its MCP
// coordinates as input, and the permission request carries only its id
// and kind. The gate still sees runnel's get_weather with its arguments.
func TestTurnCodexLike(t *testing.T) {
	scenario := `{"turns":[{"steps":[
		{"toolCall":{"toolCallId":"call_c1","kind":"execute","title":"mcp.runnel.get_weather","status":"in_progress",
		             "rawInput":{"server":"runnel","tool":"get_weather","arguments":{"city":"Paris"}},"_meta":{"is_mcp_tool_call":true}}},
		{"permission":{"toolCall":{"toolCallId":"call_c1","kind":"execute","status":"pending"},
		 "options":[{"optionId":"allow_once","name":"Allow","kind":"allow_once"},{"optionId":"allow_session","name":"Allow for this session","kind":"allow_always"},
		            {"optionId":"allow_always","name":"Always allow","kind":"allow_always"},{"optionId":"cancel","name":"Cancel","kind":"reject_once"}],
		 "onAllow":[{"mcpCall":{"server":"runnel","tool":"get_weather","arguments":{"city":"Paris"}}},
		            {"toolCallUpdate":{"toolCallId":"call_c1","status":"completed"}},{"text":"{{last_tool_result}}"}]}}]}]}`
	r := runFake(t, scenario, turnOpts{tools: []Tool{weatherTool}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.gate.permit) != 1 || r.gate.permit[0].Owner != harness.OwnerRunnel || r.gate.permit[0].Name != "get_weather" ||
		string(r.gate.permit[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("Permit %+v", r.gate.permit)
	}
	if got := r.notes(t, "permission outcome"); len(got) != 1 || !strings.Contains(toJSON(got[0]), `"allow_once"`) {
		t.Errorf("permission outcome %v", got)
	}
	if calls := r.events.ofType(runnel.EventToolCall); len(calls) != 1 || calls[0].ID != "call_c1" || calls[0].Name != "get_weather" {
		t.Errorf("tool calls %+v", calls)
	}
}

// opencode asks with rawInput {} and sends the arguments in an update of
// its own. The gate decides on the arguments the frames gave, and a call
// of the agent's own whose arguments never come is marked unknown (the
// gate refuses to put such a call to a person) after a bounded wait.
func TestTurnArgumentsFromFrames(t *testing.T) {
	scenario := `{"turns":[
	 {"whenPromptContains":"known","steps":[
		{"toolCall":{"toolCallId":"o1","title":"bash","kind":"execute","status":"pending","rawInput":{}}},
		{"toolCallUpdate":{"toolCallId":"o1","status":"in_progress","rawInput":{"command":"npm run test"}}},
		{"permission":{"toolCall":{"toolCallId":"o1","title":"bash","kind":"execute","status":"pending","rawInput":{}}}}]},
	 {"whenPromptContains":"never","steps":[
		{"toolCall":{"toolCallId":"o2","title":"bash","kind":"execute","status":"pending","rawInput":{}}},
		{"permission":{"toolCall":{"toolCallId":"o2","title":"bash","kind":"execute","status":"pending","rawInput":{}}}}]}]}`
	r := runFake(t, scenario, turnOpts{prompt: "known"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.gate.permit) != 1 || string(r.gate.permit[0].Input) != `{"command":"npm run test"}` || r.gate.permit[0].ArgsUnknown {
		t.Fatalf("Permit %+v, want the arguments of the update", r.gate.permit)
	}
	r = runFake(t, scenario, turnOpts{prompt: "never"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.gate.permit) != 1 || !r.gate.permit[0].ArgsUnknown {
		t.Fatalf("Permit %+v, want the arguments marked unknown", r.gate.permit)
	}
}

// opencode asks leave for a runnel tool with rawInput {} before it calls
// runnel's server. The call is reported once, with the arguments the
// server read — in the events and in the messages a resume replays, which
// must agree with the interaction the pause signs.
func TestTurnRunnelToolAskedWithoutArguments(t *testing.T) {
	scenario := `{"turns":[{"steps":[
		{"toolCall":{"toolCallId":"toolu_o1","title":"runnel_get_weather","kind":"other","status":"pending","rawInput":{}}},
		{"permission":{"toolCall":{"toolCallId":"toolu_o1","title":"runnel_get_weather","kind":"other","status":"pending","rawInput":{}},
		 "onAllow":[{"toolCallUpdate":{"toolCallId":"toolu_o1","status":"in_progress","rawInput":{"city":"Paris"}}},
		            {"mcpCall":{"server":"runnel","tool":"get_weather","arguments":{"city":"Paris"},"timeout":"30s"}}]}}]}]}`
	r := runFake(t, scenario, turnOpts{tools: []Tool{weatherTool}, policy: map[string]string{"dispatch:get_weather": "pause"}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.out.Interactions) != 1 || string(r.out.Interactions[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("interactions %+v", r.out.Interactions)
	}
	if calls := r.events.ofType(runnel.EventToolCall); len(calls) != 1 || string(calls[0].Input) != `{"city":"Paris"}` {
		t.Errorf("tool_call events %+v, want one with the arguments the server read", calls)
	}
	want := []runnel.Message{{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockToolCall,
		ToolCallID: "toolu_o1", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}}}
	if toJSON(r.out.Messages) != toJSON(want) {
		t.Errorf("messages %s, want %s", toJSON(r.out.Messages), toJSON(want))
	}
}
