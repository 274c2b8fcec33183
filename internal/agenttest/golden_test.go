package agenttest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/conformance"
	"github.com/runnel/runnel/internal/llmtest"
)

// The requests an Agenta v0.113 deployment sends for its three harnesses
// (shared/conformance/agenta-v0.113) run end to end on the real agents,
// with only the model endpoint pointed at the scripted model, and answer
// with every field of the golden result, meaning the same.
//
// pi_core declares a network policy (off) that the local sandbox cannot
// enforce, and is refused as sent, saying so; it runs without it. It uses
// provider openai-codex: Pi calls the OpenAI Responses API.
func TestAgentaGoldenRequests(t *testing.T) {
	var golden map[string]any
	raw, err := conformance.Read("agenta-v0.113/run_result.ok.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, harness string }{
		{"run_request.pi_core.json", "pi"}, {"run_request.claude.json", "claude"}, {"run_request.codex.json", "codex"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := agentsDir(t, tc.harness)
			llm := llmtest.NewServer(script())
			defer llm.Close()
			p := serve(t, dir)
			defer p.checkClean(t, dir)
			raw, err := conformance.Read("agenta-v0.113/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			var req map[string]any
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatal(err)
			}
			mc := req["modelConnection"].(map[string]any)
			base := llm.URL
			if mc["provider"] != "anthropic" {
				base += "/v1"
			}
			mc["endpoint"] = map[string]any{"baseUrl": base}
			if _, ok := req["sandboxPermission"]; ok {
				// Agenta asks for "local", which this runnel (with the
				// isolated sandbox, and local not allowed) runs isolated:
				// there, network "off" would leave the agent without its
				// model, and the allowlist is never widened for it.
				want := `The sandbox's network is "off", but harness "` + tc.harness + `" runs inside it and must reach its model at 127.0.0.1`
				if !canIsolate() {
					want = "Network sandbox policy is not enforceable on the local sandbox"
				}
				got := postJSON(t, p, req)
				if got["ok"] != false || !strings.Contains(got["error"].(string), want) {
					t.Fatalf("with its network policy: %v", got)
				}
				delete(req, "sandboxPermission")
			}
			got := postJSON(t, p, req)
			if got["ok"] != true || got["status"] != "completed" || got["output"] != "Hello from the scripted model." {
				t.Fatalf("result %v", got)
			}
			for _, d := range conformance.ShapeDiff(golden, got) {
				t.Error(d)
			}
		})
	}
}

// postJSON posts req for a one-shot JSON result.
func postJSON(t *testing.T, p *runnelProc, req map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.url+"/run", bytes.NewReader(body))
	hr.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, out)
	}
	return got
}
