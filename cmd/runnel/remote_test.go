package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// TestRunRemote runs `runnel run --remote` against a served runnel (the
// real run manager, the scripted model): the same request gives the same
// output and exit code as a local `runnel run`, one-shot and streamed,
// refusals included.
func TestRunRemote(t *testing.T) {
	const token = "remote-token-0123456789abcdef"
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Listed: {{last_tool_result}}"}},
		{When: llmtest.Match{LastUserContains: "list"}, Reply: llmtest.Reply{Reasoning: "Let me look.",
			ToolCalls: []llmtest.ToolCall{{Name: "ls", Arguments: json.RawMessage(`{}`)}}}},
		{Reply: llmtest.Reply{Text: "Hello: {{last_user}}"}},
	}})
	defer llm.Close()
	url, stderr, _ := startDaemon(t, map[string]string{"RUNNEL_TOKEN": token}, nil)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withToken := map[string]string{"RUNNEL_TOKEN": token}

	list := `{"model":"openai/gpt-test","endpoint":{"baseUrl":"` + llm.URL + `/v1"},"secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},` +
		`"tools":["ls"],"sessionId":"s-remote","context":{"propagation":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},` +
		`"messages":[{"role":"user","content":"list the files"}]}`
	reqFile := filepath.Join(dir, "req.json")
	if err := os.WriteFile(reqFile, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}

	// One-shot: the same result as a local run, but for the ids of the
	// request and the run.
	local := runMain(t, nil, list, nil, "run")
	remote := runMain(t, withToken, "", nil, "run", reqFile, "--remote", url)
	if local.Code != exitOK || remote.Code != exitOK {
		t.Fatalf("exit local %d, remote %d\nremote stderr:\n%s", local.Code, remote.Code, remote.Stderr)
	}
	want, got := comparable(t, local.Stdout), comparable(t, remote.Stdout)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("remote result (-local +remote):\n%s", diff)
	}
	if got.Status != runnel.StatusCompleted || !strings.HasPrefix(got.Output, "Listed: ") || len(got.Events) == 0 {
		t.Errorf("remote result %+v", got)
	}

	// Streamed: NDJSON records, events then the result, from stdin and
	// with the token from a file.
	remote = runMain(t, nil, list, nil, "run", "-", "--stream", "--remote", url+"/", "--token-file", tokenFile)
	local = runMain(t, nil, list, nil, "run", "--stream")
	if remote.Code != exitOK {
		t.Fatalf("exit %d\n%s", remote.Code, remote.Stderr)
	}
	if diff := cmp.Diff(recordShape(t, local.Stdout), recordShape(t, remote.Stdout)); diff != "" {
		t.Errorf("remote stream (-local +remote):\n%s", diff)
	}

	// A request the server refuses: the same answer and exit code as a
	// local run's.
	refused := `{"model":"openai/gpt-test","secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},"messages":[]}`
	local = runMain(t, nil, refused, nil, "run")
	remote = runMain(t, withToken, refused, nil, "run", "--remote", url)
	if local.Code != exitFailure || remote.Code != exitFailure {
		t.Errorf("refused: exit local %d, remote %d; want 1", local.Code, remote.Code)
	}
	if diff := cmp.Diff(comparable(t, local.Stdout), comparable(t, remote.Stdout)); diff != "" {
		t.Errorf("refused (-local +remote):\n%s", diff)
	}
	// As is a body that is not JSON, decoded before anything is sent.
	remote = runMain(t, withToken, `{"messages":`, nil, "run", "--remote", url)
	if res := comparable(t, remote.Stdout); remote.Code != exitFailure || res.ErrorCode != runnel.CodeInvalidRequest || !strings.HasPrefix(res.Error, "invalid JSON: ") {
		t.Errorf("undecodable: exit %d, %s", remote.Code, remote.Stdout)
	}

	// A wrong token, and a server that is not there: a failed result, exit 1.
	remote = runMain(t, map[string]string{"RUNNEL_TOKEN": "wrong-" + token}, list, nil, "run", "--remote", url)
	if res := comparable(t, remote.Stdout); remote.Code != exitFailure || res.ErrorCode != runnel.CodeUnauthorized {
		t.Errorf("wrong token: exit %d, %s", remote.Code, remote.Stdout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	remote = runMain(t, withToken, list, nil, "run", "--stream", "--remote", gone)
	if res := resultRecord(t, remote.Stdout); remote.Code != exitFailure || res.ErrorCode != runnel.CodeUnavailable ||
		!strings.HasPrefix(res.Error, "could not run the request on "+gone+": ") {
		t.Errorf("no server: exit %d, %s", remote.Code, remote.Stdout)
	}

	// Usage errors: exit 2 before anything is sent.
	for _, tt := range []struct {
		env    map[string]string
		args   []string
		stderr string
	}{
		{withToken, []string{"--remote", "127.0.0.1:8765"}, `runnel run: --remote="127.0.0.1:8765" is not a runnel URL`},
		{withToken, []string{"--remote", url, "--token-file", tokenFile}, "runnel run: both RUNNEL_TOKEN and a token file are set"},
		{nil, []string{"--remote", url, "--token-file", filepath.Join(dir, "missing")}, "runnel run: reading the token file"},
	} {
		got := runMain(t, tt.env, list, nil, append([]string{"run"}, tt.args...)...)
		if got.Code != exitUsage || !strings.HasPrefix(got.Stderr, tt.stderr) || got.Stdout != "" {
			t.Errorf("run %q: exit %d, stderr %q; want 2 and %q", tt.args, got.Code, got.Stderr, tt.stderr)
		}
	}

	for _, out := range []string{remote.Stdout, remote.Stderr, stderr.String()} {
		if strings.Contains(out, token) || strings.Contains(out, fakeKey) {
			t.Error("a secret reached the output or the logs")
		}
	}
}

// comparable decodes a printed result without what differs between two
// runs of one request: the request's id.
func comparable(t *testing.T, out string) *runnel.Result {
	t.Helper()
	var res runnel.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not a result: %v\n%s", err, out)
	}
	res.RequestID = ""
	return &res
}

// recordShape is what an NDJSON output says, without the ids a run makes
// up: the event types in order, and the result.
func recordShape(t *testing.T, out string) []string {
	t.Helper()
	var shape []string
	for line := range strings.Lines(out) {
		var rec struct {
			Kind   string
			Event  *runnel.Event
			Result json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a record: %v: %q", err, line)
		}
		if rec.Event != nil {
			shape = append(shape, rec.Kind+" "+string(rec.Event.Type))
			continue
		}
		res := comparable(t, string(rec.Result))
		shape = append(shape, rec.Kind+" "+string(res.Status)+" "+res.Output)
	}
	return shape
}

// resultRecord decodes the result record that ends an NDJSON output.
func resultRecord(t *testing.T, out string) *runnel.Result {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rec struct{ Result json.RawMessage }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		t.Fatalf("not a record: %v\n%s", err, out)
	}
	return comparable(t, string(rec.Result))
}
