package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/conformance"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/server"
)

// TestAgentaV0113GoldenRequests sends each request an Agenta v0.113
// deployment sends (shared/conformance/agenta-v0.113) to `runnel serve`,
// as that deployment does: NDJSON, bearer token. As sent, each names an
// ACP harness this build does not have, and is refused inside the stream
// with a sentence the person reads. With the harness set to native and the
// model endpoint pointed at the scripted model, each runs, and its result
// carries every field of the golden result with the same meaning.
func TestAgentaV0113GoldenRequests(t *testing.T) {
	const token = "agenta-runner-token-0123456789"
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{Reply: llmtest.Reply{Text: "Hello!", Usage: &llmtest.Usage{Input: 10, Output: 5}}},
	}})
	defer llm.Close()
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("ANTHROPIC_API_KEY=sk-ant-operator-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _, _ := startDaemon(t, map[string]string{"RUNNEL_TOKEN": token, "RUNNEL_PROVIDER_KEYS_FILE": keys}, nil)
	var golden map[string]any
	raw, err := conformance.Read("agenta-v0.113/run_result.ok.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}

	for _, file := range []string{"run_request.pi_core.json", "run_request.claude.json", "run_request.codex.json", "run_request.attachment.json"} {
		t.Run(file, func(t *testing.T) {
			raw, err := conformance.Read("agenta-v0.113/" + file)
			if err != nil {
				t.Fatal(err)
			}
			var req map[string]any
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatal(err)
			}
			harness := req["harness"].(string)

			// As sent: refused inside the stream, readably.
			events, res := postStream(t, url, token, raw)
			if res.OK || res.ErrorCode != runnel.CodeInvalidRequest || !strings.Contains(res.Error, `Harness "`+harness+`" is not available`) {
				t.Fatalf("as sent: result %+v, want the harness refused", res)
			}
			if len(events) != 2 || events[0].Type != runnel.EventError || events[0].Message != res.Error {
				t.Errorf("as sent: events %+v, want the refusal as an error event", events)
			}

			// On the native harness, against the scripted model.
			req["harness"] = "native"
			delete(req, "sandboxPermission") // a network policy local cannot enforce
			mc := req["modelConnection"].(map[string]any)
			base := llm.URL
			if mc["provider"] != "anthropic" {
				base += "/v1"
			}
			mc["endpoint"] = map[string]any{"baseUrl": base}
			body, _ := json.Marshal(req)
			resp := postJSON(t, url, token, body)
			var got map[string]any
			if err := json.Unmarshal(resp, &got); err != nil {
				t.Fatalf("%v: %s", err, resp)
			}
			if got["ok"] != true || got["output"] != "Hello!" {
				t.Fatalf("native: %s", resp)
			}
			requireShape(t, golden, got)
			var done map[string]any
			for _, e := range got["events"].([]any) {
				if e := e.(map[string]any); e["type"] == "done" {
					done = e
				}
			}
			if tp, ok := req["context"].(map[string]any); ok && tp != nil {
				if done["traceId"] != "0af7651916cd43dd8448eb211c80319c" || got["traceId"] != done["traceId"] {
					t.Errorf("done %v, result traceId %v: want the traceparent's trace id on both", done, got["traceId"])
				}
			}
			if file == "run_request.attachment.json" {
				notices, _ := got["notices"].([]any)
				if len(notices) != 1 || !strings.Contains(notices[0].(string), "photo.png (image/png) was not given to the model") {
					t.Errorf("notices %v, want the attachment reported by name", notices)
				}
			}
			for _, secret := range []string{"sk-ant", "sk-openai", "sk-test", "tok-123", "sk-ant-operator-0123"} {
				if strings.Contains(string(resp), secret) {
					t.Errorf("the result carries the secret %q", secret)
				}
			}
		})
	}
}

// postStream posts body as a platform's stream client does and returns
// the events and the closing result.
func postStream(t *testing.T, url, token string, body []byte) ([]runnel.Event, *runnel.Result) {
	t.Helper()
	resp := post(t, url, token, body, "application/x-ndjson")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: a stream client would show only that", resp.StatusCode)
	}
	var events []runnel.Event
	var res *runnel.Result
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec server.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Event != nil {
			events = append(events, *rec.Event)
		}
		if rec.Result != nil {
			res = rec.Result
		}
	}
	if res == nil {
		t.Fatal("the stream has no result record")
	}
	return events, res
}

// postJSON posts body for one JSON answer and returns it.
func postJSON(t *testing.T, url, token string, body []byte) []byte {
	t.Helper()
	out, err := io.ReadAll(io.LimitReader(post(t, url, token, body, "").Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// post posts body to /run on a connection of its own, closed with the
// test, so the leak checks see no idle socket left behind.
func post(t *testing.T, url, token string, body []byte, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/run", bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
