package run

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

var update = flag.Bool("update", false, "rewrite testdata/pause-resume from the runs")

// exampleSecret signs the documented interactions, so their signatures
// are the same on every run of the test.
const exampleSecret = "example-interaction-secret"

// docPath is the platform developer's guide the examples are copied into.
const docPath = "../../docs/pause-resume.md"

// TestPauseResumeExamples runs the two round trips of
// docs/pause-resume.md, compares every request and result with
// testdata/pause-resume (rewritten with -update), and checks the guide
// shows each file verbatim: the documented JSON is what runnel does.
func TestPauseResumeExamples(t *testing.T) {
	llm := llmtest.NewServer(exampleScript(toolCall("call_1", "delete_file", `{"item":"q3-draft.docx"}`)))
	defer llm.Close()
	p := newPlatform(t, func(w http.ResponseWriter, _ *http.Request, env envelopeIn) {
		writeContent(w, "STATUS_CODE_OK", "", "Deleted q3-draft.docx.")
	})
	// A fixed clock: signatures carry their issue time.
	issued := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	m := NewManager(&Options{InteractionSecret: []byte(exampleSecret), Now: func() time.Time { return issued }})
	norm := strings.NewReplacer(llm.URL, "https://llm.example", p.srv.URL, "https://platform.example", openAIKey, "sk-…")

	req := baseRequest(llm, APIOpenAIChat, "Delete the Q3 draft.")
	req.Model, req.SessionID, req.TurnID = "openai/gpt-5", "sess-42", ""
	req.Secrets = map[string]string{"OPENAI_API_KEY": openAIKey}
	req.CustomTools = []runnel.ToolSpec{writeTool("delete_file")}
	req.CustomTools[0].Description = "Delete a file from the user's drive"
	req.CustomTools[0].CallRef = ""
	req.ToolCallback = &runnel.ToolCallback{Endpoint: p.srv.URL + "/tools/call", Authorization: "Bearer platform-token"}
	first := runExample(t, m, req, norm, "approval-1")
	it := first.Interactions[0]
	answer, _ := json.Marshal(map[string]any{"approved": true, "interactionId": it.ID, "signature": it.Signature})
	runExample(t, m, resumeRequest(t, req, first, approval(it.ToolCallID, it.ToolName, string(answer))), norm, "approval-2")

	clientLLM := llmtest.NewServer(exampleScript(toolCall("call_7", "connect_account", `{"provider":"github"}`)))
	defer clientLLM.Close()
	norm = strings.NewReplacer(clientLLM.URL, "https://llm.example", openAIKey, "sk-…")
	req = baseRequest(clientLLM, APIOpenAIChat, "Connect my GitHub account.")
	req.Model, req.SessionID, req.TurnID = "openai/gpt-5", "sess-43", ""
	req.Secrets = map[string]string{"OPENAI_API_KEY": openAIKey}
	req.CustomTools = []runnel.ToolSpec{clientTool("connect_account", `{"kind":"connect","provider":"github"}`)}
	req.CustomTools[0].Description = "Ask the user to connect an account in the browser"
	first = runExample(t, m, req, norm, "client-1")
	it = first.Interactions[0]
	runExample(t, m, resumeRequest(t, req, first, clientOutput(it.ToolCallID, it.ToolName, `{"connected":true,"account":"octocat"}`)), norm, "client-2")
}

// exampleScript makes the model call the tool, then say what it returned.
func exampleScript(call llmtest.ToolCall) llmtest.Script {
	return llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Done. The tool said: {{last_tool_result}}"}},
		{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{call}}},
	}}
}

// runExample runs req, and checks (or with -update writes) the request and
// the result as the guide shows them.
func runExample(t *testing.T, m *Manager, req *runnel.RunRequest, norm *strings.Replacer, name string) *runnel.Result {
	t.Helper()
	res, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// The ids a run makes up are fixed for the guide.
	res.RequestID, res.TraceID = "run_5f1c0a9e2b7d4c36", "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, part := range []struct {
		suffix string
		value  any
	}{{"request", req}, {"result", res}} {
		raw, err := json.MarshalIndent(part.value, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got := []byte(norm.Replace(string(raw)) + "\n")
		file := filepath.Join("testdata", "pause-resume", name+"-"+part.suffix+".json")
		if *update {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s differs from the run; if the change is meant, run with -update and copy it into %s:\n%s", file, docPath, got)
		}
		checkDocShows(t, file, want)
	}
	return res
}

// checkDocShows fails unless the guide holds the file's JSON in one of its
// code blocks.
func checkDocShows(t *testing.T, file string, content []byte) {
	t.Helper()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("reading the guide: %v", err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	for _, b := range blocks {
		if bytes.Equal(b[1], content) {
			return
		}
	}
	t.Errorf("%s does not show %s verbatim in a ```json block", docPath, file)
}
