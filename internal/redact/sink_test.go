package redact

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

// recorder is a Sink that keeps what it is given.
type recorder struct{ events []runnel.Event }

func (r *recorder) Emit(e runnel.Event) { r.events = append(r.events, e) }

// text joins the deltas of one id, as a client rebuilding the message does.
func (r *recorder) text(id string) string {
	var b strings.Builder
	for _, e := range r.events {
		if (e.Type == runnel.EventMessageDelta || e.Type == runnel.EventThoughtDelta) && e.ID == id {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func (r *recorder) types() []runnel.EventType {
	var out []runnel.EventType
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

// streamText emits text as deltas of size n for id.
func streamText(s runnel.Sink, typ runnel.EventType, id, text string, n int) {
	for i := 0; i < len(text); i += n {
		s.Emit(runnel.Event{Type: typ, ID: id, Delta: text[i:min(i+n, len(text))]})
	}
}

// A stream cut mid-secret (max tokens reached, the model stopped) ends
// with the held-back start of a secret: it must not be flushed in clear.
func TestSinkMasksSecretPrefixAtEnd(t *testing.T) {
	const secret = "sk-live-0123456789"
	for _, end := range []runnel.EventType{runnel.EventMessageEnd, runnel.EventDone, runnel.EventError} {
		t.Run(string(end), func(t *testing.T) {
			rec := &recorder{}
			s := New(secret).Sink(rec)
			s.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m"})
			streamText(s, runnel.EventMessageDelta, "m", "the key is sk-live-01", 4)
			s.Emit(runnel.Event{Type: end, ID: "m", StopReason: runnel.StopMaxSteps, Message: "cut"})
			if got, want := rec.text("m"), "the key is [REDACTED]"; got != want {
				t.Errorf("text = %q, want %q", got, want)
			}
			if last := rec.events[len(rec.events)-1]; last.Type != end {
				t.Errorf("last event = %s, want %s", last.Type, end)
			}
		})
	}
}

// A tail shorter than a secret's first minLen bytes is ordinary text.
func TestSinkFlushesShortTail(t *testing.T) {
	rec := &recorder{}
	s := New("sk-live-0123456789").Sink(rec)
	streamText(s, runnel.EventMessageDelta, "m", "ask sk-", 2)
	s.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m"})
	if got := rec.text("m"); got != "ask sk-" {
		t.Errorf("text = %q, want %q", got, "ask sk-")
	}
}

// A stream that ends without its parts' end events (an error mid-answer)
// still shows every part's text, redacted, before done.
func TestSinkFlushesPendingPartsAtDone(t *testing.T) {
	const secret = "sk-live-0123456789"
	rec := &recorder{}
	s := New(secret).Sink(rec)
	streamText(s, runnel.EventThoughtDelta, "t", "thinking about sk-live-0123456789 and s", 5)
	streamText(s, runnel.EventMessageDelta, "m", "answer: s", 3)
	s.Emit(runnel.Event{Type: runnel.EventError, Message: "provider failed"})
	s.Emit(runnel.Event{Type: runnel.EventDone, StopReason: runnel.StopError})
	if got, want := rec.text("t"), "thinking about [REDACTED] and s"; got != want {
		t.Errorf("thought = %q, want %q", got, want)
	}
	if got, want := rec.text("m"), "answer: s"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	types := rec.types()
	if diff := cmp.Diff([]runnel.EventType{runnel.EventError, runnel.EventDone}, types[len(types)-2:]); diff != "" {
		t.Errorf("the stream must end with error, done (-want +got):\n%s", diff)
	}
}

// Deltas split anywhere, even inside an escape sequence, give the text as
// Result shows it. The cases with odd secrets are what a randomized search
// found: each once made the stream differ from the whole, or leak.
func TestSinkSplitsAnywhere(t *testing.T) {
	tests := []struct {
		secrets []string
		text    string
	}{
		{[]string{"sk-abc/def-0123"}, "plain sk-abc/def-0123 then more"},
		{[]string{"sk-abc/def-0123"}, `json {"k":"sk-abc\/def-0123"} and \u0073k-abc/def-0123`},
		{[]string{"sk-abc/def-0123", "pw-😀-secret"}, `pct sk-abc%2fdef-0123 and pw-\ud83d\ude00-secret ✓`},
		{[]string{"sk-abc/def-0123"}, `double "{\"k\":\"sk-abc\\\/def-0123\"}" end`},
		{[]string{"sk-abc/def-0123"}, `no secret: sk-abc/def-012 \u00 \ud83d 100%`},
		{[]string{"sk-abc/def-0123"}, `cut short: sk-abc\/de`},
		// A secret read out of an escape the text had not finished.
		{[]string{`bu0u\`}, `bu0u%5Cbu0u\\u0062\u0075\u0030\u0075\u005Cbu0u\\\\bu0u\\\`},
		// A percent escape whose second half was still an unfinished \u.
		{[]string{`ab/c"d`}, `"c"d\u0061\u0062\u002F\u0063\u0022\u0064"%\u0061\u0062\u002F\u0063\u0022\u0064\\`},
		// A secret ending in a backslash, read with the next byte as \".
		{[]string{`"as1😀+/ "😀\`}, `"}"}\"as1😀+/ \"😀\\"as1😀+/ "😀\"\ud83d `},
		// Secrets side by side, the first ending inside an escape.
		{[]string{`"0E\`}, `\"0E\\\"0E\\\"0E\\"0plain E\\u0022\u0030\u0045\u005C"`},
		// A whole secret, then escapes left unfinished at the end.
		{[]string{"a,é%:"}, "a,é%:a,\xc3\\\\a,é%:\\u00\\ud83d"},
		{[]string{`]R\u`}, `]R\\u%5DR%5Cu]R\\\\uplain \u00]R\u\\`},
		// The start of a secret cut short at the end falls inside an
		// escape (\u005C then b, read as \b): the escaped secret before it
		// must not read whole once the tail is a marker.
		{[]string{":bk1u", `bEEab:ab\`}, `:bk1u%2\\u0062\u0045\u0045\u0061\u0062\u003A\u0061\u0062\u005CbEEa%2`},
		{[]string{`]\]R1" "u]b`, `b:R:Es:\`, `Bearer b:R:Es:\`}, `\Es:\\u0062\u003a\u0052\u003a\u0045\u0073\u003a\u005cb:R:`},
		{[]string{`s \u\😀u`}, `s+%5Cu%5C%F0%9F%98%80us \u\\u0073\u0020\u005c\u0075\u005c\ud83d\ude00\u0075xs \\u\\😀us \u\\u00s \u\`},
	}
	for _, tt := range tests {
		r := New(tt.secrets...)
		want := r.final(tt.text)
		if l := leak(want, tt.secrets...); l != "" {
			t.Errorf("%q redacted whole: %s\n%q", tt.text, l, want)
		}
		for _, split := range splits(len(tt.text)) {
			rec := &recorder{}
			s := r.Sink(rec)
			for i := 0; i < len(split)-1; i++ {
				s.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m", Delta: tt.text[split[i]:split[i+1]]})
			}
			s.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m"})
			if got := rec.text("m"); got != want {
				t.Errorf("%q split at %v\n got %q\nwant %q", tt.text, split, got, want)
			}
		}
	}
}

// splits lists ways to cut n bytes into deltas: every size from 1 to 7, and
// every single cut and every pair of cuts a few bytes apart.
func splits(n int) [][]int {
	var out [][]int
	for size := 1; size <= 7; size++ {
		var cuts []int
		for i := 0; i < n; i += size {
			cuts = append(cuts, i)
		}
		out = append(out, append(cuts, n))
	}
	for a := 1; a < n; a++ {
		out = append(out, []int{0, a, n})
		for b := a + 1; b < min(n, a+8); b++ {
			out = append(out, []int{0, a, b, n})
		}
	}
	return out
}
