package agenttest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// agentCase is an agent and how a request reaches the scripted model
// through it: the API it speaks decides the base URL.
type agentCase struct {
	harness string
	request func(llm *llmtest.Server, prompt string) map[string]any
}

// agentCases are the agents the tests run: claude, codex and pi, or the
// comma-separated list in RUNNEL_TEST_AGENTS (scripts/acp-matrix.sh adds
// gemini and opencode).
func agentCases() []agentCase {
	want := map[string]bool{"claude": true, "codex": true, "pi": true}
	if list := os.Getenv("RUNNEL_TEST_AGENTS"); list != "" {
		want = map[string]bool{}
		for _, n := range strings.Split(list, ",") {
			want[strings.TrimSpace(n)] = true
		}
	}
	var out []agentCase
	for _, c := range allAgentCases() {
		if want[c.harness] {
			out = append(out, c)
		}
	}
	return out
}

func allAgentCases() []agentCase {
	anthropic := func(harness string) func(*llmtest.Server, string) map[string]any {
		return func(llm *llmtest.Server, prompt string) map[string]any {
			return map[string]any{"harness": harness, "model": "anthropic/claude-test",
				"endpoint": map[string]any{"baseUrl": llm.URL}, "secrets": map[string]any{"ANTHROPIC_API_KEY": modelKey},
				"messages": []runnel.Message{runnel.UserText(prompt)}, "sessionId": "sess-agenttest"}
		}
	}
	return []agentCase{
		{"claude", anthropic("claude")},
		{"codex", func(llm *llmtest.Server, prompt string) map[string]any {
			// A model Codex does not know: runnel gives it a catalog entry,
			// and Codex offers MCP tools to it directly.
			return map[string]any{"harness": "codex", "model": "openai/mock-model",
				"endpoint": map[string]any{"baseUrl": llm.URL + "/v1"}, "secrets": map[string]any{"OPENAI_API_KEY": modelKey},
				"messages": []runnel.Message{runnel.UserText(prompt)}, "sessionId": "sess-agenttest"}
		}},
		{"pi", anthropic("pi")},
		{"gemini", func(llm *llmtest.Server, prompt string) map[string]any {
			return map[string]any{"harness": "gemini", "model": "gemini/gemini-2.5-pro",
				"endpoint": map[string]any{"baseUrl": llm.URL}, "secrets": map[string]any{"GEMINI_API_KEY": modelKey},
				"messages": []runnel.Message{runnel.UserText(prompt)}, "sessionId": "sess-agenttest"}
		}},
		{"opencode", anthropic("opencode")},
	}
}

// weatherRequest is a run of ac asking for the weather, with get_weather
// as a callback tool on a platform of its own (read-only: allowed without
// asking; otherwise the default plan asks).
func weatherRequest(t *testing.T, ac agentCase, llm *llmtest.Server, readOnly bool) (map[string]any, *platform) {
	t.Helper()
	cb := newPlatform(t)
	req := ac.request(llm, "What is the weather in Paris?")
	req["customTools"] = []any{weatherTool(readOnly)}
	req["toolCallback"] = map[string]any{"endpoint": cb.srv.URL, "authorization": "Bearer cb"}
	return req, cb
}

func weatherTool(readOnly bool) map[string]any {
	t := map[string]any{"name": "get_weather", "description": "Look up the current weather for a city", "callRef": "weather",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
	if readOnly {
		t["readOnly"] = true
	}
	return t
}

// Every agent, through runnel: a plain turn; a callback tool through
// runnel's MCP server; an approval across two runnel processes (pause,
// approve, the agent makes the call again, it runs once); a denial; a
// client tool. After each, no agent process, HOME, workspace or port of
// the run is left.
func TestAgents(t *testing.T) {
	for _, ac := range agentCases() {
		t.Run(ac.harness, func(t *testing.T) {
			dir := agentsDir(t, ac.harness)
			llm := llmtest.NewServer(script())
			defer llm.Close()
			first, second := serve(t, dir), serve(t, dir)
			defer first.checkClean(t, dir)
			defer second.checkClean(t, dir)

			t.Run("plain turn", func(t *testing.T) {
				res, events := first.run(t, ac.request(llm, "Say hello."))
				if res.Status != runnel.StatusCompleted || res.Output != "Hello from the scripted model." {
					t.Fatalf("result %+v", res)
				}
				if last := events[len(events)-1]; last.Type != runnel.EventDone || last.StopReason != runnel.StopEndTurn {
					t.Errorf("last event %+v", last)
				}
			})

			t.Run("callback tool", func(t *testing.T) {
				req, cb := weatherRequest(t, ac, llm, true)
				res, events := first.run(t, req)
				if res.Status != runnel.StatusCompleted || !strings.Contains(res.Output, "18°C and sunny in Paris") {
					t.Fatalf("result %+v", res)
				}
				if n := len(cb.received()); n != 1 {
					t.Errorf("%d callback calls, want 1", n)
				}
				checkToolEvents(t, events, "get_weather", `{"city":"Paris"}`)
			})

			t.Run("approval across two processes", func(t *testing.T) {
				req, cb := weatherRequest(t, ac, llm, false)
				it, events := approveOnAnother(t, first, second, req, cb)
				answered := false
				for _, e := range events {
					answered = answered || e.Type == runnel.EventInteractionResponse && e.Answer.ID == it.ID && e.Answer.Approved
				}
				if !answered {
					t.Errorf("no interaction_response for %s in %+v", it.ID, events)
				}
			})

			t.Run("denial", func(t *testing.T) {
				req, cb := weatherRequest(t, ac, llm, false)
				paused, _ := first.run(t, req)
				if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 {
					t.Fatalf("first turn %+v", paused)
				}
				it := paused.Interactions[0]
				req["messages"] = resume(req, paused, runnel.Block{Type: runnel.BlockToolResult, ToolCallID: it.ToolCallID,
					ToolName: it.ToolName, Kind: runnel.ResultKindApproval, Output: json.RawMessage(`{"approved":false,"reason":"not now"}`)})
				done, _ := second.run(t, req)
				if done.Status != runnel.StatusCompleted || done.Output != "Understood, I will not do it." || len(cb.received()) != 0 {
					t.Fatalf("after a denial: %+v, %d callback calls", done, len(cb.received()))
				}
			})

			t.Run("client tool", func(t *testing.T) {
				req := ac.request(llm, "Ask me for a start date.")
				req["customTools"] = []any{map[string]any{"name": "pick_date", "kind": "client", "description": "Ask the user for a date",
					"render": map[string]any{"kind": "date"}, "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"label": map[string]any{"type": "string"}}}}}
				paused, _ := first.run(t, req)
				if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 || paused.Interactions[0].Kind != runnel.InteractionClientTool {
					t.Fatalf("first turn %+v", paused)
				}
				it := paused.Interactions[0]
				req["messages"] = resume(req, paused, runnel.Block{Type: runnel.BlockToolResult, ToolCallID: it.ToolCallID,
					ToolName: it.ToolName, Kind: runnel.ResultKindClientOutput, Output: json.RawMessage(`"2026-12-01"`)})
				done, _ := second.run(t, req)
				if done.Status != runnel.StatusCompleted || done.Output != "You picked a date." {
					t.Fatalf("after the browser answered: %+v", done)
				}
			})
		})
	}
}

// approveOnAnother runs req, whose get_weather call on cb's platform
// asks, on first; approves the call; resumes on second; and checks that
// the call ran once, after the approval. It returns the interaction and
// the resumed turn's events.
func approveOnAnother(t *testing.T, first, second *runnelProc, req map[string]any, cb *platform) (runnel.Interaction, []runnel.Event) {
	t.Helper()
	paused, _ := first.run(t, req)
	if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 {
		t.Fatalf("first turn %+v", paused)
	}
	it := paused.Interactions[0]
	if it.ToolName != "get_weather" || string(it.Input) != `{"city":"Paris"}` || it.Signature == "" {
		t.Fatalf("interaction %+v", it)
	}
	if n := len(cb.received()); n != 0 {
		t.Fatalf("the tool ran %d times before anyone approved", n)
	}
	answer, _ := json.Marshal(map[string]any{"approved": true, "interactionId": it.ID, "signature": it.Signature})
	req["messages"] = resume(req, paused, runnel.Block{Type: runnel.BlockToolResult, ToolCallID: it.ToolCallID,
		ToolName: it.ToolName, Kind: runnel.ResultKindApproval, Output: answer})
	done, events := second.run(t, req)
	if done.Status != runnel.StatusCompleted || !strings.Contains(done.Output, "18°C and sunny in Paris") {
		t.Fatalf("resumed turn %+v", done)
	}
	if n := len(cb.received()); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
	return it, events
}

// resume is the history a platform sends back: what it sent, what the
// paused turn added, and the answer.
func resume(req map[string]any, paused *runnel.Result, answer runnel.Block) []runnel.Message {
	msgs := append([]runnel.Message(nil), req["messages"].([]runnel.Message)...)
	msgs = append(msgs, paused.Messages...)
	return append(msgs, runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{answer}})
}

// checkToolEvents checks that the turn reported the call once, under one
// id, with runnel's name and the arguments, and its result.
func checkToolEvents(t *testing.T, events []runnel.Event, name, input string) {
	t.Helper()
	var calls, results []runnel.Event
	for _, e := range events {
		switch e.Type {
		case runnel.EventToolCall:
			calls = append(calls, e)
		case runnel.EventToolResult:
			results = append(results, e)
		}
	}
	if len(calls) != 1 || calls[0].Name != name || string(calls[0].Input) != input {
		t.Fatalf("tool_call events %+v, want one %s %s", calls, name, input)
	}
	if len(results) != 1 || results[0].ID != calls[0].ID || results[0].IsError {
		t.Errorf("tool_result events %+v, want one for %s", results, calls[0].ID)
	}
}
