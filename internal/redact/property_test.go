package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/runnel/runnel"
)

// The fuzz targets start from bytes; these properties start from what
// breaks a redactor: secrets made of escape and JSON punctuation, written
// in every spelling, next to stray escapes and markers, split anywhere.
// A search like this, run longer, found the cases pinned in
// TestSinkSplitsAnywhere and TestStringLeavesNothingToReadAfresh.

// propSecret draws a secret from characters that escape, percent-encode
// or close JSON.
func propSecret(rng *rand.Rand) string {
	alpha := []string{"a", "b", "s", "k", "-", "/", `"`, `\`, "%", "+", " ", "😀", "é", "u", "0", "1", ",", "}", ":", "[", "]", "R", "E"}
	var b strings.Builder
	for range 4 + rng.IntN(8) {
		b.WriteString(alpha[rng.IntN(len(alpha))])
	}
	if s := strings.TrimSpace(b.String()); len(s) >= minLen {
		return s
	}
	return `ab/c"d`
}

// propText joins pieces of secret in many spellings with stray escapes
// and markers.
func propText(rng *rand.Rand, secret string) string {
	body := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	frags := []string{"plain ", " ", `\`, `\\`, `\u00`, `\ud83d`, "%", "%2", Marker, "[RED", `"`, "é", `{"k":"`, `"}`,
		secret, secret[:len(secret)/2], secret[len(secret)/2:], url.QueryEscape(secret), url.PathEscape(secret),
		body(secret), body(body(secret)), escapeEvery(secret, "%04x"), escapeEvery(secret, "%04X"),
		strings.ReplaceAll(body(secret), "/", `\/`), strings.ToLower(url.QueryEscape(secret))}
	var b strings.Builder
	for range 1 + rng.IntN(8) {
		b.WriteString(frags[rng.IntN(len(frags))])
	}
	return b.String()
}

// escapeEvery spells every character of s as \uXXXX (surrogate pairs
// beyond the BMP).
func escapeEvery(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u`+format, u)
		}
	}
	return b.String()
}

func TestPropertyText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1500 {
		secret, other := propSecret(rng), propSecret(rng)
		values := []string{secret, other}
		switch rng.IntN(3) {
		case 0:
			values = append(values, "Bearer "+other)
		case 1:
			values = append(values, "postgres://u:"+other+"@h/db")
		}
		r := New(values...)
		text := propText(rng, secret) + propText(rng, other)
		if out := r.String(text); leak(out, secret, other) != "" {
			t.Fatalf("String: %s\nvalues %q\ntext %q\nout %q", leak(out, secret, other), values, text, out)
		}
		rec := &recorder{}
		s := r.Sink(rec)
		for i := 0; i < len(text); {
			n := 1 + rng.IntN(6)
			s.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m", Delta: text[i:min(i+n, len(text))]})
			i += n
		}
		s.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m"})
		got := rec.text("m")
		if l := leak(got, secret, other); l != "" {
			t.Fatalf("Sink: %s\nvalues %q\ntext %q\ngot %q", l, values, text, got)
		}
		if want := r.final(text); got != want && !strings.Contains(text, Marker) {
			t.Fatalf("the deltas joined differ from the text redacted whole\nvalues %q\ntext %q\n got %q\nwant %q", values, text, got, want)
		}
	}
}

// propValue draws a JSON value whose strings, keys and nested documents
// hold pieces of secret.
func propValue(rng *rand.Rand, secret string, depth int) any {
	switch k := rng.IntN(7); {
	case depth > 3 || k == 0:
		return propText(rng, secret)
	case k == 1:
		return json.Number(fmt.Sprint(rng.IntN(100000)))
	case k == 2:
		return []any{propValue(rng, secret, depth+1), propValue(rng, secret, depth+1)}
	case k == 3:
		inner, _ := json.Marshal(propValue(rng, secret, depth+1))
		return string(inner)
	case k == 4:
		return nil
	default:
		return map[string]any{propText(rng, secret): propValue(rng, secret, depth+1), "n": propValue(rng, secret, depth+1)}
	}
}

func TestPropertyJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	punct := []string{"1", "2", ",", ":", `"`, "{", "}", "[", "]", "a", "b", `\`, "/", " ", "n", "u", "l"}
	for range 500 {
		secret := propSecret(rng)
		if rng.IntN(2) == 0 {
			var b strings.Builder
			for range 4 + rng.IntN(5) {
				b.WriteString(punct[rng.IntN(len(punct))])
			}
			if s := strings.TrimSpace(b.String()); len(s) >= minLen {
				secret = s
			}
		}
		doc, _ := json.Marshal(propValue(rng, secret, 0))
		if rng.IntN(2) == 0 {
			var ind bytes.Buffer
			_ = json.Indent(&ind, doc, "", " ")
			doc = ind.Bytes()
		}
		out := New(secret).JSON(doc)
		if !json.Valid(out) {
			t.Fatalf("valid JSON became invalid\nsecret %q\n in %s\nout %s", secret, doc, out)
		}
		if l := leak(string(out), secret); l != "" {
			t.Fatalf("%s\nsecret %q\n in %s\nout %s", l, secret, doc, out)
		}
	}
}
