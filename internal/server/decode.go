package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// DecodeRequest reads one run request of at most limit bytes (a limit <= 0
// means DefaultMaxBodyBytes). It is the one decoder behind POST /run and
// `runnel run`. Unknown fields are ignored (DESIGN §3), names match exactly,
// and a body that readers could read two ways (a member twice, or twice in
// different case, anywhere; invalid UTF-8) is refused: see
// internal/strictjson. Errors are
// *runnel.Error: CodeTooLarge past the limit, CodeInvalidRequest for an
// empty body or anything that is not a JSON run request, with a sentence
// saying what to fix.
func DecodeRequest(r io.Reader, limit int64) (*runnel.RunRequest, error) {
	body, err := readBody(r, limit, `send a JSON run request such as {"model":"openai/gpt-5","messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		return nil, err
	}
	var req runnel.RunRequest
	if err := strictjson.Unmarshal(body, &req); err != nil {
		return nil, invalidJSON(err)
	}
	return &req, nil
}

// readBody reads a body of at most limit bytes (<= 0: the default); an
// empty one is refused with a sentence ending in example.
func readBody(r io.Reader, limit int64, example string) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	body, err := readAll(io.LimitReader(r, limit+1), sizeHint(r, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) || int64(len(body)) > limit {
		return nil, &runnel.Error{Code: runnel.CodeTooLarge, Message: fmt.Sprintf(
			"request body is larger than the %s limit; send a smaller request, or raise RUNNEL_MAX_BODY_BYTES on the server",
			byteSize(limit))}
	}
	if err != nil {
		return nil, runnel.Errorf(runnel.CodeInvalidRequest, "could not read the request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &runnel.Error{Code: runnel.CodeInvalidRequest, Message: "request body is empty; " + example}
	}
	return body, nil
}

// declaredBody is a request body with the length its Content-Length
// declares (-1: none).
type declaredBody struct {
	io.Reader
	length int64
}

// maxUpfront bounds what a declared length makes readBody allocate before
// the bytes arrive: a client cannot claim 8 MiB and send nothing to make
// runnel hold 8 MiB; past it, the buffer grows as the bytes come.
const maxUpfront = 1 << 20

// sizeHint is the buffer readBody starts with: the declared length (and
// one byte, for the read that sees the end), else 512 bytes.
func sizeHint(r io.Reader, limit int64) int {
	d, ok := r.(declaredBody)
	if !ok || d.length < 0 {
		return 512
	}
	return int(min(d.length, limit, maxUpfront)) + 1
}

// readAll is io.ReadAll starting from a buffer of size n: a body whose
// length is known is read without the copies of a growing buffer (half of
// what decoding a long request allocated).
func readAll(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func invalidJSON(err error) *runnel.Error {
	return &runnel.Error{Code: runnel.CodeInvalidRequest, Message: "invalid JSON: " + describeJSONError(err), Err: err}
}

// describeJSONError says what is wrong in the caller's terms, not Go's.
func describeJSONError(err error) string {
	var strict *strictjson.Error
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &strict) && strict.Syntax:
		return fmt.Sprintf("%s (at byte %d)", strict.Problem, strict.Offset)
	case errors.As(err, &strict) && strict.Names:
		where := "the request"
		if strict.Pointer != "" {
			where = "the object at " + fieldPath(strict.Pointer)
		}
		return fmt.Sprintf("%s %s; member names must be unique, also ignoring case", where, strict.Problem)
	case errors.As(err, &strict):
		return fmt.Sprintf("field %q %s", fieldPath(strict.Pointer), strict.Problem)
	case errors.As(err, &sem) && sem.Err != nil && sem.GoType != nil && reflect.PointerTo(sem.GoType).Implements(unmarshalerType):
		// The type's own decoding said what was wrong; the decoder knows where.
		if sem.JSONPointer != "" {
			return fmt.Sprintf("%s (at %s)", sem.Err, fieldPath(string(sem.JSONPointer)))
		}
		return sem.Err.Error()
	case errors.As(err, &sem):
		got := kindName(sem.JSONKind, sem.JSONValue)
		if sem.JSONPointer == "" {
			return fmt.Sprintf("the request must be %s, not %s", jsonKind(sem.GoType), got)
		}
		return fmt.Sprintf("field %q must be %s, not %s", fieldPath(string(sem.JSONPointer)), jsonKind(sem.GoType), got)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// unmarshalerType is the interface of the request types that decode
// themselves (messages, tool specs).
var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldPath writes a JSON Pointer the way people name fields:
// /messages/0/content → messages[0].content.
func fieldPath(pointer string) string {
	var b strings.Builder
	for tok := range jsontext.Pointer(pointer).Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			fmt.Fprintf(&b, "[%s]", tok)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// kindName names the JSON value the decoder met: "a string", "a number (1.5)".
func kindName(k jsontext.Kind, v jsontext.Value) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		if len(v) > 0 && len(v) <= 32 {
			return fmt.Sprintf("a number (%s)", v)
		}
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "another value"
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() == "RawMessage" {
			return "any JSON value"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// byteSize writes a limit the way people configure it: 8 MiB, 512 KiB, 1000 bytes.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
