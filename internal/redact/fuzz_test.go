package redact

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runnel/runnel"
)

// Secrets arrive in a JSON request, so they are valid UTF-8; the fuzz
// targets skip others.

// FuzzJSON: whatever the secret and the document, valid JSON stays valid
// and no spelling of the secret survives in any reading of the output.
// Invalid JSON is redacted as text, under the same rule.
func FuzzJSON(f *testing.F) {
	seeds := []struct{ secret, doc string }{
		{"sk-abc/def-0123", `{"k":"sk-abc\/def-0123"}`},
		{"sk-abc/def-0123", `{"\u0073k-abc/def-0123":1}`},
		{"pw-😀-secret", `["pw-\ud83d\ude00-secret"]`},
		{`pa"ss\word`, `{"k":"x pa\"ss\\word y"}`},
		{`1,"b":2`, `{"o":{"a":1,"b":2},"keep":true}`},
		{`x"}]`, `{"outer":[{"a":"x"}],"keep":"ok"}`},
		{"12345678", `{"pin":12345678,"n":1}`},
		{"sk-abc/def-0123", `{"body":"{\"token\":\"sk-abc\\/def-0123\"}"}`},
		{`1,"b":2`, `{"body":"{\"a\":1,\"b\":2}","n":3}`},
		{"sk-abc/def-0123", `not json sk-abc/def-0123 {`},
		{"null", `[null,{"a":null}]`},
		{"ACTED", `{"a":"ACTED","b":"[REDACTED]"}`},
		{`a\u0041bc`, `{"k":"a\u0041bc","j":"a\\u0041bc"}`},
		{"sk-abc/def-0123", `"\"{\\\"k\\\":\\\"sk-abc\\\\\\/def-0123\\\"}\""`},
		{`bE😀:😀ub/k0\`, `["bE😀:😀ub/k0\\bE😀:😀ub\\/k0\\\\"]`},
		{`0,"q":[1]}`, `{"q":{"0,\"q\":[1]}":2},"r":{"x":{"p":0,"q":[1]}}}`},
	}
	for _, s := range seeds {
		f.Add(s.secret, s.doc)
	}
	f.Fuzz(func(t *testing.T, secret, doc string) {
		if !utf8.ValidString(secret) {
			t.Skip()
		}
		r := New(secret)
		out := r.JSON(json.RawMessage(doc))
		if json.Valid([]byte(doc)) && !json.Valid(out) {
			t.Fatalf("valid JSON became invalid:\n in %s\nout %s", doc, out)
		}
		if l := leak(string(out), secret); l != "" {
			t.Fatalf("%s\n in %s\nout %s", l, doc, out)
		}
	})
}

// FuzzSink: however a text is split into deltas, and however its part
// ends, the deltas joined show no spelling of the secret, and are the
// text as Result shows it.
func FuzzSink(f *testing.F) {
	texts := []string{
		"key is sk-abc/def-0123 — done ✓",
		`json {"k":"sk-abc\/def-0123"} and \u0073k-abc/def-0123`,
		`pct sk-abc%2fdef-0123 and pw-\ud83d\ude00-secret ✓`,
		`double "{\"k\":\"sk-abc\\\/def-0123\"}" end`,
		`cut short: sk-abc\/de`,
		`cut in an escape: sk-abc\u00`,
	}
	for i, text := range texts {
		f.Add("sk-abc/def-0123", text, []byte{byte(i), 3, 17, 1}, byte(i))
	}
	f.Add("pw-😀-secret", `pw-\ud83d\ude00-secret`, []byte{0, 5, 6}, byte(1))
	// What a randomized search found against earlier versions.
	f.Add(`bu0u\`, `bu0u%5Cbu0u\\u0062\u0075\u0030\u0075\u005Cbu0u\\\\bu0u\\\`, []byte{36}, byte(0))
	f.Add(`ab/c"d`, `"c"d\u0061\u0062\u002F\u0063\u0022\u0064"%\u0061\u0062\u002F\u0063\u0022\u0064\\`, []byte{2, 5}, byte(0))
	f.Add(`"0E\`, `\"0E\\\"0E\\\"0E\\"0plain E\\u0022\u0030\u0045\u005C"`, []byte{3, 1}, byte(0))
	f.Add(`]R\u`, `]R\\u%5DR%5Cu]R\\\\uplain \u00]R\u\\`, []byte{5, 5, 2, 3, 5, 4, 3, 0, 0}, byte(0))
	f.Fuzz(func(t *testing.T, secret, text string, cuts []byte, end byte) {
		if !utf8.ValidString(secret) {
			t.Skip()
		}
		r := New(secret)
		rec := &recorder{}
		s := r.Sink(rec)
		for i, k := 0, 0; i < len(text); k++ {
			n := 1
			if len(cuts) > 0 {
				n += int(cuts[k%len(cuts)]) % 24
			}
			s.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m", Delta: text[i:min(i+n, len(text))]})
			i += n
		}
		switch end % 3 {
		case 0:
			s.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m"})
		case 1:
			s.Emit(runnel.Event{Type: runnel.EventDone, StopReason: runnel.StopEndTurn})
		case 2:
			s.Emit(runnel.Event{Type: runnel.EventError, Message: "cut"})
		}
		got := rec.text("m")
		if l := leak(got, secret); l != "" {
			t.Fatalf("%s\ntext %q\n got %q", l, text, got)
		}
		// A marker already in the text hides what overlaps it only once
		// whole; a delta may hold half of one.
		if want := r.final(text); got != want && !strings.Contains(text, Marker) {
			t.Fatalf("the deltas joined differ from the text redacted whole\ntext %q\n got %q\nwant %q", text, got, want)
		}
	})
}
