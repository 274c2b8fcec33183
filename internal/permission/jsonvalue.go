package permission

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a small JSON reader; canonical.go is its writer.
// encoding/json cannot serve here: it forgets member order (rules need the
// first string argument), turns numbers into float64 before we can see the
// literal (an overflowing literal must make the call unkeyable, not break
// rule matching) and replaces lone UTF-16 surrogates with U+FFFD, where
// JavaScript keeps them.

// maxDepth bounds nesting as encoding/json does, so hostile input cannot
// exhaust the stack.
const maxDepth = 10000

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a parsed JSON value. Strings are held as WTF-8: valid UTF-8,
// except that a lone surrogate is kept as its three-byte encoding (a pair
// is always joined into one code point), so JavaScript's view of a string
// survives. Numbers keep their literal text.
type jsonValue struct {
	kind    jsonKind
	boolean bool
	text    string // a string's contents or a number's literal
	items   []jsonValue
	members []jsonMember // document order; a repeated key keeps its first position and its last value, as JSON.parse does
}

type jsonMember struct {
	key   string
	value jsonValue
}

// member returns the value of key in an object.
func (v jsonValue) member(key string) (jsonValue, bool) {
	for _, m := range v.members {
		if m.key == key {
			return m.value, true
		}
	}
	return jsonValue{}, false
}

// parseJSON parses one JSON text. Surrounding whitespace is allowed, as
// JSON.parse allows it.
func parseJSON(s string) (jsonValue, error) {
	p := jsonParser{s: s}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return jsonValue{}, p.errorf("unexpected data after the value")
	}
	return v, nil
}

type jsonParser struct {
	s     string
	i     int
	depth int
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jsonValue, error) {
	if p.i >= len(p.s) {
		return jsonValue{}, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return jsonValue{kind: jsonString, text: s}, err
	case c == 't':
		return p.literal("true", jsonValue{kind: jsonBool, boolean: true})
	case c == 'f':
		return p.literal("false", jsonValue{kind: jsonBool})
	case c == 'n':
		return p.literal("null", jsonValue{kind: jsonNull})
	case c == '-' || isDigit(c):
		return p.number()
	default:
		return jsonValue{}, p.errorf("unexpected character %q", c)
	}
}

func (p *jsonParser) literal(word string, v jsonValue) (jsonValue, error) {
	if !strings.HasPrefix(p.s[p.i:], word) {
		return jsonValue{}, p.errorf("invalid literal")
	}
	p.i += len(word)
	return v, nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nested too deeply")
	}
	return nil
}

func (p *jsonParser) object() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	defer func() { p.depth-- }()
	p.i++ // {
	v := jsonValue{kind: jsonObject}
	var index map[string]int // built once an object is large enough for a linear scan to hurt
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return jsonValue{}, p.errorf("expected a member name")
		}
		key, err := p.string()
		if err != nil {
			return jsonValue{}, err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return jsonValue{}, p.errorf("expected ':'")
		}
		p.i++
		p.skipSpace()
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		if index == nil && len(v.members) >= 16 {
			index = make(map[string]int, 2*len(v.members))
			for j, m := range v.members {
				if _, seen := index[m.key]; !seen {
					index[m.key] = j
				}
			}
		}
		j := -1
		if index != nil {
			if k, ok := index[key]; ok {
				j = k
			}
		} else {
			j = slices.IndexFunc(v.members, func(m jsonMember) bool { return m.key == key })
		}
		if j >= 0 {
			v.members[j].value = val
		} else {
			if index != nil {
				index[key] = len(v.members)
			}
			v.members = append(v.members, jsonMember{key: key, value: val})
		}
		p.skipSpace()
		if p.i >= len(p.s) {
			return jsonValue{}, p.errorf("unterminated object")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return v, nil
		default:
			return jsonValue{}, p.errorf("expected ',' or '}'")
		}
	}
}

func (p *jsonParser) array() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	defer func() { p.depth-- }()
	p.i++ // [
	v := jsonValue{kind: jsonArray}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.skipSpace()
		item, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		v.items = append(v.items, item)
		p.skipSpace()
		if p.i >= len(p.s) {
			return jsonValue{}, p.errorf("unterminated array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return jsonValue{}, p.errorf("expected ',' or ']'")
		}
	}
}

// string reads a string literal. Invalid UTF-8 becomes U+FFFD, one per bad
// byte; a WTF-8 surrogate (which an inner JSON-ish string can carry) is
// kept, as is a \u escape of a lone surrogate.
func (p *jsonParser) string() (string, error) {
	p.i++ // "
	var b []byte
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b = appendCodePoint(b, r)
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, n := decodeWTF8(p.s[p.i:])
			b = appendCodePoint(b, r)
			p.i += n
		}
	}
}

func (p *jsonParser) escape() (rune, error) {
	if p.i+1 >= len(p.s) {
		return 0, p.errorf("unterminated escape")
	}
	c := p.s[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		if p.i+4 > len(p.s) {
			return 0, p.errorf("short \\u escape")
		}
		var r rune
		for _, h := range []byte(p.s[p.i : p.i+4]) {
			d, ok := hexDigit(h)
			if !ok {
				return 0, p.errorf("bad \\u escape")
			}
			r = r<<4 | d
		}
		p.i += 4
		return r, nil
	default:
		return 0, p.errorf("bad escape \\%c", c)
	}
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && isDigit(p.s[p.i]):
		p.digits()
	default:
		return jsonValue{}, p.errorf("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if !p.digits() {
			return jsonValue{}, p.errorf("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return jsonValue{}, p.errorf("invalid number")
		}
	}
	return jsonValue{kind: jsonNumber, text: p.s[start:p.i]}, nil
}

func (p *jsonParser) digits() bool {
	start := p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		p.i++
	}
	return p.i > start
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

func isSurrogate(r rune) bool     { return 0xD800 <= r && r <= 0xDFFF }
func isHighSurrogate(r rune) bool { return 0xD800 <= r && r <= 0xDBFF }
func isLowSurrogate(r rune) bool  { return 0xDC00 <= r && r <= 0xDFFF }

// decodeWTF8 decodes one code point, accepting the three-byte encoding of
// a surrogate; any other invalid byte is U+FFFD of width one.
func decodeWTF8(s string) (rune, int) {
	r, n := utf8.DecodeRuneInString(s)
	if r != utf8.RuneError || n != 1 {
		return r, n
	}
	if len(s) >= 3 && s[0] == 0xED && 0xA0 <= s[1] && s[1] <= 0xBF && s[2]&0xC0 == 0x80 {
		return 0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return utf8.RuneError, 1
}

// appendCodePoint appends r as WTF-8, joining a low surrogate with a high
// surrogate just before it, so one string has one encoding.
func appendCodePoint(b []byte, r rune) []byte {
	if isLowSurrogate(r) && len(b) >= 3 {
		if h, n := decodeWTF8(string(b[len(b)-3:])); n == 3 && isHighSurrogate(h) {
			return utf8.AppendRune(b[:len(b)-3], utf16.DecodeRune(h, r))
		}
	}
	if isSurrogate(r) {
		return append(b, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}
