package mcp

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzEventReader checks the event reader on any stream: it never holds
// more than its bound of one event (plus the blank line ending it), every
// event it hands on ends with a blank line unless the stream ended first,
// and a stream with no event over the bound comes out unchanged.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {}\n\n",
		"data: a\r\n\r\ndata: b\n",
		": ping\n\n\n",
		"data: " + strings.Repeat("x", 100) + "\n\nid: 1\ndata: after\n\n",
		"\n\n\n",
	} {
		f.Add(s, uint8(16))
		f.Add(s, uint8(200))
	}
	f.Fuzz(func(t *testing.T, stream string, bound uint8) {
		max := int64(bound) + 1
		r := newEventReader(strings.NewReader(stream), max)
		var out []byte
		cut := false
		for range len(stream) + 2 { // every call consumes a byte, or ends the stream
			raw, tooLarge, err := r.next()
			if int64(len(raw)) > max+2 {
				t.Fatalf("an event of %d bytes passed the bound %d", len(raw), max)
			}
			if tooLarge {
				cut = true
				if _, _, err := r.skip(1 << 20); err == io.EOF {
					break
				}
				continue
			}
			if err == nil && !isBlankLine(lastLine(raw)) {
				t.Fatalf("event %q does not end with a blank line", raw)
			}
			out = append(out, raw...)
			if err != nil {
				break
			}
		}
		if !cut && string(out) != stream {
			t.Fatalf("the stream came out as %q, want %q", out, stream)
		}
	})
}

// lastLine returns the last line of b, its line ending included.
func lastLine(b []byte) []byte {
	i := bytes.LastIndexByte(bytes.TrimSuffix(b, []byte("\n")), '\n')
	return b[i+1:]
}
