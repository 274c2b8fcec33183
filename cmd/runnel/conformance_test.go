package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/conformance"
	"github.com/runnel/runnel/internal/llmtest"
)

// requireShape fails t where got lacks the shape of want.
func requireShape(t *testing.T, want, got map[string]any) {
	t.Helper()
	for _, d := range conformance.ShapeDiff(want, got) {
		t.Error(d)
	}
}

// TestGoldenResultShapes runs real requests through `runnel run` and checks
// the results carry the fields of the platform's golden results
// (shared/conformance/agenta/run_result.*.json) with the same meaning.
func TestGoldenResultShapes(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastUserContains: "explode"}, Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400}},
		{When: llmtest.Match{}, Reply: llmtest.Reply{Text: "Hello!", Usage: &llmtest.Usage{Input: 10, Output: 5}}},
	}})
	defer llm.Close()
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	request := func(text string) string {
		return fmt.Sprintf(`{"model":"openai/gpt-5.5","endpoint":{"baseUrl":%q},"tools":[],"sessionId":"sess-42",`+
			`"context":{"propagation":{"traceparent":"00-%s-b7ad6b7169203331-01"}},`+
			`"messages":[{"role":"user","content":%q}]}`, llm.URL+"/v1", traceID, text)
	}
	golden := func(name string) map[string]any {
		raw, err := conformance.Read("agenta/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	ok := runMain(t, nil, request("hi"), nil, "run")
	var got map[string]any
	if err := json.Unmarshal([]byte(ok.Stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, ok.Stdout)
	}
	want := golden("run_result.ok.json")
	requireShape(t, want, got)
	for _, k := range []string{"ok", "output", "sessionId", "stopReason", "traceId"} {
		if k == "traceId" {
			if got[k] != traceID {
				t.Errorf("traceId = %v, want the traceparent's trace id", got[k])
			}
			continue
		}
		if k != "sessionId" && got[k] != want[k] {
			t.Errorf("%s = %v, the golden result says %v for the same run", k, got[k], want[k])
		}
	}
	if got["sessionId"] != "sess-42" {
		t.Errorf("sessionId = %v, want it echoed", got["sessionId"])
	}
	if diff := fmt.Sprint(got["usage"]); !strings.Contains(diff, "input:10") || !strings.Contains(diff, "output:5") || !strings.Contains(diff, "total:15") {
		t.Errorf("usage = %v, want input 10, output 5, total 15", got["usage"])
	}
	var types []string
	for _, e := range got["events"].([]any) {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	for _, ty := range []string{"message", "usage", "done"} {
		if !slices.Contains(types, ty) {
			t.Errorf("events %v lack a %q event", types, ty)
		}
	}

	failed := runMain(t, nil, request("explode"), nil, "run")
	if failed.Code != exitFailure {
		t.Errorf("exit %d for a failed run, want %d", failed.Code, exitFailure)
	}
	got = nil
	if err := json.Unmarshal([]byte(failed.Stdout), &got); err != nil {
		t.Fatal(err)
	}
	requireShape(t, golden("run_result.error.json"), got)
	if got["ok"] != false || got["errorCode"] != "provider_error" || got["status"] != "failed" {
		t.Errorf("failed result: ok %v errorCode %v status %v", got["ok"], got["errorCode"], got["status"])
	}
}
