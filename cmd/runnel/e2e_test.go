package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/server"
)

// These tests run the real run manager against the scripted fake model
// server over real sockets: the whole binary but the provider.

const fakeKey = "sk-e2e-secret-value-0123456789"

func pingRequest(baseURL, text string) string {
	return `{"model":"openai/gpt-test","endpoint":{"baseUrl":"` + baseURL + `/v1"},` +
		`"secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},"tools":[],` +
		`"messages":[{"role":"user","content":"` + text + `"}]}`
}

func TestRunWithTheRealManager(t *testing.T) {
	llm := llmtest.NewServer(llmtest.DefaultScript())
	defer llm.Close()
	const want = "Hello from mockllm. You said: ping"

	got := runMain(t, nil, pingRequest(llm.URL, "ping"), nil, "run")
	if got.Code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", got.Code, got.Stdout, got.Stderr)
	}
	var res runnel.Result
	if err := json.Unmarshal([]byte(got.Stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Output != want || res.Status != runnel.StatusCompleted {
		t.Errorf("result %q %q, want completed %q", res.Status, res.Output, want)
	}
	if len(res.Events) == 0 || res.Events[0].Type != runnel.EventMessage || res.Events[0].Text != want {
		t.Errorf("events %+v, want the coalesced message first", res.Events)
	}

	got = runMain(t, nil, pingRequest(llm.URL, "ping"), nil, "run", "-", "--stream")
	records := strings.Split(strings.TrimSuffix(got.Stdout, "\n"), "\n")
	var last server.Record
	if err := json.Unmarshal([]byte(records[len(records)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if got.Code != exitOK || last.Kind != server.RecordResult || last.Result.Output != want {
		t.Errorf("exit %d, last record %s", got.Code, records[len(records)-1])
	}
	if strings.Contains(got.Stdout+got.Stderr, fakeKey) {
		t.Error("the provider key reached the output or the logs")
	}
}

func TestServeWithTheRealManager(t *testing.T) {
	llm := llmtest.NewServer(llmtest.DefaultScript())
	defer llm.Close()
	const token = "e2e-token-abcdef0123456789"
	url, stderr, stop := startDaemon(t, map[string]string{"RUNNEL_TOKEN": token}, nil)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	post := func(body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/run", strings.NewReader(body))
		req.Header.Set("X-Runnel-Token", token)
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := post(pingRequest(llm.URL, "hello there"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var kinds []string
	var last server.Record
	for line := range strings.Lines(body) {
		if line == "\n" {
			continue
		}
		var rec server.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != rec.Kind {
			kinds = append(kinds, rec.Kind)
		}
		last = rec
	}
	if diff := cmp.Diff([]string{server.RecordEvent, server.RecordResult}, kinds); diff != "" {
		t.Errorf("record kinds (-want +got):\n%s", diff)
	}
	if last.Result == nil || !last.Result.OK || last.Result.Output != "Hello from mockllm. You said: hello there" {
		t.Fatalf("result record %+v", last.Result)
	}
	// The server's request id names the run too, in the result and the logs.
	if id := resp.Header.Get("X-Request-Id"); id == "" || last.Result.RequestID != id || !strings.Contains(stderr.String(), `"run_id":"`+id+`"`) {
		t.Errorf("X-Request-Id %q, result requestId %q: the run must carry the request's id", id, last.Result.RequestID)
	}

	// /v1/capabilities says what this host's local sandbox guarantees.
	creq, _ := http.NewRequest(http.MethodGet, url+"/v1/capabilities", nil)
	creq.Header.Set("X-Runnel-Token", token)
	cresp, err := client.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	var caps server.Capabilities
	err = json.NewDecoder(cresp.Body).Decode(&caps)
	cresp.Body.Close()
	if err != nil || caps.Sandbox == nil || caps.Sandbox.ProcessContainment == "" || caps.Sandbox.Guarantee == "" ||
		!strings.HasPrefix(caps.Sandbox.Guarantee, caps.Sandbox.ProcessContainment+":") || caps.Sandbox.LocalSeparation == "" {
		t.Errorf("capabilities %+v (%v), want the sandbox's containment and separation", caps.Sandbox, err)
	}
	// And what bounds each isolated command, and how this host enforces
	// them (CI's host: the cgroup v1 pids and memory controllers).
	if slices.Contains(caps.Sandbox.Backends, "isolated") {
		if caps.Sandbox.Default != "isolated" || caps.Sandbox.LocalAllowed || len(caps.Sandbox.IsolatedPolicies["network"]) != 3 {
			t.Errorf("sandbox %+v: want isolated the default, local not allowed, and the policies it enforces", caps.Sandbox)
		}
		l := caps.Sandbox.IsolatedLimits
		if l["processes"].Limit != 1024 || l["memoryBytes"].Limit != 4<<30 || l["cpuSeconds"] != (server.LimitInfo{Limit: 600, EnforcedBy: "rlimit"}) {
			t.Errorf("isolatedLimits %+v, want the defaults", l)
		}
		for _, k := range []string{"processes", "memoryBytes"} {
			by := l[k].EnforcedBy
			cgroup := by == "cgroup v2" || by == "cgroup v1"
			if !cgroup && (by != "not enforced on this host" || os.Getenv("RUNNEL_TEST_REQUIRE_ISOLATION") != "") {
				t.Errorf("isolatedLimits[%s] enforced by %q", k, by)
			}
		}
	}
	if os.Geteuid() == 0 && !strings.HasPrefix(caps.Sandbox.LocalSeparation, "none: runnel runs as root") {
		t.Errorf("as root, localSeparation %q, want it to say a run can reach runnel", caps.Sandbox.LocalSeparation)
	}
	if os.Geteuid() == 0 && !strings.Contains(stderr.String(), "runnel runs as root") {
		t.Error("runnel runs as root and did not warn at start-up")
	}

	// The real manager refuses a request with no user text before running.
	// On a stream the refusal comes inside it, where a stream client reads
	// the sentence instead of dropping a 4xx's body.
	resp, body = post(`{"model":"openai/gpt-test","secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},"messages":[]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `{"type":"error","message":"No user message to send (prompt/messages empty).","code":"invalid_request"}`) ||
		!strings.Contains(body, `"ok":false,"status":"failed"`) || !strings.Contains(body, `"errorCode":"invalid_request"`) {
		t.Errorf("refusal answered %d: %s", resp.StatusCode, body)
	}

	if code := stop(); code != exitOK {
		t.Errorf("exit %d", code)
	}
	if strings.Contains(stderr.String(), fakeKey) || strings.Contains(stderr.String(), token) {
		t.Error("a secret reached the logs")
	}
}
