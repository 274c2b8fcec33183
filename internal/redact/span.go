package redact

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// span is a part [start, end) of a text that spells a secret.
type span struct{ start, end int }

// found is what one pass over a text knows about the secrets in it.
type found struct {
	spans []span // sorted; overlapping finds are merged, adjacent ones are not
	// hold is the earliest offset from which more text could still
	// complete a secret, or finish an escape: a stream must not show it yet.
	hold int
	// tail is where a trailing start of a secret, minLen bytes or more,
	// begins (len(text) if none), counting an unfinished escape after it
	// as part of it: at the end of a stream it is a secret cut short.
	tail     int
	readings []reading // of text[base:]
	base     int
}

// find looks for every secret in every reading of s. When s may go on
// (streaming), a secret read out of an unfinished escape is not one yet:
// the escape may read otherwise once finished.
func (r *Redactor) find(s string, mayGoOn bool) found {
	rs, open := readingsOf(s)
	f := found{hold: open, tail: len(s), readings: rs}
	for i := range rs {
		rd := &rs[i]
		var own []span
		depth := r.scanReading(rd, func(end, n int) {
			if !mayGoOn || end <= rd.settled {
				own = pushSpan(own, span{rd.start(end - n), rd.end(end)})
			}
		})
		if depth > 0 {
			at := rd.start(rd.settled - depth)
			f.hold = min(f.hold, at)
			if depth >= minLen {
				f.tail = min(f.tail, at)
			}
		}
		f.spans = append(f.spans, own...)
	}
	if len(rs) > 1 {
		f.spans = mergeSpans(f.spans)
	}
	return f
}

// scanReading runs the matcher over rd and returns the length of the
// longest start of a secret ending where rd is settled. A marker already
// in the text is a wall no secret crosses: one such as "ACTED" would be
// found again in every marker, and redacting twice would not give what
// redacting once gave.
func (r *Redactor) scanReading(rd *reading, report func(end, n int)) int {
	depth, at := 0, 0
	for {
		i := strings.Index(rd.text[at:], Marker)
		if i < 0 {
			i = len(rd.text) - at
		}
		piece := rd.text[at : at+i]
		d := r.m.scan(piece, rd.settled-at, func(end, n int) { report(at+end, n) })
		if at <= rd.settled && rd.settled <= at+i {
			depth = d
		}
		if at += i + len(Marker); at > len(rd.text) {
			return depth
		}
	}
}

// scan finds the secrets of s as a reader of its redacted form reads it.
// That reader starts afresh after each marker: where a secret ends inside
// an escape of some reading (a secret ending in a backslash, read with the
// next byte as `\b`), the text after it is read again from there, or a
// secret spelled right after could hide behind the misreading. A secret
// that starts inside an escape takes the whole escape with it.
//
// Reading again costs what is left of s, so it has a budget proportional
// to s: a text made of such secrets would otherwise cost its length
// squared. Past the budget such a secret is extended to the end of the
// escape instead, so the text after its marker reads as it did in s,
// where every secret was found; only a copy hidden by the misreading may
// then show its tail.
//
// covered is how much of s is the rest of a secret whose marker was shown
// already, in a stream: it is a secret like the others.
func (r *Redactor) scan(s string, covered int, final bool) found {
	var spans []span
	budget := 2*len(s) + 64<<10
	for base := 0; ; {
		f := r.find(s[base:], !final)
		if base == 0 && covered > 0 {
			f.spans = mergeSpans(append(f.spans, span{0, covered}))
		}
		restart := -1
		for _, sp := range f.spans {
			end := sp.end
			spans = append(spans, span{base + charStart(f.readings, sp.start), base + end})
			if charStart(f.readings, end) == end {
				continue
			}
			if !final && f.hold < end {
				// The text after it is read afresh once it can be shown;
				// until then nothing after it is decided.
				break
			}
			if rest := len(s) - base - end; rest <= budget {
				budget -= rest
				restart = end
				break
			}
			spans[len(spans)-1].end = base + charEnd(f.readings, end)
		}
		if restart < 0 {
			f.spans, f.hold, f.tail, f.base = mergeSpans(spans), base+f.hold, base+f.tail, base
			return f
		}
		base += restart
	}
}

// charStart returns p, or the start of the character of a reading that p
// falls inside of, until p is a character boundary in every reading.
func charStart(rs []reading, p int) int {
	for moved := true; moved; {
		moved = false
		for i := range rs {
			rd := &rs[i]
			if rd.from == nil || p == 0 {
				continue
			}
			// The last byte that begins before p.
			k, _ := slices.BinarySearch(rd.from, int32(p))
			if k--; k >= 0 && int(rd.to[k]) > p {
				p, moved = int(rd.from[k]), true
			}
		}
	}
	return p
}

// charEnd returns p, or the end of the character of a reading that p
// falls inside of, until p is a character boundary in every reading.
func charEnd(rs []reading, p int) int {
	for moved := true; moved; {
		moved = false
		for i := range rs {
			rd := &rs[i]
			if rd.from == nil {
				continue
			}
			k, _ := slices.BinarySearch(rd.from, int32(p))
			if k--; k >= 0 && int(rd.to[k]) > p {
				p, moved = int(rd.to[k]), true
			}
		}
	}
	return p
}

// pushSpan adds sp, which ends no earlier than any span in spans, merging
// it with those it overlaps: the longest match wins, and two secrets that
// overlap become one marker, so neither shows a piece.
func pushSpan(spans []span, sp span) []span {
	for len(spans) > 0 && spans[len(spans)-1].end > sp.start {
		sp.start = min(sp.start, spans[len(spans)-1].start)
		spans = spans[:len(spans)-1]
	}
	return append(spans, sp)
}

// mergeSpans sorts spans and merges those that overlap.
func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.start < out[n-1].end {
			out[n-1].end = max(out[n-1].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// replace returns s with each span replaced by Marker, except that the
// spans overlapping s[:covered] are dropped: their marker was shown already.
func replace(s string, spans []span, covered int) string {
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp.start])
		if sp.start >= covered {
			b.WriteString(Marker)
		}
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// cut splits buf, whose first covered bytes belong to a secret whose
// marker was already shown, into the redacted text that can be shown now
// and the rest that must wait for more text, with how much of the rest is
// covered. When final, nothing waits, and a trailing start of a secret is
// redacted: the text will not go on to make it whole.
func (r *Redactor) cut(buf string, covered int, final bool) (shown, rest string, restCovered int) {
	f := r.scan(buf, covered, final)
	spans := f.spans
	at := len(buf)
	if final {
		if f.tail < len(buf) {
			// Like a secret's, its start takes the escape it falls in.
			tail := f.base + charStart(f.readings, f.tail-f.base)
			spans = mergeSpans(append(spans, span{tail, len(buf)}))
		}
	} else {
		at = boundary(buf, f.hold, f)
	}
	var now []span
	for _, sp := range spans {
		if sp.start >= at {
			if at == 0 && sp.start == 0 && covered > 0 {
				restCovered = sp.end // still the secret whose marker was shown
			}
			break
		}
		if sp.end > at {
			restCovered, sp.end = sp.end-at, at
		}
		now = append(now, sp)
	}
	return replace(buf[:at], now, covered), buf[at:], restCovered
}

// boundary moves at back to where every reading of buf has a character
// boundary (and buf a rune boundary), so the rest, read again with more
// text, reads as it would have within the whole text.
func boundary(buf string, at int, f found) int {
	for at > 0 && at < len(buf) && !utf8.RuneStart(buf[at]) {
		at--
	}
	if at >= len(buf) || at < f.base {
		return at
	}
	return f.base + charStart(f.readings, at-f.base)
}
