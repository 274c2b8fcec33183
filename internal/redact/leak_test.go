package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the tests' own idea of "a secret leaked", written apart from
// the redactor so a shared mistake cannot hide a leak: every spelling of a
// value a reader could turn back into it, looked for in every reading of the
// output a reader could make.

// forms lists the spellings of the secret value v, as a reader meets them
// before undoing any escaping: raw, URL-encoded, and JSON-escaped with and
// without HTML escaping.
func forms(v string) []string {
	v = strings.TrimSpace(v)
	if len(v) < minLen {
		return nil
	}
	html, _ := json.Marshal(v)
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a string always encodes
	noHTML := strings.TrimSuffix(plain.String(), "\n")
	cand := []string{v, url.QueryEscape(v), url.PathEscape(v),
		string(html[1 : len(html)-1]), noHTML[1 : len(noHTML)-1]}
	var out []string
	for _, c := range cand {
		if len(c) >= minLen && !containsString(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// readings returns s as a reader may read it: as is, with up to three
// levels of JSON (or JavaScript) escapes undone, and each of those with
// percent-encoding undone.
func readings(s string) []string {
	out := []string{s}
	for cur := s; len(out) < 4; {
		next := naiveUnescape(cur)
		if next == cur {
			break
		}
		out = append(out, next)
		cur = next
	}
	for _, r := range out[:len(out):len(out)] {
		if p := naivePercent(r); p != r {
			out = append(out, p)
		}
	}
	return out
}

// naiveUnescape undoes one level of backslash escapes the way
// encoding/json reads a string, leaving anything that is not an escape as
// it is.
func naiveUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		simple := map[byte]string{'"': `"`, '\\': `\`, '/': "/", '\'': "'", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t"}
		if rep, ok := simple[s[i+1]]; ok {
			b.WriteString(rep)
			i++
			continue
		}
		r1, ok := testHex4(s, i)
		if !ok {
			b.WriteByte('\\')
			continue
		}
		i += 5
		if utf16.IsSurrogate(r1) {
			if r2, ok := testHex4(s, i+1); ok {
				if dec := utf16.DecodeRune(r1, r2); dec != utf8.RuneError {
					b.WriteRune(dec)
					i += 6
					continue
				}
			}
			r1 = utf8.RuneError
		}
		b.WriteRune(r1)
	}
	return b.String()
}

// testHex4 reads the \uXXXX escape at s[i:], if there is one.
func testHex4(s string, i int) (rune, bool) {
	if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(s[i+2:i+6], 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// naivePercent undoes %XX escapes, leaving a lone % as it is.
func naivePercent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+3 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// leak describes the first spelling of a secret found in out outside a
// marker, or returns "". An occurrence overlapping a marker is not a leak:
// it was made by the marker's own characters (a secret such as "ACTED").
func leak(out string, secrets ...string) string {
	for ri, reading := range readings(out) {
		markers := markerSpans(reading)
		for _, s := range secrets {
			for fi, f := range forms(s) {
				for from := 0; ; {
					i := strings.Index(reading[from:], f)
					if i < 0 {
						break
					}
					start, end := from+i, from+i+len(f)
					if !overlapsAny(start, end, markers) {
						return "reading " + strconv.Itoa(ri) + " holds form " + strconv.Itoa(fi) + " of a secret at byte " + strconv.Itoa(start)
					}
					from = start + 1
				}
			}
		}
	}
	return ""
}

func markerSpans(s string) [][2]int {
	var out [][2]int
	for from := 0; ; {
		i := strings.Index(s[from:], Marker)
		if i < 0 {
			return out
		}
		out = append(out, [2]int{from + i, from + i + len(Marker)})
		from += i + 1
	}
}

func overlapsAny(start, end int, spans [][2]int) bool {
	for _, m := range spans {
		if start < m[1] && m[0] < end {
			return true
		}
	}
	return false
}
