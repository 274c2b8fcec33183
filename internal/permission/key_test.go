package permission

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKey(t *testing.T) {
	servers := KeyOptions{Servers: []string{"runnel", "memory", "my_srv"}}
	tests := []struct {
		name string
		tool string
		args string
		opts KeyOptions
		want string // "" means no key
	}{
		{"absent args", "fetch", ``, KeyOptions{}, `fetch#{}`},
		{"null args", "fetch", `null`, KeyOptions{}, `fetch#{}`},
		{"keys sorted, whitespace gone", "fetch", ` { "b" : 1 , "a" : [ true , null ] } `, KeyOptions{}, `fetch#{"a":[true,null],"b":1}`},
		{"null is a value and stays", "fetch", `{"a":null}`, KeyOptions{}, `fetch#{"a":null}`},
		{"repeated key keeps the last value", "fetch", `{"a":1,"a":2}`, KeyOptions{}, `fetch#{"a":2}`},
		{"keys by UTF-16 code unit, not by byte", "fetch", `{"😀":1,"｡":2,"":3,"a":4}`, KeyOptions{},
			`fetch#{"":3,"a":4,"😀":1,"｡":2}`},
		{"U+E000 after a surrogate pair too", "fetch", "{\"\ue000\":1,\"\U00010000\":2}", KeyOptions{},
			"fetch#{\"\U00010000\":2,\"\ue000\":1}"},
		{"1.0 is 1", "fetch", `{"n":1.0}`, KeyOptions{}, `fetch#{"n":1}`},
		{"1e21 keeps its exponent", "fetch", `{"n":1e21}`, KeyOptions{}, `fetch#{"n":1e+21}`},
		{"1e20 is written out", "fetch", `{"n":1.2345678901234568e20}`, KeyOptions{}, `fetch#{"n":123456789012345680000}`},
		{"1e-7", "fetch", `{"n":1E-7}`, KeyOptions{}, `fetch#{"n":1e-7}`},
		{"0.000001", "fetch", `{"n":1e-6}`, KeyOptions{}, `fetch#{"n":0.000001}`},
		{"-0 is 0", "fetch", `{"n":-0.0}`, KeyOptions{}, `fetch#{"n":0}`},
		{"beyond 2^53 rounds as JavaScript does", "fetch", `{"n":9007199254740993}`, KeyOptions{}, `fetch#{"n":9007199254740992}`},
		{"underflow is 0", "fetch", `{"n":1e-400}`, KeyOptions{}, `fetch#{"n":0}`},
		{"overflow cannot be keyed", "fetch", `{"n":1e400}`, KeyOptions{}, ``},
		{"invalid JSON cannot be keyed", "fetch", `{"a":`, KeyOptions{}, ``},
		{"trailing garbage cannot be keyed", "fetch", `{} x`, KeyOptions{}, ``},
		{"empty name cannot be keyed", "", `{}`, KeyOptions{}, ``},
		{"strings escaped as JSON.stringify does", "fetch", `{"s":"<&>\u2028\u007f\/\"\\\b\f\n\r\t\u0001\u001F"}`, KeyOptions{},
			"fetch#{\"s\":\"<&>\u2028\u007f/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\"}"},
		{"lone surrogates kept and escaped", "fetch", `{"s":"\uD83D x \uDE00"}`, KeyOptions{}, `fetch#{"s":"\ud83d x \ude00"}`},
		{"escaped pair is one character", "fetch", `{"s":"\ud83d\ude00"}`, KeyOptions{}, `fetch#{"s":"😀"}`},
		{"invalid UTF-8 becomes U+FFFD", "fetch", "{\"s\":\"a\xffb\"}", KeyOptions{}, "fetch#{\"s\":\"a\uFFFDb\"}"},
		{"JSON-looking string parsed", "fetch", `{"q":"{\"b\":1,\"a\":2}"}`, KeyOptions{}, `fetch#{"q":{"a":2,"b":1}}`},
		{"stringified arguments parsed", "fetch", `"{\"a\":1}"`, KeyOptions{}, `fetch#{"a":1}`},
		{"stray closing braces trimmed", "fetch", `{"q":"{\"a\":{\"b\":1}}}} \n"}`, KeyOptions{}, `fetch#{"q":{"a":{"b":1}}}`},
		{"stray bracket trimmed", "fetch", `{"q":"[1,2]]"}`, KeyOptions{}, `fetch#{"q":[1,2]}`},
		{"more than three strays stay a string", "fetch", `{"q":"{}}}}}"}`, KeyOptions{}, `fetch#{"q":"{}}}}}"}`},
		{"a string that parses is never trimmed", "fetch", `{"q":"[[]]"}`, KeyOptions{}, `fetch#{"q":[[]]}`},
		{"nested JSON-ish strings", "fetch", `{"q":"{\"inner\":\"[\\\"x\\\",{\\\"z\\\":1,\\\"y\\\":2}]\"}"}`, KeyOptions{},
			`fetch#{"q":{"inner":["x",{"y":2,"z":1}]}}`},
		{"scalar JSON strings stay strings", "fetch", `{"a":"42","b":"true","c":"\"x\"","d":"null"}`, KeyOptions{},
			`fetch#{"a":"42","b":"true","c":"\"x\"","d":"null"}`},
		{"non-JSON braces stay", "fetch", `{"q":"{not json}"}`, KeyOptions{}, `fetch#{"q":"{not json}"}`},
		{"mcp__server__ stripped", "mcp__memory__search", `{}`, servers, `search#{}`},
		{"mcp_server_ stripped", "mcp_memory_search", `{}`, servers, `search#{}`},
		{"server_ stripped", "memory_search", `{}`, servers, `search#{}`},
		{"server with underscore", "mcp__my_srv__do_it", `{}`, servers, `do_it#{}`},
		{"longest server prefix wins", "my_srv_x", `{}`, KeyOptions{Servers: []string{"my", "my_srv"}}, `x#{}`},
		{"unknown underscore prefix kept", "get_user", `{}`, servers, `get_user#{}`},
		{"unknown mcp prefix kept", "mcp__other__search", `{}`, servers, `mcp__other__search#{}`},
		{"nothing left after the prefix: kept", "memory_", `{}`, servers, `memory_#{}`},
		{"builtin names", "read", `{"path":"a"}`, KeyOptions{}, `Read#{"path":"a"}`},
		{"builtin names in any case", "GREP", `{}`, KeyOptions{}, `Grep#{}`},
		{"builtin behind a server prefix", "mcp__runnel__bash", `{"command":"ls"}`, servers, `Bash#{"command":"ls"}`},
		{"Bash reduced to command", "bash", `{"command":"ls","description":"list","timeout":5}`, KeyOptions{}, `Bash#{"command":"ls"}`},
		{"Bash without command kept whole", "Bash", `{"cmd":"ls"}`, KeyOptions{}, `Bash#{"cmd":"ls"}`},
		{"bound path removed", "create_issue", `{"title":"t","org":{"id":"model-made-up","name":"n"}}`,
			KeyOptions{BoundPaths: []string{"org.id", "missing.path", "title.not_an_object"}}, `create_issue#{"org":{"name":"n"},"title":"t"}`},
		{"bound path inside a JSON-ish string removed", "f", `{"filter":"{\"org\":\"x\",\"q\":1}"}`,
			KeyOptions{BoundPaths: []string{"filter.org"}}, `f#{"filter":{"q":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Key(tt.tool, json.RawMessage(tt.args), tt.opts)
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("Key(%q, %s) = %q, %v; want %q", tt.tool, tt.args, got, ok, tt.want)
			}
		})
	}
}

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"\uFF61", "\U0001F600", 1}, // byte order says the opposite
		{"\uE000", "\U00010000", 1},
		{"\uD7FF", "\U00010000", -1},
		{"a", "ab", -1},
		{"", "", 0},
		{"\U0001F600", "\U0001F601", -1},
		{string([]byte{0xED, 0xA0, 0xBD}) + "x", "\U0001F600", -1}, // lone U+D83D then 'x' < U+D83D U+DE00
	}
	for _, tt := range tests {
		if got := compareUTF16(tt.a, tt.b); got != tt.want {
			t.Errorf("compareUTF16(%+q, %+q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if strings.Compare(tt.a, tt.b) != tt.want && tt.want != 0 {
			t.Logf("byte order differs for %+q, %+q", tt.a, tt.b) // the reason this function exists
		}
	}
}

func TestFormatJSNumber(t *testing.T) {
	// Values and the text Number.prototype.toString gives them in V8.
	tests := []struct {
		in   float64
		want string
	}{
		{1, "1"}, {-1.5, "-1.5"}, {0.1, "0.1"}, {100, "100"}, {123.456, "123.456"},
		{1e20, "100000000000000000000"}, {1e21, "1e+21"}, {1.2345678901234568e20, "123456789012345680000"},
		{1.2345678901234568e21, "1.2345678901234568e+21"}, {1e-6, "0.000001"}, {1.23e-5, "0.0000123"},
		{1e-7, "1e-7"}, {-1.5e-10, "-1.5e-10"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{0.30000000000000004, "0.30000000000000004"}, {9007199254740992, "9007199254740992"}, {123e-20, "1.23e-18"},
	}
	for _, tt := range tests {
		if got, err := formatJSNumber(tt.in); err != nil || got != tt.want {
			t.Errorf("formatJSNumber(%v) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{}`},
		{`null`, `null`},
		{`"{\"b\":1}"`, `"{\"b\":1}"`}, // no JSON-ish reading: the signature covers the input as shown
		{`{"b":[1.50,{"d":1,"c":2}],"a":"x"}`, `{"a":"x","b":[1.5,{"c":2,"d":1}]}`},
	}
	for _, tt := range tests {
		got, err := CanonicalJSON(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`{`, `[1,]`, `{"a":1e999}`, `01`, `"\x"`, "\"\x01\"", `tru`} {
		if got, err := CanonicalJSON(json.RawMessage(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) = %s, want an error", bad, got)
		}
	}
}

// randomValue builds a JSON value with keys and strings that exercise the
// sort order, escapes and JSON-looking strings.
func randomValue(r *rand.Rand, depth int) any {
	words := []string{"a", "B", "é", "😀", "\uff61", "\ue000", "<&>", "\n\t\"\\", "\u2028", "{\"x\":1}", "[1,2]}", "42", ""}
	switch k := r.IntN(7); {
	case depth > 3 || k == 0:
		return words[r.IntN(len(words))]
	case k == 1:
		return []any{nil, true, false}[r.IntN(3)]
	case k == 2:
		return json.Number([]string{"0", "-0", "1.0", "1e21", "1E-7", "123.4500", "-12", "2.5e+3"}[r.IntN(8)])
	case k == 3:
		items := make([]any, r.IntN(4))
		for i := range items {
			items[i] = randomValue(r, depth+1)
		}
		return items
	default:
		m := map[string]any{}
		for range r.IntN(5) {
			m[words[r.IntN(len(words))]+fmt.Sprint(r.IntN(3))] = randomValue(r, depth+1)
		}
		return m
	}
}

// writeJSON writes v with its object members in the order order() picks
// and the whitespace space() picks: two calls with different choices are
// the same JSON value written differently.
func writeJSON(b *strings.Builder, v any, order func([]string), space func() string) {
	b.WriteString(space())
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		order(keys)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(space() + ":")
			writeJSON(b, v[k], order, space)
		}
		b.WriteString(space() + "}")
	case []any:
		b.WriteString("[")
		for i, item := range v {
			if i > 0 {
				b.WriteString(",")
			}
			writeJSON(b, item, order, space)
		}
		b.WriteString(space() + "]")
	default:
		vb, _ := json.Marshal(v)
		b.Write(vb)
	}
	b.WriteString(space())
}

func TestKeyIgnoresLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		v := map[string]any{"root": randomValue(r, 0)}
		var compact, shuffled strings.Builder
		writeJSON(&compact, v, slices.Sort[[]string], func() string { return "" })
		writeJSON(&shuffled, v, func(keys []string) {
			r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}, func() string { return []string{"", " ", "\n\t", "\r\n  "}[r.IntN(4)] })
		k1, ok1 := Key("tool", json.RawMessage(compact.String()), KeyOptions{})
		k2, ok2 := Key("tool", json.RawMessage(shuffled.String()), KeyOptions{})
		if !ok1 || !ok2 || k1 != k2 {
			t.Fatalf("case %d: keys differ\n%s -> %q %v\n%s -> %q %v", i, compact.String(), k1, ok1, shuffled.String(), k2, ok2)
		}
	}
}

func FuzzKey(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"command":"ls","description":"x"}`, `{"a":"{\"b\":1}}}"}`, `{"n":1e400}`, `{"s":"\ud800"}`,
		`[1,"2",{"3":null}]`, `"{\"a\":[1]}"`, `{"😀":1,"｡":2}`, `{"a":1,"a":{"b":2}}`, "{\"s\":\"\xed\xa0\x80\"}",
	} {
		f.Add("bash", seed)
		f.Add("mcp__memory__search", seed)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		opts := KeyOptions{Servers: []string{"memory"}, BoundPaths: []string{"a.b"}}
		k1, ok1 := Key(name, json.RawMessage(args), opts)
		k2, ok2 := Key(name, json.RawMessage(args), opts)
		if k1 != k2 || ok1 != ok2 {
			t.Fatalf("Key is not deterministic: %q %v, then %q %v", k1, ok1, k2, ok2)
		}
		if !ok1 {
			return
		}
		body := strings.TrimPrefix(k1, CanonicalName(name, opts.Servers)+"#")
		if !json.Valid([]byte(body)) {
			t.Fatalf("key body %q is not JSON", body)
		}
		if utf8.ValidString(args) && !strings.Contains(args, `\u`) {
			// Without escapes that can hold lone surrogates, the key body
			// is valid UTF-8 and canonical: keying it again changes nothing.
			k3, ok3 := Key(name, json.RawMessage(body), opts)
			if !ok3 || k3 != k1 {
				t.Fatalf("re-keying the canonical body: %q %v, want %q", k3, ok3, k1)
			}
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `[1, 2.5e-3, "x"]`, `{"a":{"b":[null,true,false]}}`, `"\ud83d\ude00"`, `01`, `[1,]`, `{"a" 1}`, "\"\x7f\"", ` 1 `} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := parseJSON(s)
		if (err == nil) != json.Valid([]byte(s)) {
			t.Fatalf("parseJSON(%q) error %v, but json.Valid = %v", s, err, json.Valid([]byte(s)))
		}
	})
}
