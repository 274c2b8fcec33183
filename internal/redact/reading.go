package redact

import (
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A secret is caught in every spelling a reader can turn back into it, not
// in a list of spellings: `\/` for `/`, `\u0073` or `\u0053` for any
// character, surrogate pairs, `%2f` or `%2F`, and these nested (a JSON
// document printed inside a JSON string). Listing them would multiply the
// needles by every choice per character; instead the text is read the ways
// a reader would read it, and each reading keeps, per byte, the span of the
// original it came from, so a secret found in a reading is replaced in the
// original.

// maxUnescape is how many levels of backslash escaping are undone: a
// secret in a JSON string, in a JSON document a tool returned as a string,
// printed in a log line, is three.
const maxUnescape = 3

// reading is the text as one decoding of it reads.
type reading struct {
	text     string
	from, to []int32 // per byte, the span of the original it came from; nil for the original
	// settled is how much of text more text cannot change: the rest is an
	// escape left unfinished, here or in a decoding of this reading.
	settled int
}

// start is where the byte at i begins in the original.
func (rd *reading) start(i int) int {
	if rd.from == nil {
		return i
	}
	return int(rd.from[i])
}

// end is where the byte before i ends in the original.
func (rd *reading) end(i int) int {
	if rd.to == nil {
		return i
	}
	return int(rd.to[i-1])
}

// readingsOf returns s and every decoding of it that differs from s: up to
// maxUnescape levels of backslash escapes, and percent-encoding undone in
// each. open is the smallest offset of an escape that the end of s leaves
// unfinished (len(s) if none): more text could change what it reads as.
func readingsOf(s string) (rs []reading, open int) {
	rs, open = []reading{{text: s, settled: len(s)}}, len(s)
	for range maxUnescape {
		last := &rs[len(rs)-1]
		if strings.IndexByte(last.text, '\\') < 0 {
			break
		}
		next, unfinished := decode(last, '\\', jsonEscape)
		if unfinished >= 0 {
			open = min(open, unfinished)
		}
		if next == nil {
			break
		}
		rs = append(rs, *next)
	}
	for i := range len(rs) {
		if strings.IndexByte(rs[i].text, '%') < 0 {
			continue
		}
		next, unfinished := decode(&rs[i], '%', percentEscape)
		if unfinished >= 0 {
			open = min(open, unfinished)
		}
		if next != nil {
			rs = append(rs, *next)
		}
	}
	return rs, open
}

// maxEscape is the longest escape: a surrogate pair, `\uD83D\uDE00`.
const maxEscape = 12

// An escapeFunc reads the escape that may start at s[i], which is its
// lead byte, appending what it reads as to dst. size 0 means no escape
// starts there, and unfinished that one might, given more text.
type escapeFunc func(dst []byte, s string, i int) (out []byte, size int, unfinished bool)

// decode reads p through esc. It returns the decoding, or nil when it is p
// itself, and the original offset of the first unfinished escape at the end
// of p, or -1. A decoding with nothing decoded but an unfinished escape is
// p's text less settled: a reading of its own, like those of the whole
// text once the escape is finished.
func decode(p *reading, lead byte, esc escapeFunc) (*reading, int) {
	s := p.text
	out := &reading{}
	var buf []byte
	decoded, unfinishedAt := false, -1
	copied := 0 // s[:copied] is in out
	for i := 0; ; {
		j := strings.IndexByte(s[i:], lead)
		if j < 0 {
			break
		}
		i += j
		n := len(buf)
		var size int
		var unfinished bool
		buf, size, unfinished = esc(buf[:n], s, i)
		if !unfinished && i < p.settled && p.settled < len(s) && p.settled-i <= maxEscape {
			// Whether an escape starts here depends on p's unsettled tail.
			var scratch [maxEscape]byte
			_, _, unfinished = esc(scratch[:0], s[:p.settled], i)
		}
		if unfinished && unfinishedAt < 0 {
			unfinishedAt = i
		}
		if size == 0 {
			buf = buf[:n]
			i++
			continue
		}
		var dec [utf8.UTFMax]byte // what it read, while the literal run before it goes in
		k := copy(dec[:], buf[n:])
		if !decoded {
			// A decoding is never longer than what it decodes.
			buf = append(make([]byte, 0, len(s)), buf[:n]...)
			out.from, out.to = make([]int32, 0, len(s)), make([]int32, 0, len(s))
		}
		buf = out.literal(buf[:n], p, copied, i)
		buf = out.add(buf, dec[:k], p.start(i), p.end(i+size))
		decoded, i, copied = true, i+size, i+size
	}
	open := -1
	if unfinishedAt >= 0 {
		open = p.start(unfinishedAt)
	}
	if decoded {
		out.text = string(out.literal(buf, p, copied, len(s)))
	} else {
		out.text, out.from, out.to = p.text, p.from, p.to
	}
	out.settle(p, open)
	if !decoded && out.settled == p.settled {
		return nil, open
	}
	return out, open
}

// literal appends p's bytes [from, to), which read as themselves.
func (rd *reading) literal(buf []byte, p *reading, from, to int) []byte {
	if p.from == nil {
		for k := from; k < to; k++ {
			rd.from = append(rd.from, int32(k))
			rd.to = append(rd.to, int32(k+1))
		}
	} else {
		rd.from = append(rd.from, p.from[from:to]...)
		rd.to = append(rd.to, p.to[from:to]...)
	}
	return append(buf, p.text[from:to]...)
}

// add appends the bytes b, read from the original's [from, to).
func (rd *reading) add(buf, b []byte, from, to int) []byte {
	for range len(b) {
		rd.from = append(rd.from, int32(from))
		rd.to = append(rd.to, int32(to))
	}
	return append(buf, b...)
}

// settle marks the decoding unsettled from the first byte that comes from
// where p is unsettled, or from the unfinished escape at open.
func (rd *reading) settle(p *reading, open int) {
	cut := -1
	if p.settled < len(p.text) {
		cut = p.start(p.settled)
	}
	if open >= 0 && (cut < 0 || open < cut) {
		cut = open
	}
	rd.settled = len(rd.text)
	switch {
	case cut < 0:
	case rd.to == nil:
		rd.settled = cut
	default:
		// The first byte whose source reaches past cut.
		rd.settled, _ = slices.BinarySearch(rd.to, int32(cut+1))
	}
}

// jsonEscape reads backslash escapes the way encoding/json reads a string
// (plus `\'`, which JavaScript writes): a lone surrogate reads as U+FFFD. A
// backslash that starts no escape is just a backslash.
func jsonEscape(dst []byte, s string, i int) ([]byte, int, bool) {
	if i+1 == len(s) {
		return dst, 0, true
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/', '\'':
		return append(dst, c), 2, false
	case 'b':
		return append(dst, '\b'), 2, false
	case 'f':
		return append(dst, '\f'), 2, false
	case 'n':
		return append(dst, '\n'), 2, false
	case 'r':
		return append(dst, '\r'), 2, false
	case 't':
		return append(dst, '\t'), 2, false
	}
	r1, st := hex4(s, i)
	switch {
	case st == hexShort:
		return dst, 0, true
	case st == hexBad:
		return dst, 0, false
	case !utf16.IsSurrogate(r1):
		return utf8.AppendRune(dst, r1), 6, false
	}
	r2, st := hex4(s, i+6)
	if st == hexShort && r1 < 0xdc00 {
		// A high surrogate whose pair may be on its way.
		return utf8.AppendRune(dst, utf8.RuneError), 6, true
	}
	if dec := utf16.DecodeRune(r1, r2); st == hexOK && dec != utf8.RuneError {
		return utf8.AppendRune(dst, dec), 12, false
	}
	return utf8.AppendRune(dst, utf8.RuneError), 6, false
}

const (
	hexOK = iota
	hexShort
	hexBad
)

// hex4 reads a \uXXXX escape at s[i:]. hexShort means s ends inside what
// could still become one.
func hex4(s string, i int) (rune, int) {
	var r rune
	for k := i; k < i+6; k++ {
		if k == len(s) {
			return 0, hexShort
		}
		c := s[k]
		switch {
		case k == i && c == '\\', k == i+1 && c == 'u':
			continue
		case k < i+2:
			return 0, hexBad
		}
		d := unhex(c)
		if d < 0 {
			return 0, hexBad
		}
		r = r<<4 | d
	}
	return r, hexOK
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// percentEscape reads %XX, in either case. A % that starts no escape is
// just a percent sign.
func percentEscape(dst []byte, s string, i int) ([]byte, int, bool) {
	for k := i + 1; k < i+3; k++ {
		if k == len(s) {
			return dst, 0, true
		}
		if unhex(s[k]) < 0 {
			return dst, 0, false
		}
	}
	return append(dst, byte(unhex(s[i+1])<<4|unhex(s[i+2]))), 3, false
}
