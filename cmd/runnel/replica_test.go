package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// TestResumeOnAnotherProcess pauses a turn on one `runnel serve` process,
// stops that process, and resumes the turn on a second one: the answer
// travels in the replayed conversation, and nothing is kept in between.
func TestResumeOnAnotherProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "runnel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "Done: {{last_tool_result}}"}},
		{When: llmtest.Match{LastUserContains: "delete"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "call_del", Name: "delete_file", Arguments: json.RawMessage(`{"item":"q3.docx"}`)}}}},
	}})
	defer llm.Close()
	var executed atomic.Int32
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executed.Add(1)
		io.WriteString(w, `{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","content":"q3.docx deleted"}}}`)
	}))
	defer callback.Close()

	env := []string{"RUNNEL_TOKEN=replica-token-0123456789", "RUNNEL_INTERACTION_SECRET=shared-secret-0123456789abcdef", "RUNNEL_PORT=0"}
	first, stopFirst := startProcess(t, bin, env)
	second, _ := startProcess(t, bin, env)

	req := map[string]any{
		"model":    "openai/gpt-test",
		"endpoint": map[string]string{"baseUrl": llm.URL + "/v1"},
		"tools":    []string{},
		"messages": []runnel.Message{runnel.UserText("Please delete the Q3 draft.")},
		"customTools": []map[string]any{{"name": "delete_file",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"item": map[string]string{"type": "string"}}}}},
		"toolCallback": map[string]string{"endpoint": callback.URL + "/tools/call"},
	}
	paused := postRun(t, first, req)
	if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 || executed.Load() != 0 {
		t.Fatalf("first turn: status %q, %d interactions, %d executions; want paused, 1, 0", paused.Status, len(paused.Interactions), executed.Load())
	}
	it := paused.Interactions[0]
	if it.Signature == "" {
		t.Fatal("signing is on but the interaction has no signature")
	}
	stopFirst()

	approval, _ := json.Marshal(map[string]any{"approved": true, "interactionId": it.ID, "signature": it.Signature})
	history := append([]runnel.Message{runnel.UserText("Please delete the Q3 draft.")}, paused.Messages...)
	req["messages"] = append(history, runnel.Message{Role: runnel.RoleTool, Content: []runnel.Block{{
		Type: runnel.BlockToolResult, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Kind: runnel.ResultKindApproval, Output: approval}}})
	done := postRun(t, second, req)
	if done.Status != runnel.StatusCompleted || done.Output != "Done: q3.docx deleted" || executed.Load() != 1 {
		t.Errorf("resume: status %q output %q, %d executions; want completed, the tool's result, 1", done.Status, done.Output, executed.Load())
	}
}

// startProcess runs the built binary's serve command and returns its URL
// (read from its "listening" log line) and a stop that sends SIGTERM and
// waits for a clean exit.
func startProcess(t *testing.T, bin string, env []string) (string, func()) {
	t.Helper()
	url, _, stop := startProcessAs(t, bin, env, nil)
	return url, stop
}

// startProcessAs is startProcess as the user cred names (nil: this one),
// also returning the process.
func startProcessAs(t *testing.T, bin string, env []string, cred *syscall.Credential) (string, *exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	stop := func() {
		if stopped.Swap(true) {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve exited with %v", err)
		}
	}
	t.Cleanup(stop)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var line struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "runnel listening" {
			go func() { _, _ = io.Copy(io.Discard, stderr) }() // keep the pipe drained; ends at exit
			return "http://" + line.Addr, cmd, stop
		}
	}
	t.Fatalf("serve never said it was listening: %v", sc.Err())
	return "", nil, nil
}

func postRun(t *testing.T, url string, req any) *runnel.Result {
	t.Helper()
	body, _ := json.Marshal(req)
	resp := post(t, url, "replica-token-0123456789", body, "")
	var res runnel.Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s (%s)", resp.StatusCode, res.Error, strings.TrimSpace(string(res.ErrorCode)))
	}
	return &res
}
