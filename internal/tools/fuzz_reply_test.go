package tools

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// FuzzPlatformAnswers fuzzes what runnel makes of the platform's answers:
// a callback's envelope (readReply) and a direct call's body
// (bodyResult). Whatever the bytes, the result is JSON that a replayed
// conversation may hold (internal/strictjson accepts it), of a size
// bounded by the answer's; an envelope that says OK gives the model its
// content, one that does not is an error naming the tool; a direct
// call's JSON body is passed as the same value, anything else as its
// text.
func FuzzPlatformAnswers(f *testing.F) {
	for _, s := range []string{
		`{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","tool_call_id":"x","content":"18°C and sunny"}}}`,
		`{"call":{"id":"x","status":{"code":"STATUS_CODE_ERROR","message":"quota exceeded"},"data":{"role":"tool","content":"try later"}}}`,
		`{"call":{"status":{"code":"STATUS_CODE_OK"},"data":{"content":{"temp":21,"temp":22}}}}`,
		`{"call":null}`, `{"call":{"status":{"code":"STATUS_CODE_UNSET"}}}`, `[1,2]`, `<html>oops</html>`,
		"{\"a\":\"\xff\"}", `{"a":1,"A":2}`, `  "text"  `, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := readReply("get_weather", raw)
		checkResult(t, "readReply", r, len(raw))
		var env reply
		ok := json.Unmarshal(raw, &env) == nil && env.Call != nil
		switch {
		case !ok:
			if !r.IsError || !strings.Contains(outputText(r), "expected JSON envelope") {
				t.Fatalf("an answer that is no envelope gave %s", r.Output)
			}
		case isOK(env.Call.Status.Code):
			want := contentText(env.Call.Data.Content)
			if r.IsError || utf8.ValidString(want) && outputText(r) != want {
				t.Fatalf("an OK envelope gave %s (error %v), want its content %q", r.Output, r.IsError, want)
			}
		default:
			if !r.IsError || !strings.HasPrefix(outputText(r), "tool call get_weather failed: ") {
				t.Fatalf("a failed call's envelope gave %s (error %v)", r.Output, r.IsError)
			}
		}

		r = bodyResult(raw)
		checkResult(t, "bodyResult", r, len(raw))
		if r.IsError {
			t.Fatalf("a 2xx body gave an error: %s", r.Output)
		}
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) > 0 && strictjson.Check(trimmed) == nil {
			if !sameValue(trimmed, r.Output) {
				t.Fatalf("the JSON body %s was passed as %s", trimmed, r.Output)
			}
		} else if utf8.Valid(raw) && outputText(r) != string(raw) {
			t.Fatalf("the text body %q was passed as %s", raw, r.Output)
		}
	})
}

func isOK(code string) bool {
	return code == "" || code == "STATUS_CODE_OK" || code == "STATUS_CODE_UNSET"
}

// checkResult checks what every answer gives the model: JSON a replay
// may hold, at most a few times the answer's size (escaping), plus the
// sentence around it.
func checkResult(t *testing.T, of string, r Result, n int) {
	t.Helper()
	if err := strictjson.Check(r.Output); err != nil {
		t.Fatalf("%s: the output %s is not JSON a replay may hold: %v", of, r.Output, err)
	}
	if len(r.Output) > 6*n+300 {
		t.Fatalf("%s: %d bytes of output from %d bytes", of, len(r.Output), n)
	}
}

func outputText(r Result) string { return runnel.Block{Output: r.Output}.OutputText() }

// sameValue reports whether two JSON texts hold the same value.
func sameValue(a, b []byte) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
