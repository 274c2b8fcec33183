package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAgent(t *testing.T) {
	bin := buildAgent(t)

	t.Run("text turn", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".claude/settings.json"), []byte(`{"x":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
		f := startFake(t, bin, scenarioJSON(t, `{
			"homeFiles": [".claude/settings.json", ".missing"],
			"turns": [
				{"whenPromptContains": "weather", "steps": [{"text": "no idea"}]},
				{"steps": [{"thought": "thinking"}, {"text": "you said: {{prompt}}"}], "stopReason": "max_tokens"}
			]}`), "SECRET_MARK=s3cret", "HOME="+home)
		sid := f.handshake()
		resp, before := f.call("session/prompt", promptParams(sid, "hello"))
		if got := stopReason(t, resp); got != "max_tokens" {
			t.Errorf("stopReason = %q, want max_tokens", got)
		}
		if diff := cmp.Diff([]string{"you said: hello"}, texts(before)); diff != "" {
			t.Errorf("texts (-want +got):\n%s", diff)
		}
		if len(before) != 2 || before[0].update()["sessionUpdate"] != "agent_thought_chunk" {
			t.Errorf("want a thought then the text, got %v", before)
		}
		resp, before = f.call("session/prompt", promptParams(sid, "what's the weather?"))
		if stopReason(t, resp) != "end_turn" || !slices.Equal(texts(before), []string{"no idea"}) {
			t.Errorf("second turn: %s after %v", resp.raw, texts(before))
		}

		env := notes[map[string]string](f, "env")[0]
		if env["SECRET_MARK"] != "s3cret" || env["HOME"] != home {
			t.Errorf("env note = %v", env)
		}
		if cwd := notes[string](f, "cwd")[0]; cwd != f.dir {
			t.Errorf("cwd note = %q, want %q", cwd, f.dir)
		}
		type homeFile struct {
			Path    string
			Exists  bool
			Content string
		}
		type homeNote struct {
			Home  string
			Files []homeFile
		}
		want := homeNote{home, []homeFile{{".claude/settings.json", true, `{"x":1}`}, {".missing", false, ""}}}
		if diff := cmp.Diff(want, notes[homeNote](f, "home")[0]); diff != "" {
			t.Errorf("home note (-want +got):\n%s", diff)
		}
		var methods []string
		for _, e := range f.entries() {
			if e.T == "recv" {
				methods = append(methods, e.Method)
			}
		}
		if diff := cmp.Diff([]string{"initialize", "session/new", "session/prompt", "session/prompt"}, methods); diff != "" {
			t.Errorf("received (-want +got):\n%s", diff)
		}
	})

	t.Run("protocol edges", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [{"whenPromptContains": "known", "steps": []}]}`))
		sid := f.handshake()
		// The client's own garbage gets a parse error; an unknown
		// notification nothing at all.
		f.writeLine(`{not json`)
		if l := f.next(); l.Error == nil || l.Error.Code != codeParseError || string(l.ID) != "null" {
			t.Errorf("malformed line answered %s", l.raw)
		}
		f.notify("_vendor/ping", msg{})
		resp, _ := f.call("session/load", msg{"sessionId": sid})
		if resp.Error == nil || resp.Error.Code != codeMethodNotFound {
			t.Errorf("unknown method answered %s", resp.raw)
		}
		if resp, _ := f.call("session/set_mode", msg{"sessionId": sid, "modeId": "default"}); resp.Error != nil || string(resp.Result) != "{}" {
			t.Errorf("set_mode default answered %s", resp.raw)
		}
		if resp, _ := f.call("session/set_mode", msg{"sessionId": sid, "modeId": "yolo"}); resp.Error == nil {
			t.Errorf("set_mode to an unknown mode answered %s", resp.raw)
		}
		if resp, _ := f.call("session/prompt", promptParams(sid, "nothing matches")); resp.Error == nil {
			t.Errorf("an unmatched prompt answered %s", resp.raw)
		}
		if resp, _ := f.call("session/prompt", promptParams("other-session", "known")); resp.Error == nil {
			t.Errorf("a prompt for an unknown session answered %s", resp.raw)
		}
		type mode struct{ ModeID string }
		if diff := cmp.Diff([]mode{{"default"}}, notes[mode](f, "mode")); diff != "" {
			t.Errorf("mode notes (-want +got):\n%s", diff)
		}
	})

	t.Run("quirky frames", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{
			"initialize": {"agentCapabilities": {"mcpCapabilities": {"http": false}}, "authMethods": null},
			"newSession": {"sessionId": "s-1", "modes": null},
			"turns": [{"steps": [
				{"toolCall": {"toolCallId": "t1", "title": "mcp__runnel__x", "rawInput": {}}},
				{"toolCall": {"toolCallId": "t1", "title": "mcp__runnel__x", "status": "in_progress", "rawInput": {"a": 1}}},
				{"toolCallUpdate": {"toolCallId": "ghost", "status": "pending"}},
				{"notify": {"update": {"sessionUpdate": "usage_update", "used": 10, "size": 100}}},
				{"notify": {"method": "_auth/status_update", "params": {"ok": true}}},
				{"raw": "{\"jsonrpc\":\"2.0\",\"id\":424242,\"result\":{}}"},
				{"raw": "{not json at all"},
				{"end": {"stopReason": "refusal"}},
				{"text": "never sent"}
			]}]}`))
		init, _ := f.call("initialize", msg{"protocolVersion": 1})
		if string(init.Result) != `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"http":false}},"agentInfo":{"name":"fakeagent","version":"0.0.0"}}` {
			t.Errorf("initialize result = %s", init.Result)
		}
		resp, _ := f.call("session/new", msg{"cwd": f.dir, "mcpServers": []any{}})
		if string(resp.Result) != `{"sessionId":"s-1"}` {
			t.Errorf("session/new result = %s", resp.Result)
		}
		resp, before := f.call("session/prompt", promptParams("s-1", "go"))
		if got := stopReason(t, resp); got != "refusal" {
			t.Errorf("stopReason = %q, want refusal", got)
		}
		var got []string
		for _, l := range before {
			got = append(got, l.raw)
		}
		want := []string{
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"rawInput":{},"sessionUpdate":"tool_call","title":"mcp__runnel__x","toolCallId":"t1"}}}`,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"rawInput":{"a":1},"sessionUpdate":"tool_call","status":"in_progress","title":"mcp__runnel__x","toolCallId":"t1"}}}`,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call_update","status":"pending","toolCallId":"ghost"}}}`,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"usage_update","used":10,"size":100}}}`,
			`{"jsonrpc":"2.0","method":"_auth/status_update","params":{"ok":true}}`,
			`{"jsonrpc":"2.0","id":424242,"result":{}}`,
			`{not json at all`,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
	})

	t.Run("string ids on a permission request", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"idStyle": "string", "turns": [{"steps": [
			{"permission": {"toolCall": {"toolCallId": "t1", "title": "Approve x"}, "onAllow": [{"text": "allowed"}]}},
			{"readFile": {"path": "/etc/hostname"}}
		]}]}`))
		sid := f.handshake()
		id := f.request("session/prompt", promptParams(sid, "go"))
		perm := f.next()
		if perm.Method != "session/request_permission" || !strings.HasPrefix(string(perm.ID), `"`) {
			t.Fatalf("want a permission request with a string id, got %s", perm.raw)
		}
		var params struct {
			Options []option `json:"options"`
		}
		if err := json.Unmarshal(perm.Params, &params); err != nil || len(params.Options) != 3 {
			t.Fatalf("permission params %s: %v", perm.Params, err)
		}
		f.respond(perm.ID, msg{"outcome": msg{"outcome": "selected", "optionId": "allow-once"}})
		if l := f.next(); !slices.Equal(texts([]line{l}), []string{"allowed"}) {
			t.Fatalf("after allow: %s", l.raw)
		}
		read := f.next()
		if read.Method != "fs/read_text_file" || !strings.HasPrefix(string(read.ID), `"`) || read.ID == nil || string(read.ID) == string(perm.ID) {
			t.Fatalf("want a read request with a new string id, got %s", read.raw)
		}
		f.respond(read.ID, msg{"content": "host\n"})
		resp := f.until(isResponse(id))
		if got := stopReason(t, resp[len(resp)-1]); got != "end_turn" {
			t.Errorf("stopReason = %q", got)
		}
		type outcome struct{ ToolCallID, Outcome, OptionID, Kind string }
		if diff := cmp.Diff([]outcome{{"t1", "selected", "allow-once", "allow_once"}}, notes[outcome](f, "permission outcome")); diff != "" {
			t.Errorf("permission outcome (-want +got):\n%s", diff)
		}
		type readResult struct{ Result struct{ Content string } }
		if got := notes[readResult](f, "fs/read_text_file result"); len(got) != 1 || got[0].Result.Content != "host\n" {
			t.Errorf("read result notes = %+v", got)
		}
	})

	t.Run("permission branches", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [{"steps": [
			{"toolCall": {"toolCallId": "t1", "title": "x", "status": "pending"}},
			{"permission": {"toolCall": {"toolCallId": "t1"},
				"onAllow": [{"toolCallUpdate": {"toolCallId": "t1", "status": "completed"}}, {"text": "ran"}],
				"onReject": [{"toolCallUpdate": {"toolCallId": "t1", "status": "failed", "rawOutput": "rejected"}}, {"text": "rejected"}],
				"onCancelled": [{"text": "paused"}]}},
			{"text": "turn goes on"}
		]}]}`))
		sid := f.handshake()
		for _, tt := range []struct {
			option string // "" answers cancelled, after a session/cancel
			want   []string
			reason string
			failed bool // a closing tool_call_update "failed" came from the fake
		}{
			{option: "allow-once", want: []string{"ran", "turn goes on"}, reason: "end_turn"},
			{option: "reject", want: []string{"rejected", "turn goes on"}, reason: "end_turn"},
			{option: "", want: []string{"paused", "turn goes on"}, reason: "cancelled", failed: true},
		} {
			id := f.request("session/prompt", promptParams(sid, "go"))
			perm := f.until(func(l line) bool { return l.Method == "session/request_permission" })
			answer := msg{"outcome": msg{"outcome": "selected", "optionId": tt.option}}
			if tt.option == "" {
				f.notify("session/cancel", msg{"sessionId": sid})
				answer = msg{"outcome": msg{"outcome": "cancelled"}}
			}
			f.respond(perm[len(perm)-1].ID, answer)
			rest := f.until(isResponse(id))
			if got := stopReason(t, rest[len(rest)-1]); got != tt.reason {
				t.Errorf("%q: stopReason = %q, want %q", tt.option, got, tt.reason)
			}
			if diff := cmp.Diff(tt.want, texts(rest)); diff != "" {
				t.Errorf("%q: texts (-want +got):\n%s", tt.option, diff)
			}
			failed := slices.ContainsFunc(rest, func(l line) bool {
				u := l.update()
				return u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed" && len(u) == 3
			})
			if failed != tt.failed {
				t.Errorf("%q: closing failed update = %v, want %v", tt.option, failed, tt.failed)
			}
		}
	})

	t.Run("waitCancel", func(t *testing.T) {
		t.Parallel()
		for _, leave := range []bool{false, true} {
			f := startFake(t, bin, scenarioJSON(t, `{"leaveInProgressOnCancel": `+strconv.FormatBool(leave)+`,
				"turns": [{"steps": [
					{"toolCall": {"toolCallId": "c1", "title": "mcp__runnel__slow", "status": "in_progress"}},
					{"waitCancel": {}},
					{"text": "after cancel"}
				]}]}`))
			sid := f.handshake()
			id := f.request("session/prompt", promptParams(sid, "go"))
			f.until(func(l line) bool { return l.update()["sessionUpdate"] == "tool_call" })
			f.notify("session/cancel", msg{"sessionId": sid})
			rest := f.until(isResponse(id))
			if got := stopReason(t, rest[len(rest)-1]); got != "cancelled" {
				t.Errorf("leave=%v: stopReason = %q", leave, got)
			}
			var updates []string
			for _, l := range rest[:len(rest)-1] {
				updates = append(updates, l.raw)
			}
			want := []string{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"content":{"text":"after cancel","type":"text"},"sessionUpdate":"agent_message_chunk"}}}`}
			if !leave {
				want = append(want, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"tool_call_update","status":"failed","toolCallId":"c1"}}}`)
			}
			if diff := cmp.Diff(want, updates); diff != "" {
				t.Errorf("leave=%v: lines (-want +got):\n%s", leave, diff)
			}
		}
	})

	t.Run("crash exits 3", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"initialize": {"crash": true}}`))
		f.request("initialize", msg{"protocolVersion": 1})
		if l, ok := <-f.lines; ok {
			t.Errorf("a crashing agent wrote %s", l.raw)
		}
		if code := exitCode(f.wait()); code != 3 {
			t.Errorf("exit code %d, want 3", code)
		}
	})

	t.Run("crash mid-turn leaves children", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [{"steps": [
			{"text": "working"},
			{"spawn": {}},
			{"spawn": {"setsid": true}},
			{"crash": {"code": 7}}
		]}]}`))
		sid := f.handshake()
		f.request("session/prompt", promptParams(sid, "go"))
		if code := exitCode(f.wait()); code != 7 {
			t.Errorf("exit code %d, want 7", code)
		}
		type spawned struct {
			Pid, Pgid int
			Setsid    bool
		}
		children := notes[spawned](f, "spawn")
		for _, c := range children {
			t.Cleanup(func() { _ = syscall.Kill(c.Pid, syscall.SIGKILL) })
		}
		if len(children) != 2 {
			t.Fatalf("spawn notes = %+v", children)
		}
		pid := f.cmd.Process.Pid
		if children[0].Pgid != pid || children[1].Pgid != children[1].Pid {
			t.Errorf("children %+v: want the first in the agent's group %d, the second in its own session", children, pid)
		}
		for _, c := range children {
			if err := syscall.Kill(c.Pid, 0); err != nil {
				t.Errorf("child %d is gone: %v", c.Pid, err)
			}
		}
	})

	t.Run("hang never answers initialize", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"initialize": {"hang": true}}`))
		f.request("initialize", msg{"protocolVersion": 1})
		select {
		case l := <-f.lines:
			t.Fatalf("a hung agent wrote %s", l.raw)
		case <-time.After(300 * time.Millisecond):
		}
		f.stdin.Close() // a hung agent does not exit when its input ends
		select {
		case <-f.exited:
			t.Fatalf("a hung agent exited: %v", f.exitErr)
		case <-time.After(300 * time.Millisecond):
		}
		f.kill()
		if status, ok := f.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || status.Signal() != syscall.SIGKILL {
			t.Errorf("want the agent killed, got %v", f.cmd.ProcessState)
		}
	})

	t.Run("flood", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [
			{"whenPromptContains": "chunks", "steps": [{"flood": {"bytes": 1048576, "chunk": 4096}}]},
			{"whenPromptContains": "line", "steps": [{"flood": {"bytes": 8388608}}]}
		]}`))
		sid := f.handshake()
		for _, tt := range []struct {
			prompt        string
			frames, bytes int
		}{{"chunks", 256, 1 << 20}, {"line", 1, 8 << 20}} {
			resp, before := f.call("session/prompt", promptParams(sid, tt.prompt))
			n := 0
			for _, s := range texts(before) {
				n += len(s)
			}
			if stopReason(t, resp) != "end_turn" || len(before) != tt.frames || n != tt.bytes {
				t.Errorf("%s: %d frames, %d bytes; want %d, %d", tt.prompt, len(before), n, tt.frames, tt.bytes)
			}
		}
		for _, e := range f.entries() {
			if e.T == "send" && e.Method == "session/update" {
				t.Fatalf("flood frames were logged one by one")
			}
		}
	})

	t.Run("stdin end exits 0 and fails a pending request", func(t *testing.T) {
		t.Parallel()
		f := startFake(t, bin, scenarioJSON(t, `{"turns": [{"steps": [{"writeFile": {"path": "/tmp/x", "content": "c"}}]}]}`))
		sid := f.handshake()
		f.request("session/prompt", promptParams(sid, "go"))
		f.until(func(l line) bool { return l.Method == "fs/write_text_file" })
		f.stdin.Close()
		if code := exitCode(f.wait()); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		type result struct{ Error string }
		if got := notes[result](f, "fs/write_text_file result"); len(got) != 1 || got[0].Error == "" {
			t.Errorf("write result notes = %+v", got)
		}
	})
}
