package redact

import (
	"encoding/json"
	"testing"

	"github.com/runnel/runnel"
)

// JSON a tool returns or a model sends is redacted as JSON: a secret is
// caught in any spelling inside a string, and the output stays valid JSON
// whatever punctuation the secret holds, or the whole event could not be
// marshalled (a 500, or an NDJSON stream without its result).
func TestJSONValues(t *testing.T) {
	tests := []struct{ name, secret, in, want string }{
		{"escaped slash", "sk-abc/def-0123", `{"k":"sk-abc\/def-0123"}`, `{"k":"[REDACTED]"}`},
		{"unicode escape in a key", "sk-abc/def-0123", `{"\u0073k-abc/def-0123":1}`, `{"[REDACTED]":1}`},
		{"surrogate pair", "pw-😀-secret", `["pw-\ud83d\ude00-secret"]`, `["[REDACTED]"]`},
		{"escaped quote and backslash", `pa"ss\word`, `{"k":"x pa\"ss\\word y"}`, `{"k":"x [REDACTED] y"}`},
		{"secret spanning tokens", `1,"b":2`, `{"o":{"a":1,"b":2},"keep":true}`, `{"o":"[REDACTED]","keep":true}`},
		{"secret closing a string", `x"}]`, `{"outer":[{"a":"x"}],"keep":"ok"}`, `{"outer":"[REDACTED]","keep":"ok"}`},
		{"secret in a number", "12345678", `{"pin":12345678,"n":1}`, `{"pin":"[REDACTED]","n":1}`},
		{"whole document", `{"a":"bcd"}`, ` {"a":"bcd"} `, ` "[REDACTED]" `},
		{"JSON inside a string", "sk-abc/def-0123", `{"body":"{\"token\":\"sk-abc\\/def-0123\"}"}`, `{"body":"{\"token\":\"[REDACTED]\"}"}`},
		{"punctuation inside a JSON string", `1,"b":2`, `{"body":"{\"a\":1,\"b\":2}","n":3}`, `{"body":"\"[REDACTED]\"","n":3}`},
		{"not JSON: redacted as text", "sk-abc/def-0123", `not json sk-abc/def-0123 {`, `not json [REDACTED] {`},
		{"untouched", "sk-abc/def-0123", `{"a": [1, 2.5e3, "x\u0041"], "b": null}`, `{"a": [1, 2.5e3, "x\u0041"], "b": null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.secret)
			e := r.Event(runnel.Event{Type: runnel.EventToolResult, ID: "c", Output: json.RawMessage(tt.in)})
			if got := string(e.Output); got != tt.want {
				t.Errorf("redacted\n %s\ngot\n %s\nwant\n %s", tt.in, got, tt.want)
			}
			if json.Valid([]byte(tt.in)) {
				if !json.Valid(e.Output) {
					t.Errorf("valid JSON became invalid: %s", e.Output)
				}
				if _, err := json.Marshal(e); err != nil {
					t.Errorf("the redacted event does not marshal: %v", err)
				}
			}
			if l := leak(string(e.Output), tt.secret); l != "" {
				t.Errorf("a spelling of the secret survived: %s", l)
			}
		})
	}
}

// A completed run whose tool echoed a secret full of JSON punctuation must
// still marshal: the platform gets a result, not a 500.
func TestResultWithPunctuationSecretMarshals(t *testing.T) {
	const secret = `0,"q":[1]}`
	r := New(secret)
	out := json.RawMessage(`{"q":{"0,\"q\":[1]}":2},"r":{"x":{"p":0,"q":[1]}}}`)
	call := json.RawMessage(`{"arg":"0,\"q\":[1]}"}`)
	it := runnel.Interaction{ID: "i", Kind: runnel.InteractionApproval, ToolCallID: "c", ToolName: "t", Input: json.RawMessage(`{"p":0,"q":[1]}`)}
	res := &runnel.Result{OK: true, Status: runnel.StatusCompleted,
		Messages: []runnel.Message{{Role: runnel.RoleTool, Content: []runnel.Block{
			{Type: runnel.BlockToolCall, ToolCallID: "c", ToolName: "t", Input: call},
			{Type: runnel.BlockToolResult, ToolCallID: "c", Output: out}}}},
		Events: []runnel.Event{{Type: runnel.EventToolResult, ID: "c", Output: out},
			{Type: runnel.EventInteractionRequest, Interaction: &it}},
		Interactions: []runnel.Interaction{it},
	}
	r.Result(res)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("the redacted result does not marshal: %v", err)
	}
	if l := leak(string(b), secret); l != "" {
		t.Errorf("%s\n%s", l, b)
	}
}
