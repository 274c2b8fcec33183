package redact

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// markerJSON is the marker as a JSON value. It replaces whatever value a
// secret cannot be cut out of without breaking the document.
const markerJSON = `"` + Marker + `"`

// maxNested is how many JSON documents deep JSON looks inside strings: a
// tool returning JSON as a string whose fields hold JSON is two.
const maxNested = 2

// JSON returns raw with every secret replaced, and valid JSON if raw was.
// Text is never replaced across JSON structure: a secret inside a string
// (a key or a value), in any spelling, is replaced inside that string; a
// secret in a number or literal, or spanning tokens (one such as `1,"b":2`
// or `x"}`), replaces the smallest value holding it with the JSON string
// "[REDACTED]". A string holding a JSON document is redacted as JSON.
// Raw that is not valid JSON is not JSON anyway and is redacted as text.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r.Empty() || len(raw) == 0 {
		return raw
	}
	if !json.Valid(raw) {
		return r.Bytes(raw)
	}
	return r.json(raw, 0)
}

// json redacts a valid document until a pass finds nothing more. A pass
// rewrites strings in their own spelling, which could in principle spell a
// secret anew across what it joined; if passes keep finding one, the whole
// value goes.
func (r *Redactor) json(src []byte, nested int) []byte {
	out := src
	for range 3 {
		next, changed := r.jsonPass(out, nested)
		if !changed {
			return out
		}
		out = next
	}
	if len(r.find(string(out), false).spans) == 0 && json.Valid(out) {
		return out
	}
	return []byte(markerJSON)
}

// jsonPass redacts a valid document once.
func (r *Redactor) jsonPass(src []byte, nested int) ([]byte, bool) {
	doc := parseJSON(src)
	f := r.find(string(src), false)
	if !doc.mark(f.spans) {
		return []byte(markerJSON), true
	}
	var b bytes.Buffer
	changed, at := false, 0
	for i := 0; i < len(doc.nodes); i++ {
		n := &doc.nodes[i]
		var tok []byte
		switch {
		case n.mark == markWhole:
			tok = []byte(markerJSON)
		case n.str:
			tok = r.jsonString(src[n.start:n.end], n.mark == markSpelled, nested)
		}
		if tok == nil {
			continue
		}
		b.Write(src[at:n.start])
		b.Write(tok)
		at, changed = n.end, true
		i = n.last // a replaced value's children went with it
	}
	if !changed {
		return src, false
	}
	b.Write(src[at:])
	return b.Bytes(), true
}

// jsonString returns the string token tok redacted, or nil if it holds no
// secret. spelled says its raw spelling holds one: if the decoded string
// does not, the spelling was the secret (one with a backslash in it).
func (r *Redactor) jsonString(tok []byte, spelled bool, nested int) []byte {
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return []byte(markerJSON) // cannot happen: the document is valid
	}
	red := r.decoded(s, nested)
	if red == s {
		if spelled {
			return []byte(markerJSON)
		}
		return nil
	}
	out := quote(red)
	if r.Contains(out) {
		return []byte(markerJSON)
	}
	return out
}

// decoded redacts the content of a JSON string: as JSON when it is a JSON
// document (so the document inside stays valid), as text otherwise.
func (r *Redactor) decoded(s string, nested int) string {
	if t := strings.TrimLeft(s, " \t\r\n"); nested < maxNested && t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(s)) {
		return string(r.json([]byte(s), nested+1))
	}
	return r.String(s)
}

// quote spells s as a JSON string, leaving <, > and & as they are.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// How a secret touches a node.
const (
	markNone    = iota
	markSpelled // inside a string's quotes, in its raw spelling
	markWhole   // across the node's own structure: the node is replaced
)

// jsonNode is a value, or an object key, of a parsed document.
type jsonNode struct {
	start, end int
	last       int  // the index of the last node of its subtree
	str        bool // a string: a key or a string value
	mark       int
}

type jsonDoc struct {
	src   []byte
	nodes []jsonNode // in document order, so parents before children
	pos   int
}

// parseJSON lists the nodes of src, which must be valid JSON.
func parseJSON(src []byte) *jsonDoc {
	d := &jsonDoc{src: src}
	d.value()
	return d
}

func (d *jsonDoc) ws() {
	for d.pos < len(d.src) && strings.IndexByte(" \t\r\n", d.src[d.pos]) >= 0 {
		d.pos++
	}
}

func (d *jsonDoc) value() {
	d.ws()
	i := len(d.nodes)
	d.nodes = append(d.nodes, jsonNode{start: d.pos})
	switch d.src[d.pos] {
	case '{', '[':
		d.container()
	case '"':
		d.skipString()
		d.nodes[i].str = true
	default: // a number or a literal
		for d.pos < len(d.src) && strings.IndexByte(",]} \t\r\n", d.src[d.pos]) < 0 {
			d.pos++
		}
	}
	d.nodes[i].end, d.nodes[i].last = d.pos, len(d.nodes)-1
	d.ws()
}

// container reads an object or an array; an object's keys are nodes too.
func (d *jsonDoc) container() {
	closing := byte(']')
	if d.src[d.pos] == '{' {
		closing = '}'
	}
	d.pos++
	d.ws()
	for d.src[d.pos] != closing {
		if closing == '}' {
			d.nodes = append(d.nodes, jsonNode{start: d.pos, str: true})
			d.skipString()
			k := len(d.nodes) - 1
			d.nodes[k].end, d.nodes[k].last = d.pos, k
			d.ws()
			d.pos++ // the colon
		}
		d.value()
		if d.src[d.pos] == ',' {
			d.pos++
			d.ws()
		}
	}
	d.pos++
}

func (d *jsonDoc) skipString() {
	for d.pos++; d.src[d.pos] != '"'; d.pos++ {
		if d.src[d.pos] == '\\' {
			d.pos++
		}
	}
	d.pos++
}

// mark gives each span (sorted) to the deepest node holding it whole. A
// span inside a string's quotes marks it spelled; any other marks the node
// whole. It reports false when a span lies outside every node: the whole
// document is the smallest value holding it.
func (d *jsonDoc) mark(spans []span) bool {
	var stack []int // the open nodes, outermost first; their ends never grow
	next := 0
	for _, sp := range spans {
		for next < len(d.nodes) && d.nodes[next].start <= sp.start {
			for len(stack) > 0 && d.nodes[stack[len(stack)-1]].end <= d.nodes[next].start {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, next)
			next++
		}
		for len(stack) > 0 && d.nodes[stack[len(stack)-1]].end <= sp.start {
			stack = stack[:len(stack)-1]
		}
		// The deepest open node that ends no earlier than the span.
		k, _ := slices.BinarySearchFunc(stack, sp.end, func(n, end int) int {
			if d.nodes[n].end >= end {
				return -1
			}
			return 1
		})
		if k == 0 {
			return false
		}
		n := &d.nodes[stack[k-1]]
		switch {
		case n.str && sp.start > n.start && sp.end < n.end:
			n.mark = max(n.mark, markSpelled)
		default:
			n.mark = markWhole
		}
	}
	return true
}
