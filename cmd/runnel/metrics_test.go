package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/llmtest"
)

// TestMetricsAfterRunsOfEachOutcome serves with the real manager and a
// metrics listener of its own, makes runs that complete (a callback tool,
// then text), pause (an approval), fail (the model's stream is cut) and
// are refused (a bad request, a missing token), and one on an ACP agent
// (the fake one, as claude); then scrapes /metrics on both listeners and
// checks every metric with the values those runs must give.
func TestMetricsAfterRunsOfEachOutcome(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "It is {{last_tool_result}}."}},
		{When: llmtest.Match{LastUserContains: "weather"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}},
		{When: llmtest.Match{LastUserContains: "delete"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "c2", Name: "delete_file", Arguments: json.RawMessage(`{"path":"q3.docx"}`)}}}},
		{When: llmtest.Match{LastUserContains: "fail"}, Reply: llmtest.Reply{Text: "Partial answer that breaks"},
			Fault: &llmtest.Fault{Kind: llmtest.FaultCut, AfterChunks: 2}},
		{When: llmtest.Match{LastUserContains: "wait"}, Reply: llmtest.Reply{Text: "never"},
			Fault: &llmtest.Fault{Kind: llmtest.FaultHang}},
	}})
	defer llm.Close()
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","content":"sunny"}}}`)
	}))
	defer callback.Close()
	dir := t.TempDir()
	agent := filepath.Join(dir, "fakeagent")
	if out, err := exec.Command("go", "build", "-o", agent, "../../internal/harness/acp/fakeagent").CombinedOutput(); err != nil {
		t.Fatalf("building the fake agent: %v\n%s", err, out)
	}
	scenario := filepath.Join(dir, "scenario.json")
	if err := os.WriteFile(scenario, []byte(`{"turns":[{"steps":[{"text":"hello from the agent"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}

	const token = "metrics-token-0123456789abcdef"
	url, stderr, stop := startDaemon(t, map[string]string{
		"RUNNEL_TOKEN": token, "RUNNEL_METRICS_ADDR": "127.0.0.1:0",
		"RUNNEL_AGENTS_DIR":             filepath.Join(dir, "agents"),
		"RUNNEL_HARNESS_CLAUDE_COMMAND": "/usr/bin/env FAKE_ACP_SCENARIO=" + scenario + " " + agent,
	}, nil)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	do := func(method, target, tok, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, target, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	native := func(text string) string {
		return `{"model":"openai/gpt-test","endpoint":{"baseUrl":"` + llm.URL + `/v1"},"secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},` +
			`"customTools":[{"name":"lookup","description":"Weather","readOnly":true,"inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},` +
			`{"name":"delete_file","description":"Delete","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
			`"toolCallback":{"endpoint":"` + callback.URL + `"},"messages":[{"role":"user","content":"` + text + `"}]}`
	}
	for _, c := range []struct{ body, status string }{
		{native("what is the weather in Paris"), `"status":"completed"`},
		{native("please delete q3.docx"), `"status":"paused"`},
		{native("please fail"), `"status":"failed"`},
		{`{"harness":"claude","model":"anthropic/claude-test","endpoint":{"baseUrl":"http://127.0.0.1:9"},"secrets":{"ANTHROPIC_API_KEY":"sk-ant-metrics"},"messages":[{"role":"user","content":"hi"}]}`, `"status":"completed"`},
	} {
		if code, body := do(http.MethodPost, url+"/run", token, c.body); !strings.Contains(body, c.status) {
			t.Fatalf("run: %d %s, want %s", code, body, c.status)
		}
	}
	// A run the platform cancels (POST /kill) while the model hangs.
	cancelled := make(chan string, 1)
	go func() {
		_, body := do(http.MethodPost, url+"/run", token, strings.Replace(native("please wait"), `"messages"`, `"sessionId":"sess-kill","messages"`, 1))
		cancelled <- body
	}()
	// Killed once its model call is under way, so the call is cut too.
	modelCalled := func() bool {
		for _, r := range llm.Requests() {
			if strings.Contains(string(r.Body), "please wait") {
				return true
			}
		}
		return false
	}
	// The bounds below only turn "never" into a failure instead of a hung
	// test; they time nothing.
	deadline := time.Now().Add(30 * time.Second)
	for !modelCalled() {
		if time.Now().After(deadline) {
			t.Fatal("the model never got the run to cancel")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, out := do(http.MethodPost, url+"/kill", token, `{"sessionId":"sess-kill"}`); !strings.Contains(out, `"killed":1`) {
		t.Fatalf("POST /kill: %s", out)
	}
	if body := <-cancelled; !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("the killed run answered %s", body)
	}
	// The server answers a killed run's client at once; the run itself
	// ends (and is counted) a moment later.
	for {
		_, text := do(http.MethodGet, url+"/metrics", token, "")
		if strings.Contains(text, "\nrunnel_active_runs 0\n") && strings.Contains(text, `status="cancelled"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled run was never counted:\n%s", text)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _ := do(http.MethodPost, url+"/run", token, `{"model":"openai/gpt-test","messages":[]}`); code != http.StatusBadRequest {
		t.Errorf("a request without messages got %d, want 400", code)
	}
	if code, _ := do(http.MethodPost, url+"/run", "", native("hi")); code != http.StatusUnauthorized {
		t.Errorf("a request without the token got %d, want 401", code)
	}

	if code, _ := do(http.MethodGet, url+"/metrics", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token on the main listener: %d, want 401", code)
	}
	code, withToken := do(http.MethodGet, url+"/metrics", token, "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	m := regexp.MustCompile(`"msg":"metrics listening","addr":"([^"]+)"`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", stderr)
	}
	code, open := do(http.MethodGet, "http://"+m[1]+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics listener: %d", code)
	}
	// Refusals counted by the time of the first scrape are in both.
	for _, text := range []string{withToken, open} {
		checkMetrics(t, text)
	}
	if strings.Contains(open, token) || strings.Contains(open, fakeKey) {
		t.Error("a secret is in the metrics")
	}
	stop()
	// Every log line of a run names its trace and span.
	runLines := 0
	for line := range strings.Lines(stderr.String()) {
		if strings.Contains(line, `"run_id":`) {
			runLines++
			if !regexp.MustCompile(`"trace_id":"[0-9a-f]{32}".*"span_id":"[0-9a-f]{16}"`).MatchString(line) {
				t.Errorf("a run's log line without trace_id and span_id: %s", line)
			}
		}
	}
	if runLines < 8 {
		t.Errorf("%d log lines of runs; want the start and end of each of the four", runLines)
	}
}

// checkMetrics checks one scrape against the runs the test made.
func checkMetrics(t *testing.T, text string) {
	t.Helper()
	value := func(series string) (float64, bool) {
		for line := range strings.Lines(text) {
			if rest, ok := strings.CutPrefix(line, series+" "); ok {
				v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	exactly := map[string]float64{
		`runnel_runs_total{harness="native",status="completed"}`:                 1,
		`runnel_runs_total{harness="native",status="paused"}`:                    1,
		`runnel_runs_total{harness="native",status="failed"}`:                    1,
		`runnel_runs_total{harness="native",status="cancelled"}`:                 1,
		`runnel_runs_total{harness="claude",status="completed"}`:                 1,
		`runnel_run_duration_seconds_count{harness="native",status="completed"}`: 1,
		`runnel_active_runs`:                        0,
		`runnel_pauses_total{kind="user_approval"}`: 1,
		`runnel_model_call_duration_seconds_count{outcome="ok",provider="openai"}`: 3,
		// The cut stream and the call the kill cancelled.
		`runnel_model_call_duration_seconds_count{outcome="error",provider="openai"}`: 2,
		`runnel_tool_call_duration_seconds_count{kind="callback",outcome="ok"}`:       1,
		`runnel_agent_process_starts_total{agent="claude"}`:                           1,
		`runnel_refusals_total{code="invalid_request"}`:                               1,
		// The /run and the /metrics without the token.
		`runnel_refusals_total{code="unauthorized"}`:                                             2,
		`runnel_model_time_to_first_token_seconds_bucket{provider="openai",le="+Inf"}`:           4,
		`runnel_run_duration_seconds_bucket{harness="native",status="paused",le="+Inf"}`:         1,
		`runnel_tool_call_duration_seconds_bucket{kind="callback",outcome="ok",le="+Inf"}`:       1,
		`runnel_model_call_duration_seconds_bucket{outcome="error",provider="openai",le="+Inf"}`: 2,
	}
	for series, want := range exactly {
		if got, ok := value(series); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	for _, series := range []string{
		`runnel_model_tokens_total{provider="openai",type="input"}`,
		`runnel_model_tokens_total{provider="openai",type="output"}`,
		`runnel_run_duration_seconds_sum{harness="native",status="completed"}`,
	} {
		if got, ok := value(series); !ok || got <= 0 {
			t.Errorf("%s = %v (present %v), want more than 0", series, got, ok)
		}
	}
	// The ACP run's workspace: isolated where the host can isolate, else
	// local; one either way.
	isolated, _ := value(`runnel_sandbox_starts_total{sandbox="isolated"}`)
	local, _ := value(`runnel_sandbox_starts_total{sandbox="local"}`)
	if isolated+local < 1 {
		t.Errorf("sandbox starts: isolated %v, local %v; the ACP run opened a workspace", isolated, local)
	}
}
