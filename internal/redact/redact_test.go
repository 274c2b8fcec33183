package redact

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// redactJSON applies r to every string in a decoded JSON value.
func redactJSON(r *Redactor, v any) any {
	switch v := v.(type) {
	case string:
		return r.String(v)
	case []any:
		for i := range v {
			v[i] = redactJSON(r, v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = redactJSON(r, v[k])
		}
	}
	return v
}

func TestKnownValueGolden(t *testing.T) {
	raw, err := conformance.Read("agenta/redaction.known_value.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		KnownSecrets []string `json:"knownSecrets"`
		Input        any      `json:"input"`
		Expected     any      `json:"expected"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	// The golden file uses its project's marker; runnel's differs but must
	// sit in exactly the same places.
	marker := regexp.MustCompile(`\[ag:redacted:secret:[^\]]*\]`)
	wantJSON, _ := json.Marshal(golden.Expected)
	wantJSON = marker.ReplaceAll(wantJSON, []byte(Marker))
	var want any
	if err := json.Unmarshal(wantJSON, &want); err != nil {
		t.Fatal(err)
	}
	got := redactJSON(New(golden.KnownSecrets...), golden.Input)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("redaction mismatch (-want +got):\n%s", diff)
	}
}

func TestForms(t *testing.T) {
	r := New("s3cr3t/value+1", "Bearer tok-abcdef")
	tests := []struct{ in, want string }{
		{"plain s3cr3t/value+1 x", "plain [REDACTED] x"},
		{"q=s3cr3t%2Fvalue%2B1", "q=[REDACTED]"},
		{"path s3cr3t%2Fvalue+1", "path [REDACTED]"},
		{"auth: Bearer tok-abcdef", "auth: [REDACTED]"},
		{"bare tok-abcdef", "bare [REDACTED]"},
		{"nothing here", "nothing here"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJSONStaysValid(t *testing.T) {
	r := New(`pa"ss\word`)
	in, _ := json.Marshal(map[string]string{"k": `x pa"ss\word y`})
	out := r.JSON(in)
	var v map[string]string
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("redacted JSON does not parse: %v", err)
	}
	if v["k"] != "x [REDACTED] y" {
		t.Errorf("got %q", v["k"])
	}
}

func TestShortValuesIgnored(t *testing.T) {
	r := New("ab", "")
	if !r.Empty() || r.String("ab cd") != "ab cd" {
		t.Errorf("values shorter than %d bytes must not be treated as secrets", minLen)
	}
}

// A secret streamed across several deltas must not reach the sink in
// pieces, and the text around it must arrive whole and in order.
func TestSinkCatchesSplitSecret(t *testing.T) {
	const secret = "sk-live-0123456789"
	r := New(secret)
	var got []runnel.Event
	s := r.Sink(runnel.SinkFunc(func(e runnel.Event) { got = append(got, e) }))
	text := "key is " + secret + " — done ✓"
	s.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m"})
	for i := 0; i < len(text); i += 3 {
		s.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m", Delta: text[i:min(i+3, len(text))]})
	}
	s.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m"})

	var joined strings.Builder
	for _, e := range got {
		if strings.Contains(e.Delta, "sk-") || strings.Contains(e.Delta, "0123") {
			t.Errorf("a delta carries part of the secret: %q", e.Delta)
		}
		joined.WriteString(e.Delta)
	}
	if want := "key is [REDACTED] — done ✓"; joined.String() != want {
		t.Errorf("joined deltas = %q, want %q", joined.String(), want)
	}
	if last := got[len(got)-1]; last.Type != runnel.EventMessageEnd {
		t.Errorf("last event = %s, want message_end", last.Type)
	}
}

func TestResultAndEvent(t *testing.T) {
	const secret = "tok-9f8e7d6c5b4a"
	r := New(secret)
	res := &runnel.Result{
		Output:   "said " + secret,
		Error:    "failed with " + secret,
		Messages: []runnel.Message{{Role: runnel.RoleTool, Content: []runnel.Block{{Type: runnel.BlockToolResult, Output: runnel.TextOutput(secret)}}}},
		Events:   []runnel.Event{{Type: runnel.EventToolCall, ID: "c", Name: "x", Input: json.RawMessage(`{"a":"` + secret + `"}`)}},
	}
	r.Result(res)
	b, _ := json.Marshal(res)
	if r.Contains(b) {
		t.Error("the result still holds the secret")
	}
}

func TestHandler(t *testing.T) {
	const secret = "hunter2-the-password"
	var buf bytes.Buffer
	l := slog.New(New(secret).Handler(slog.NewJSONHandler(&buf, nil)))
	l.With("k", secret).Info("connecting with "+secret, slog.Group("g", "inner", secret), "err", errString(secret))
	if strings.Contains(buf.String(), secret) {
		t.Error("the log line still holds the secret")
	}
	if !strings.Contains(buf.String(), Marker) {
		t.Error("the log line lost the marker")
	}
}
