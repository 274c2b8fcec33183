package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExamples drives the scenarios under testdata (the ones the package
// documentation points to) the way runnel would.
func TestExamples(t *testing.T) {
	bin := buildAgent(t)
	start := func(t *testing.T, name string) *fake {
		t.Helper()
		path, err := filepath.Abs(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return startFake(t, bin, "", "FAKE_ACP_SCENARIO="+path)
	}

	t.Run("text", func(t *testing.T) {
		t.Parallel()
		f := start(t, "text.json")
		sid := f.handshake()
		resp, before := f.call("session/prompt", promptParams(sid, "hello there"))
		if stopReason(t, resp) != "end_turn" || !slices.Equal(texts(before), []string{"Hello! You said: hello there"}) {
			t.Errorf("turn: %q then %s", texts(before), resp.raw)
		}
	})

	t.Run("claude asks only in mode default", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, false)
		f := start(t, "claude-mcp-permission.json")
		sid := f.handshake(ts.entry("runnel", "tok"))
		_, before := f.call("session/prompt", promptParams(sid, "weather in Paris?"))
		if !slices.Equal(texts(before), []string{"Auto mode denied the tool."}) {
			t.Errorf("in mode auto: %q", texts(before))
		}

		if resp, _ := f.call("session/set_mode", msg{"sessionId": sid, "modeId": "default"}); resp.Error != nil {
			t.Fatalf("set_mode: %s", resp.raw)
		}
		id := f.request("session/prompt", promptParams(sid, "weather in Paris?"))
		got := f.until(func(l line) bool { return l.Method == "session/request_permission" })
		perm := got[len(got)-1]
		if call := permissionToolCall(t, perm); call["name"] != "mcp__runnel__get_weather" {
			t.Errorf("permission toolCall = %v", call)
		}
		f.respond(perm.ID, msg{"outcome": msg{"outcome": "selected", "optionId": optionOfKind(t, perm, "allow_once")}})
		rest := f.until(isResponse(id))
		if stopReason(t, rest[len(rest)-1]) != "end_turn" || !slices.Equal(texts(rest), []string{"The weather: Sunny in Paris"}) {
			t.Errorf("after allow: %q", texts(rest))
		}
		if !slices.ContainsFunc(rest, func(l line) bool {
			u := l.update()
			return u["status"] == "completed" && cmp.Equal(u["content"], []any{map[string]any{
				"type": "content", "content": map[string]any{"type": "text", "text": "Sunny in Paris"}}})
		}) {
			t.Errorf("no completed update carrying the result in %v", rest)
		}
	})

	t.Run("gemini asks before any tool_call", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, false)
		f := start(t, "gemini-permission.json")
		sid := f.handshake(ts.entry("runnel", "tok"))
		id := f.request("session/prompt", promptParams(sid, "weather in Paris?"))
		perm := f.next()
		if perm.Method != "session/request_permission" {
			t.Fatalf("want the permission request first, got %s", perm.raw)
		}
		if call := permissionToolCall(t, perm); call["rawInput"] != nil || call["content"] == nil {
			t.Errorf("permission toolCall = %v, want arguments only as content", call)
		}
		f.respond(perm.ID, msg{"outcome": msg{"outcome": "selected", "optionId": optionOfKind(t, perm, "allow_once")}})
		rest := f.until(isResponse(id))
		if !slices.Equal(texts(rest), []string{"Sunny in Paris"}) {
			t.Errorf("after allow: %q", texts(rest))
		}
	})

	t.Run("approval pause", func(t *testing.T) {
		t.Parallel()
		ts := startToolServer(t, false)
		f := start(t, "approval-pause.json")
		sid := f.handshake(ts.entry("runnel", "tok"))
		id := f.request("session/prompt", promptParams(sid, "delete q3.docx"))
		got := f.until(func(l line) bool { return l.Method == "session/request_permission" })
		// runnel's pause: cancel the session, then answer the gate "cancelled".
		f.notify("session/cancel", msg{"sessionId": sid})
		f.respond(got[len(got)-1].ID, msg{"outcome": msg{"outcome": "cancelled"}})
		rest := f.until(isResponse(id))
		if got := stopReason(t, rest[len(rest)-1]); got != "cancelled" {
			t.Errorf("stopReason = %q", got)
		}
		var lines []string
		for _, l := range rest[:len(rest)-1] {
			lines = append(lines, l.raw)
		}
		want := []string{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"tool_call_update","status":"failed","toolCallId":"toolu_02"}}}`}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("after the pause (-want +got):\n%s", diff)
		}
		if slices.Contains(ts.seen(), "tools/call") {
			t.Errorf("a paused call reached the server: %q", ts.seen())
		}
	})
}

func permissionToolCall(t *testing.T, perm line) map[string]any {
	t.Helper()
	var p struct {
		ToolCall map[string]any `json:"toolCall"`
	}
	if err := json.Unmarshal(perm.Params, &p); err != nil {
		t.Fatal(err)
	}
	return p.ToolCall
}

// optionOfKind chooses an option by kind, never by id, as runnel does.
func optionOfKind(t *testing.T, perm line, kind string) string {
	t.Helper()
	var p struct {
		Options []option `json:"options"`
	}
	if err := json.Unmarshal(perm.Params, &p); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Options {
		if o.Kind == kind {
			return o.OptionID
		}
	}
	t.Fatalf("no %s option in %s", kind, perm.Params)
	return ""
}
