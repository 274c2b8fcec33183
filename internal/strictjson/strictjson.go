// Package strictjson is runnel's one way of reading JSON that comes from
// outside: a request body, a model's tool arguments, an approval a client
// sends back. JSON leaves some things open (RFC 8259: member names
// "SHOULD be unique"), and two readers that close them differently read two
// different documents from the same bytes: encoding/json keeps the last of
// two equal names and matches names ignoring case, a rule matcher reading
// the first exact name sees another value. Whoever decides about a value
// and whoever acts on it must read the same thing, so what is open is
// refused:
//
//   - a member name that appears twice in one object;
//   - two member names of one object that differ only in case
//     ({"command": …, "COMMAND": …});
//   - invalid UTF-8 and unpaired UTF-16 surrogates in strings;
//   - anything but whitespace after the value.
//
// Unmarshal then decodes with the rules of encoding/json/v2 (the module
// github.com/go-json-experiment/json, which the standard library ships as
// encoding/json/v2 behind GOEXPERIMENT=jsonv2): member names match struct
// fields exactly, never ignoring case, and unknown members are ignored.
//
//	if err := strictjson.Check(args); err != nil {
//		return fmt.Sprintf("Tool arguments %s.", err) // the model can fix it
//	}
//	var req runnel.RunRequest
//	err := strictjson.Unmarshal(body, &req)
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Error is why a JSON text was refused, and where.
type Error struct {
	// Pointer is the JSON Pointer (RFC 6901) of the object or value at
	// fault; empty for the whole text.
	Pointer string
	// Problem says what is wrong, as a clause: "has the member "a" twice".
	Problem string
	// Syntax is true when the text is not JSON at all (as opposed to JSON
	// that runnel refuses to read because readers disagree on it); Problem
	// is then the parser's complaint and Offset the byte it is about.
	Syntax bool
	Offset int64
	// Names is true when the problem is with member names (a repeat, or
	// two that differ only in case); Pointer is then the object's.
	Names bool
}

func (e *Error) Error() string {
	switch {
	case e.Syntax:
		return fmt.Sprintf("is not valid JSON: %s at byte %d", e.Problem, e.Offset)
	case e.Pointer == "":
		return e.Problem
	}
	return fmt.Sprintf("%s (at %s)", e.Problem, e.Pointer)
}

// Check reports why data is not one strict JSON value (see the package
// doc), or nil. The error is an *Error.
func Check(data []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	var stack []*object // nil entries are arrays
	for done := false; ; done = len(stack) == 0 {
		tok, err := dec.ReadToken()
		switch {
		case err == io.EOF && done:
			return nil
		case err == io.EOF:
			return &Error{Problem: "unexpected end of input", Syntax: true, Offset: dec.InputOffset()}
		case err != nil:
			return readError(err)
		case done:
			return &Error{Problem: "more data after the value", Syntax: true, Offset: dec.InputOffset() - 1}
		}
		switch tok.Kind() {
		case '{':
			stack = append(stack, &object{})
		case '[':
			stack = append(stack, nil)
		case '}', ']':
			stack = stack[:len(stack)-1]
		case '"':
			top := len(stack) - 1
			if top < 0 || stack[top] == nil {
				continue
			}
			// In an object, the tokens alternate name, value: an odd count
			// means the string just read is a name.
			if _, n := dec.StackIndex(dec.StackDepth()); n%2 == 1 {
				name := tok.String()
				if other, clash := stack[top].add(name); clash {
					return &Error{
						Pointer: string(dec.StackPointer().Parent()),
						Problem: fmt.Sprintf("has the members %q and %q, which differ only in case", other, name),
						Names:   true,
					}
				}
			}
		}
	}
}

// Unmarshal checks data (Check) and decodes it into v, matching member
// names exactly. Decoding errors (a string where a number belongs) are
// returned as they come, with their JSON Pointer.
func Unmarshal(data []byte, v any) error {
	if err := Check(data); err != nil {
		return err
	}
	return jsonv2.Unmarshal(data, v)
}

// object remembers the member names of one object seen so far, folded, to
// find two that differ only in case. Most objects are small, so a slice
// is searched until the object grows.
type object struct {
	names  []string
	folded map[string]string
}

const linearNames = 8

// add records name and reports another name of the object it equals
// ignoring case (exact repeats are refused by the decoder before).
func (o *object) add(name string) (string, bool) {
	if o.folded == nil && len(o.names) < linearNames {
		for _, n := range o.names {
			if strings.EqualFold(n, name) {
				return n, true
			}
		}
		o.names = append(o.names, name)
		return "", false
	}
	if o.folded == nil {
		o.folded = make(map[string]string, 2*linearNames)
		for _, n := range o.names {
			o.folded[fold(n)] = n
		}
		o.names = nil
	}
	f := fold(name)
	if other, ok := o.folded[f]; ok {
		return other, true
	}
	o.folded[f] = name
	return "", false
}

// fold maps s to one representative of the names strings.EqualFold
// deems equal: each rune becomes the smallest rune of its case-folding
// orbit.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		smallest := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			smallest = min(smallest, f)
		}
		b.WriteRune(smallest)
	}
	return b.String()
}

// readError turns the decoder's error into an *Error in plain words.
func readError(err error) *Error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return &Error{Problem: "unexpected end of input", Syntax: true}
	}
	e := &Error{Pointer: string(se.JSONPointer), Offset: se.ByteOffset}
	switch msg := se.Err.Error(); {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		e.Pointer = string(se.JSONPointer.Parent())
		e.Problem = fmt.Sprintf("has the member %q twice", se.JSONPointer.LastToken())
		e.Names = true
	case strings.Contains(msg, "UTF-8"), strings.Contains(msg, "surrogate"):
		e.Problem = "has a string that is not valid UTF-8 (or holds an unpaired \\u surrogate)"
	case errors.Is(se.Err, io.ErrUnexpectedEOF):
		e.Problem, e.Syntax = "unexpected end of input", true
	default:
		e.Problem, e.Syntax = strings.TrimPrefix(msg, "jsontext: "), true
	}
	return e
}

// CheckNames reports a member of the object data whose name differs from
// one of names only in case ({"Command": …} where the schema says
// command), or nil. Exact matching reads no command there, a reader that
// ignores case does: a tool's arguments are checked against the names its
// schema declares, so the permission gate and whoever executes the call
// (runnel, or a platform decoding it its own way) read the same members.
// data must be an object that Check accepts; anything else passes.
func CheckNames(data []byte, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var members map[string]jsontext.Value
	if jsonv2.Unmarshal(data, &members) != nil {
		return nil
	}
	for name := range members {
		for _, n := range names {
			if name != n && strings.EqualFold(name, n) {
				return &Error{Problem: fmt.Sprintf("has the member %q where the schema names %q (names are case-sensitive)", name, n), Names: true}
			}
		}
	}
	return nil
}
