package run

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// TestBuiltinsStayInTheWorkspace runs the builtins through a real run: the
// request's files are in the workspace for the model to read, every path
// that leads out of it is refused, and the workspace is gone afterwards.
func TestBuiltinsStayInTheWorkspace(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(
		toolCall("c_read", "read", `{"path":"notes/hello.txt"}`),
		toolCall("c_skill", "read", `{"path":".agents/skills/greet/SKILL.md"}`),
		toolCall("c_agents", "read", `{"path":"AGENTS.md"}`),
		toolCall("c_etc", "read", `{"path":"/etc/passwd"}`),
		toolCall("c_up", "write", `{"path":"../escaped.txt","content":"x"}`),
		toolCall("c_sh", "bash", `{"command":"pwd"}`),
	))
	defer llm.Close()
	root := t.TempDir()
	req := baseRequest(llm, APIOpenAIChat, "Look around")
	req.Tools = []string{"read", "write", "bash"}
	req.Permissions = json.RawMessage(`{"default":"allow"}`)
	req.HarnessFiles = []runnel.File{{Path: "notes/hello.txt", Content: "hello from the platform\n"}}
	req.Skills = []runnel.Skill{{Name: "greet", Description: "Say hello", Body: "Greet warmly."}}
	req.AgentsMd = "Be brief."
	res, err := overHTTP(t, NewManager(&Options{WorkspaceRoot: root})).Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted {
		t.Fatalf("run = status %q error %q", res.Status, res.Error)
	}
	results := map[string]runnel.Block{}
	for _, b := range res.Messages[1].Content {
		results[b.ToolCallID] = b
	}
	for id, want := range map[string]string{"c_read": "hello from the platform", "c_skill": "Greet warmly.", "c_agents": "Be brief."} {
		if r := results[id]; r.IsError || !strings.Contains(r.OutputText(), want) {
			t.Errorf("%s = %q (error %v), want it to contain %q", id, r.OutputText(), r.IsError, want)
		}
	}
	for _, id := range []string{"c_etc", "c_up"} {
		if r := results[id]; !r.IsError || !strings.Contains(r.OutputText(), "outside the workspace") {
			t.Errorf("%s = %q (error %v), want an outside-the-workspace refusal", id, r.OutputText(), r.IsError)
		}
	}
	// bash runs in the workspace, which lives under the configured root.
	if r := results["c_sh"]; r.IsError || !strings.Contains(r.OutputText(), root) {
		t.Errorf("bash pwd = %q (error %v), want a directory under %s", r.OutputText(), r.IsError, root)
	}
	if _, err := os.Stat(filepath.Join(root, "escaped.txt")); !os.IsNotExist(err) {
		t.Errorf("a write escaped the workspace: stat = %v", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("the workspace root still holds %d entries after the run", len(entries))
	}
}

// TestReadOnlyBuiltinsCountAsReads: under the default plan (allow_reads),
// read may run and write asks.
func TestReadOnlyBuiltinsCountAsReads(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(
		toolCall("c_read", "read", `{"path":"a.txt"}`),
		toolCall("c_write", "write", `{"path":"a.txt","content":"new"}`),
	))
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "Rewrite a.txt")
	req.Tools = nil // absent: read, bash, edit, write
	req.HarnessFiles = []runnel.File{{Path: "a.txt", Content: "old"}}
	m := overHTTP(t, NewManager(&Options{WorkspaceRoot: t.TempDir()}))
	first, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	for _, it := range first.Interactions {
		asked = append(asked, it.ToolName)
	}
	if diff := cmp.Diff([]string{"write"}, asked); diff != "" {
		t.Errorf("interactions (-want +got):\n%s", diff)
	}
	// read was allowed, so it was deferred with the step, not asked about.
	if diff := cmp.Diff([]string{"tool:tool_result:c_read:" + deferredText + " (error)"}, shape(first.Messages[1:])); diff != "" {
		t.Errorf("paused turn's results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"read", "write", "edit", "bash"}, llm.Requests()[0].Conversation.Tools); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	// Approved on resume, the write happens in a fresh workspace made from
	// the same request, and the model reads what it did.
	second, err := m.Run(context.Background(), resumeRequest(t, req, first, approval("c_write", "write", `{"approved":true}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := second.Messages[0].Content[0]; r.IsError || r.ToolCallID != "c_write" {
		t.Errorf("resumed write = %+v, want it to have run", r)
	}
}

const deferredText = "DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required."

// TestWorkspaceKept: with KeepWorkspace the files stay for a developer to
// look at; a run without builtins or files makes no workspace at all.
func TestWorkspaceKept(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "ok"}}}})
	defer llm.Close()
	root := t.TempDir()
	req := baseRequest(llm, APIOpenAIChat, "hi")
	req.HarnessFiles = []runnel.File{{Path: "kept.txt", Content: "still here"}}
	if _, err := overHTTP(t, NewManager(&Options{WorkspaceRoot: root, KeepWorkspace: true})).Run(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	found, _ := filepath.Glob(filepath.Join(root, "*", "kept.txt"))
	if len(found) != 1 {
		t.Errorf("kept workspaces hold %d copies of kept.txt, want 1", len(found))
	}

	empty := t.TempDir()
	plain := baseRequest(llm, APIOpenAIChat, "hi") // tools: [] and no files
	if _, err := overHTTP(t, NewManager(&Options{WorkspaceRoot: empty, KeepWorkspace: true})).Run(context.Background(), plain, nil); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a run with nothing for a workspace made %d entries", len(entries))
	}
}

// TestDirectCallBindingsAfterApproval: a direct call's bound field is the
// platform's. The person approves the call as the model wrote it, and the
// platform API receives the runContext value.
func TestDirectCallBindingsAfterApproval(t *testing.T) {
	llm := llmtest.NewServer(pauseScript(toolCall("call_x", "archive", `{"item":"a","project":"someone-else"}`)))
	defer llm.Close()
	var mu sync.Mutex
	var got []string
	api := newPlatform(t, func(w http.ResponseWriter, r *http.Request, _ envelopeIn) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Write([]byte(`{"archived":true}`))
	})
	req := baseRequest(llm, APIOpenAIChat, "Archive a")
	req.ToolCallback = &runnel.ToolCallback{Endpoint: api.srv.URL + "/api/tools/call", Authorization: callbackAuth}
	req.RunContext = json.RawMessage(`{"project":{"id":"p1"}}`)
	req.CustomTools = []runnel.ToolSpec{{
		Name: "archive", InputSchema: json.RawMessage(`{"type":"object","required":["item"]}`),
		ContextBindings: map[string]string{"project": "$ctx.project.id"},
		Call:            &runnel.DirectCall{Method: "POST", Path: "/api/projects/{project}/archive"},
	}}
	m := overHTTP(t, NewManager(nil))
	first, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in := string(first.Interactions[0].Input); in != `{"item":"a","project":"someone-else"}` {
		t.Errorf("the person is asked about %s, want the call as the model wrote it", in)
	}
	second, err := m.Run(context.Background(), resumeRequest(t, req, first, approval("call_x", "archive", `{"approved":true}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"POST /api/projects/p1/archive"}, got); diff != "" {
		t.Errorf("platform API requests (-want +got):\n%s", diff)
	}
	if second.Output != `Last result: {"archived":true}` {
		t.Errorf("output = %q, error %q", second.Output, second.Error)
	}
	body := api.received()[0].Body
	if body != `{"item":"a"}` {
		t.Errorf("body = %s, want the arguments without the path parameter", body)
	}
}
