package permission

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// readApprovalSlow is ReadApproval without its fast path: a string is
// decoded, then must hold an object.
func readApprovalSlow(output json.RawMessage) (Approval, bool) {
	out := bytes.TrimSpace(output)
	if len(out) > 0 && out[0] == '"' {
		var s string
		if strictjson.Unmarshal(out, &s) != nil {
			return Approval{}, false
		}
		out = bytes.TrimSpace([]byte(s))
		if len(out) == 0 || out[0] != '{' {
			return Approval{}, false
		}
	}
	return ReadApproval(json.RawMessage(out))
}

// FuzzFastPathsAgree: the shortcuts that spare decoding every text result
// on every request say what decoding would.
func FuzzFastPathsAgree(f *testing.F) {
	for _, s := range []string{`"ok"`, `"DEFERRED_NOT_EXECUTED: x"`, `"DEFERRED_NOT\u005fEXECUTED"`, `"\u0044EFERRED_NOT_EXECUTED"`,
		`" {\"approved\":true}"`, `"\n{\"approved\":false}"`, `"\u00a0{\"approved\":true}"`, `{"approved":true}`, `""`, `"`,
		`"DEFERRED_NOT_EXECUTED`, `DEFERRED_NOT_EXECUTED`, `"\t{\"approved\":true}"`, "\"\u2003{\\\"approved\\\":true}\"", `"\"{\\\"approved\\\":true}\""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		b := runnel.Block{Output: json.RawMessage(out)}
		if got, want := b.OutputHasPrefix(DeferredPrefix), strings.HasPrefix(b.OutputText(), DeferredPrefix); got != want {
			t.Errorf("OutputHasPrefix(%q) = %v, decoding says %v", out, got, want)
		}
		ga, gok := ReadApproval(json.RawMessage(out))
		wa, wok := readApprovalSlow(json.RawMessage(out))
		if gok != wok || ga != wa {
			t.Errorf("ReadApproval(%q) = %+v %v, decoding says %+v %v", out, ga, gok, wa, wok)
		}
	})
}
