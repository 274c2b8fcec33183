package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		limit int64
		want  *runnel.RunRequest
		code  runnel.ErrorCode
		msg   string
	}{
		{name: "minimal", body: hiRequest,
			want: &runnel.RunRequest{Model: "openai/gpt-5", Messages: []runnel.Message{runnel.UserText("hi")}}},
		{name: "unknown fields ignored", body: `{"model":"m","futureField":{"x":1}}`, want: &runnel.RunRequest{Model: "m"}},
		{name: "null", body: `null`, want: &runnel.RunRequest{}},
		{name: "exactly at the limit", body: `{"model":"m"}`, limit: 13, want: &runnel.RunRequest{Model: "m"}},
		{name: "one byte over", body: `{"model":"m"} `, limit: 13, code: runnel.CodeTooLarge,
			msg: "request body is larger than the 13 bytes limit; send a smaller request, or raise RUNNEL_MAX_BODY_BYTES on the server"},
		{name: "default limit named in MiB", body: strings.Repeat(" ", DefaultMaxBodyBytes+1), code: runnel.CodeTooLarge,
			msg: "request body is larger than the 8 MiB limit; send a smaller request, or raise RUNNEL_MAX_BODY_BYTES on the server"},
		{name: "limit in KiB", body: strings.Repeat(" ", 2049), limit: 2048, code: runnel.CodeTooLarge,
			msg: "request body is larger than the 2 KiB limit; send a smaller request, or raise RUNNEL_MAX_BODY_BYTES on the server"},
		{name: "empty", body: "", code: runnel.CodeInvalidRequest,
			msg: `request body is empty; send a JSON run request such as {"model":"openai/gpt-5","messages":[{"role":"user","content":"hi"}]}`},
		{name: "syntax", body: `{"model" "m"}`, code: runnel.CodeInvalidRequest,
			msg: "invalid JSON: invalid character '\"' after object name (expecting ':') (at byte 9)"},
		{name: "trailing data", body: `{"model":"m"} {}`, code: runnel.CodeInvalidRequest,
			msg: "invalid JSON: more data after the value (at byte 14)"},
		{name: "nested type", body: `{"limits":{"maxSteps":"ten"}}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "limits.maxSteps" must be a whole number, not a string`},
		{name: "fraction for an integer", body: `{"limits":{"maxSteps":1.5}}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "limits.maxSteps" must be a whole number, not a number (1.5)`},
		{name: "object for a string", body: `{"model":{}}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "model" must be a string, not an object`},
		{name: "a name twice", body: `{"model":"a","model":"b"}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: the request has the member "model" twice; member names must be unique, also ignoring case`},
		{name: "a name twice in different case", body: `{"model":"a","MODEL":"b"}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: the request has the members "model" and "MODEL", which differ only in case; member names must be unique, also ignoring case`},
		{name: "nested names in different case", body: `{"messages":[{"role":"user","content":[{"type":"text","text":"a","TEXT":"b"}]}]}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: the object at messages[0].content[0] has the members "text" and "TEXT", which differ only in case; member names must be unique, also ignoring case`},
		{name: "invalid UTF-8", body: "{\"model\":\"\xff\"}", code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "model" has a string that is not valid UTF-8 (or holds an unpaired \u surrogate)`},
		{name: "bad message content", body: `{"messages":[{"role":"user","content":42}]}`, code: runnel.CodeInvalidRequest,
			msg: "invalid JSON: message content must be a string or an array of blocks (at messages[0].content)"},
		{name: "message not an object", body: `{"messages":["hi"]}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "messages[0]" must be an object, not a string`},
		{name: "block field of the wrong type", body: `{"messages":[{"role":"user","content":["a",{"type":"text","text":5}]}]}`,
			code: runnel.CodeInvalidRequest, msg: `invalid JSON: field "messages[0].content[1].text" must be a string, not a number`},
		{name: "block not an object", body: `{"messages":[{"role":"user","content":[5]}]}`, code: runnel.CodeInvalidRequest,
			msg: `invalid JSON: field "messages[0].content[0]" must be an object, not a number`},
		{name: "content forms", body: `{"messages":[null,{"role":"user","content":null},{"role":"user","content":[],"x":{"y":[1]}},{"role":"user","content":"a"},{"role":"tool","content":["b",{"type":"tool_result","output":{"a":1}}]}]}`,
			want: &runnel.RunRequest{Messages: []runnel.Message{{}, {Role: runnel.RoleUser}, {Role: runnel.RoleUser}, runnel.UserText("a"),
				{Role: runnel.RoleTool, Content: []runnel.Block{{Type: runnel.BlockText, Text: "b"}, {Type: runnel.BlockToolResult, Output: json.RawMessage(`{"a":1}`)}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRequest(strings.NewReader(tt.body), tt.limit)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				return
			}
			if got != nil {
				t.Errorf("a request alongside the error: %+v", got)
			}
			if c, m := runnel.ErrorCodeOf(err), runnel.ErrorMessage(err); c != tt.code || m != tt.msg {
				t.Errorf("error %s %q, want %s %q", c, m, tt.code, tt.msg)
			}
		})
	}
}

func TestDecodeRequestReadFailure(t *testing.T) {
	_, err := DecodeRequest(iotest.ErrReader(errors.New("connection reset")), 0)
	if c, m := runnel.ErrorCodeOf(err), runnel.ErrorMessage(err); c != runnel.CodeInvalidRequest ||
		m != "could not read the request body: connection reset" {
		t.Errorf("error %s %q", c, m)
	}
}

// TestDecodeRequestUnderMaxBytesReader is the server's arrangement: the
// reader itself refuses past the limit.
func TestDecodeRequestUnderMaxBytesReader(t *testing.T) {
	body := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(bytes.NewReader(make([]byte, 100))), 10)
	if _, err := DecodeRequest(body, 10); runnel.ErrorCodeOf(err) != runnel.CodeTooLarge {
		t.Errorf("error %v, want too_large", err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{hiRequest, `{"model":`, `[]`, `null`, `{"messages":[{"role":"user","content":["a",{"type":"text","text":"b"}]}]}`,
		`{"customTools":[{"name":"t","input_schema":{"type":"object"}}],"permissions":"bogus"}`, `{"limits":{"maxSteps":-1}}`, "\"\\ud800\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(bytes.NewReader(body), 1<<16)
		if err == nil {
			if req == nil {
				t.Fatal("neither a request nor an error")
			}
			return
		}
		var re *runnel.Error
		if !errors.As(err, &re) {
			t.Fatalf("error %T is not a *runnel.Error: %v", err, err)
		}
		switch re.Code {
		case runnel.CodeInvalidRequest:
			if m := re.Message; !strings.HasPrefix(m, "invalid JSON: ") && !strings.HasPrefix(m, "request body is empty") {
				t.Fatalf("message %q", m)
			}
		case runnel.CodeTooLarge:
			if len(body) <= 1<<16 {
				t.Fatalf("too_large for %d bytes", len(body))
			}
		default:
			t.Fatalf("code %s", re.Code)
		}
	})
}

// A declared length sizes the first buffer, but a client that declares
// more than it sends does not make runnel set aside what it declared.
func TestReadBodyBelievesADeclaredLengthOnlySoFar(t *testing.T) {
	for _, c := range []struct {
		declared, limit int64
		wantCap         int
	}{
		{declared: 2, limit: 8 << 20, wantCap: 3},
		{declared: 8 << 20, limit: 8 << 20, wantCap: maxUpfront + 1},
		{declared: 8 << 20, limit: 1000, wantCap: 1001},
		{declared: -1, limit: 8 << 20, wantCap: 512},
	} {
		body, err := readBody(declaredBody{strings.NewReader("{}"), c.declared}, c.limit, "")
		if err != nil || string(body) != "{}" {
			t.Fatalf("declared %d: readBody = %q, %v", c.declared, body, err)
		}
		if cap(body) != c.wantCap {
			t.Errorf("declared %d, limit %d: buffer of %d bytes, want %d", c.declared, c.limit, cap(body), c.wantCap)
		}
	}
}
