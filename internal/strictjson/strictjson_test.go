package strictjson

import (
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		in   string
		want string // the error text; empty means accepted
	}{
		{`{"command":"echo hello"}`, ""},
		{`{"a":{"b":[{"c":1,"C2":2}]},"A2":3}`, ""},
		{`"x"`, ""},
		{` [1, 2] `, ""},
		{`{"command":"echo hello","COMMAND":"rm -rf /"}`, `has the members "command" and "COMMAND", which differ only in case`},
		{`{"command":"echo hello","command":"rm -rf /"}`, `has the member "command" twice`},
		{`{"a":{"x":1,"x":2}}`, `has the member "x" twice (at /a)`},
		{`{"a":[{"path":"p","Path":"q"}]}`, `has the members "path" and "Path", which differ only in case (at /a/0)`},
		{`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"K1":10}`, `has the members "k1" and "K1", which differ only in case`},
		{`{"ſ":1,"S":2}`, `has the members "ſ" and "S", which differ only in case`}, // U+017F folds to s
		{`{"K":1,"k":2}`, `has the members "K" and "k", which differ only in case`}, // U+212A Kelvin
		{`{"a":"\ud800"}`, `has a string that is not valid UTF-8 (or holds an unpaired \u surrogate) (at /a)`},
		{"{\"a\":\"\xff\"}", `has a string that is not valid UTF-8 (or holds an unpaired \u surrogate) (at /a)`},
		{`{"a":1} {"b":2}`, `is not valid JSON: more data after the value at byte 8`},
		{`{"a":1`, `is not valid JSON: unexpected end of input at byte 6`},
		{``, `is not valid JSON: unexpected end of input at byte 0`},
		{`{"model" "m"}`, `is not valid JSON: invalid character '"' after object name (expecting ':') at byte 9`},
	}
	for _, tt := range tests {
		err := Check([]byte(tt.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("Check(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUnmarshalMatchesNamesExactly(t *testing.T) {
	var v struct {
		Model string `json:"model"`
	}
	if err := Unmarshal([]byte(`{"MODEL":"b"}`), &v); err != nil || v.Model != "" {
		t.Errorf(`Unmarshal({"MODEL":"b"}) = %q, %v; want "" (names match exactly)`, v.Model, err)
	}
	if err := Unmarshal([]byte(`{"model":"a","MODEL":"b"}`), &v); err == nil {
		t.Errorf("Unmarshal accepted two names that differ only in case")
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"a":{"b":1,"b":2}}`, `[{"x":"\u00e9","X":1}]`, `{"ß":1,"ẞ":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = Check(data) // must not panic, whatever the input
	})
}
