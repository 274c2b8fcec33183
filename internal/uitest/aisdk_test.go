package uitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The AI SDK releases the conformance runs against: the first and last of
// each strict range (5.0.0–5.0.216 and 6.0.0–6.0.230 reject unknown keys),
// the last strict 7.x and the latest 7.x, each with the profile of its
// major. internal/uitest/node/package.json pins them.
var releases = []struct{ alias, compat string }{
	{"ai-5.0.0", "ai5"}, {"ai-5.0.216", "ai5"},
	{"ai-6.0.0", "ai6"}, {"ai-6.0.230", "ai6"},
	{"ai-7.0.31", "ai7"}, {"ai-7.0.173", "ai7"},
}

// TestAISDKConformance feeds runnel's POST /v1/chat stream (runnel demo:
// the scripted model, a server tool, an approval, a client tool, a model
// that fails mid-answer) to each release's own client code
// (DefaultChatTransport, readUIMessageStream) and checks the UIMessages it
// builds: text, reasoning, a multi-step server tool, an approval approved
// and denied, a client tool's round trip, an error mid-stream. Any chunk a
// release rejects fails its scenario.
func TestAISDKConformance(t *testing.T) {
	node, modules := nodeTools(t)
	demo := startDemo(t)
	signed := startDemo(t, "RUNNEL_INTERACTION_SECRET=uitest-interaction-secret-0123456789")
	for _, r := range releases {
		t.Run(r.alias, func(t *testing.T) {
			runScenarios(t, node, modules, r.alias, demo.URL, r.compat, true, "")
		})
	}
	// With signing on, the approval's signature must make the round trip
	// in every major: on tool-approval-request in ai@7, in the
	// interaction's data part everywhere.
	for _, alias := range []string{"ai-5.0.0", "ai-6.0.0", "ai-7.0.31"} {
		r := releaseOf(t, alias)
		t.Run(alias+"/signed", func(t *testing.T) {
			runScenarios(t, node, modules, r.alias, signed.URL, r.compat, true, "")
		})
	}
	// The check has teeth: a release given a newer major's stream rejects
	// it (ai@5.0.0 knows no finish reason and no approval chunks; ai@6.0.0
	// no signature on an approval request).
	for _, c := range []struct{ alias, compat, url string }{
		{"ai-5.0.0", "ai6", demo.URL}, {"ai-6.0.0", "ai7", signed.URL},
	} {
		t.Run(c.alias+"/given-"+c.compat, func(t *testing.T) {
			runScenarios(t, node, modules, c.alias, c.url, c.compat, false, "")
		})
	}
}

func releaseOf(t *testing.T, alias string) struct{ alias, compat string } {
	for _, r := range releases {
		if r.alias == alias {
			return r
		}
	}
	t.Fatalf("no release %s", alias)
	return releases[0]
}

// TestAISDKThroughAnACPAgent runs an approval, approved and denied, on an
// ACP harness (the fake agent as claude, the demo's delete_file tool)
// through each release's client: the agent makes the approved call again
// under its own id, and the part the person answered must take its result.
func TestAISDKThroughAnACPAgent(t *testing.T) {
	node, modules := nodeTools(t)
	// Not under /tmp, nor in the checkout (which may be under /tmp): the
	// demo runs the agent in the isolated sandbox where the host has it,
	// and the sandbox gives the agent a /tmp of its own.
	dir, err := os.MkdirTemp("/var/tmp", "runnel-uitest-acp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "fakeagent")
	if out, err := exec.Command("go", "build", "-o", bin, "../harness/acp/fakeagent").CombinedOutput(); err != nil {
		t.Fatalf("building the fake agent: %v\n%s", err, out)
	}
	data, err := os.ReadFile("testdata/acp-delete.json")
	if err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(dir, "scenario.json")
	if err := os.WriteFile(scenario, data, 0o644); err != nil {
		t.Fatal(err)
	}
	demo := startDemo(t, fmt.Sprintf("RUNNEL_HARNESS_CLAUDE_COMMAND=/usr/bin/env FAKE_ACP_SCENARIO=%s %s", scenario, bin))
	// The platform's tool callback: it counts the deletions.
	var deletions atomic.Int32
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deletions.Add(1)
		io.WriteString(w, `{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","content":"Deleted notes/q3-draft.txt"}}}`)
	}))
	defer callback.Close()
	fields, err := json.Marshal(map[string]any{
		"harness": "claude", "model": "anthropic/claude-test",
		// The fake agent calls no model.
		"endpoint": map[string]string{"baseUrl": "http://127.0.0.1:9"},
		"secrets":  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-uitest"},
		"customTools": []map[string]any{{"name": "delete_file", "description": "Delete a file",
			"inputSchema": map[string]any{"type": "object", "required": []string{"path"}, "properties": map[string]any{"path": map[string]string{"type": "string"}}}}},
		"toolCallback": map[string]string{"endpoint": callback.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range releases {
		t.Run(r.alias, func(t *testing.T) {
			runScenarios(t, node, modules, r.alias, demo.URL, r.compat, true, string(fields))
		})
	}
	// One deletion per release: the approved call ran once, the denied one never.
	if n := deletions.Load(); n != int32(len(releases)) {
		t.Errorf("the callback ran %d times, want %d", n, len(releases))
	}
}

// runScenarios runs aisdk.mjs for one release and checks every scenario
// passed (or, with pass false, that the release rejected the stream).
// With runFields it runs the ACP scenarios on them.
func runScenarios(t *testing.T, node, modules, alias, url, compat string, pass bool, runFields string) {
	t.Helper()
	args := []string{filepath.Join(filepath.Dir(modules), "aisdk.mjs"), alias, url, compat}
	want := 6
	if runFields != "" {
		args, want = append(args, runFields), 2
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = filepath.Dir(modules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	results := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			t.Fatalf("aisdk.mjs printed %q", sc.Text())
		}
		results[r.Name] = r.Error
		if pass && !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	if len(results) != want {
		t.Fatalf("aisdk.mjs ran %d scenarios, want %d (err %v)\nstderr:\n%s", len(results), want, err, stderr.String())
	}
	if pass && err != nil {
		t.Errorf("aisdk.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	if !pass {
		rejected := 0
		for _, e := range results {
			if strings.Contains(e, "Type validation failed") {
				rejected++
			}
		}
		if rejected == 0 {
			t.Errorf("%s accepted a %s stream; the conformance check would not catch a chunk it rejects", alias, compat)
		}
	}
}
