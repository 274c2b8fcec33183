package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// got is an Output with its result as a string, for cmp.Diff.
type got struct {
	Result  string
	Logs    []string
	Error   string
	Failure Failure
}

func view(out Output) got {
	return got{Result: string(out.Result), Logs: out.Logs, Error: out.Error, Failure: out.Failure}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   got
		calls  []string
	}{
		{name: "value", script: `return 1 + 1`, want: got{Result: "2"}},
		{name: "object", script: `return {a: [1, "x", null], b: {c: true}}`, want: got{Result: `{"a":[1,"x",null],"b":{"c":true}}`}},
		{name: "no return", script: `1 + 1`, want: got{Result: "null"}},
		{name: "undefined", script: `return undefined`, want: got{Result: "null"}},
		{name: "function", script: `return () => 1`, want: got{Result: "null"}},
		{name: "toJSON", script: `return {toJSON() { return "custom" }}`, want: got{Result: `"custom"`}},
		{name: "top-level await", script: `const r = await tools.s.echo({n: 1}); return r.n`, want: got{Result: "1"}, calls: []string{`s.echo {"n":1}`}},
		{name: "no args", script: `return await tools.s.echo()`, want: got{Result: "{}"}, calls: []string{"s.echo {}"}},
		{name: "text result", script: `return await tools.s.text({})`, want: got{Result: `"plain text"`}, calls: []string{"s.text {}"}},
		{name: "json result", script: `const r = await tools.s.json({}); return r.a[1]`, want: got{Result: "2"}, calls: []string{"s.json {}"}},
		{name: "number result", script: `return typeof await tools.s.number({})`, want: got{Result: `"number"`}, calls: []string{"s.number {}"}},
		{name: "quoted result", script: `return await tools.s.quoted({})`, want: got{Result: `"quoted"`}, calls: []string{"s.quoted {}"}},
		{name: "empty result", script: `return await tools.s.empty({})`, want: got{Result: `""`}, calls: []string{"s.empty {}"}},
		{
			name:   "isError rejects",
			script: `try { await tools.s.fail({}) } catch (e) { return [e instanceof Error, e.message] }`,
			want:   got{Result: `[true,"nope: */ \"quoted\""]`},
			calls:  []string{"s.fail {}"},
		},
		{
			name:   "isError uncaught",
			script: `await tools.s.fail({})`,
			want:   got{Result: "null", Error: `Error: nope: */ "quoted"`, Failure: FailureScript},
			calls:  []string{"s.fail {}"},
		},
		{
			name:   "caller error rejects",
			script: `try { await tools.s.broken({}) } catch (e) { return e.message }`,
			want:   got{Result: `"connection reset"`},
			calls:  []string{"s.broken {}"},
		},
		{
			name:   "needs approval",
			script: `try { await tools.s.approve({id: 1}) } catch (e) { return e.message }`,
			want:   got{Result: `"Tool s.approve needs the user's approval; scripts cannot pause for approval. Call mcp__s__approve directly (outside run_mcp_script) so the user can approve it."`},
			calls:  []string{`s.approve {"id":1}`},
		},
		{
			name:   "client tool",
			script: `await tools.s.client({})`,
			want:   got{Result: "null", Error: "Error: Tool s.client runs in the user's client; scripts cannot wait for it. Call mcp__s__client directly (outside run_mcp_script) instead.", Failure: FailureScript},
			calls:  []string{"s.client {}"},
		},
		{
			name:   "args not an object",
			script: `try { await tools.s.echo(5) } catch (e) { return e.message }`,
			want:   got{Result: `"tools.s.echo takes one object of arguments, e.g. tools.s.echo({...})"`},
		},
		{
			name: "args of every wrong kind",
			script: `const out = [];
for (const a of [null, "s", [1], () => 1, Symbol("x"), {toJSON() { return [1] }}, {toJSON() { return undefined }}, new Proxy([], {})]) {
  try { await tools.s.echo(a); out.push("called") } catch (e) { out.push(e instanceof TypeError && e.message === "tools.s.echo takes one object of arguments, e.g. tools.s.echo({...})") }
}
return out`,
			want: got{Result: `[true,true,true,true,true,true,true,true]`},
		},
		{
			name:   "args of a null prototype, a proxy and a toJSON",
			script: `return [await tools.s.echo(Object.create(null)), await tools.s.echo(new Proxy({a: 1}, {})), await tools.s.echo({toJSON() { return {b: 2} }})]`,
			want:   got{Result: `[{},{"a":1},{"b":2}]`},
			calls:  []string{"s.echo {}", `s.echo {"a":1}`, `s.echo {"b":2}`},
		},
		{
			name:   "args not serialisable",
			script: `const a = {}; a.self = a; try { await tools.s.echo(a) } catch (e) { return e.name }`,
			want:   got{Result: `"TypeError"`},
		},
		{
			name:   "throw",
			script: "const x = 1;\nfunction f() { throw new Error(\"boom\") }\nf()",
			want: got{Result: "null", Failure: FailureScript,
				Error: "Error: boom\n    at f (<script>:2:31)\n    at <anonymous> (<script>:3:2)"},
		},
		{
			name:   "throw on the first line",
			script: `throw new TypeError("bad")`,
			want:   got{Result: "null", Failure: FailureScript, Error: "TypeError: bad\n    at <anonymous> (<script>:1:20)"},
		},
		{
			name:   "throw a value",
			script: `throw {code: 7}`,
			want:   got{Result: "null", Failure: FailureScript, Error: `Uncaught {"code":7}`},
		},
		{
			name:   "syntax error",
			script: "const a = 1;\nconst b = ;",
			want:   got{Result: "null", Failure: FailureScript, Error: "SyntaxError: unexpected token in expression: ';'\n    at <script>:2:11"},
		},
		{
			name:   "typescript",
			script: `const n: number = 1; return n`,
			want:   got{Result: "null", Failure: FailureScript, Error: "SyntaxError: missing initializer for const variable\n    at <script>:1:8"},
		},
		{
			name:   "bigint result",
			script: `return 1n`,
			want: got{Result: "null", Failure: FailureScript,
				Error: "the script's return value cannot be converted to JSON: TypeError: Do not know how to serialize a BigInt\n    at stringify (native)"},
		},
		{
			name:   "circular result",
			script: `const a = {}; a.a = a; return a`,
			want: got{Result: "null", Failure: FailureScript,
				Error: "the script's return value cannot be converted to JSON: TypeError: circular reference\n    at stringify (native)"},
		},
		{
			name:   "never settles",
			script: `await new Promise(() => {})`,
			want: got{Result: "null", Failure: FailureScript,
				Error: "the script's promise never settled: it waited for something that can never happen (the sandbox has no timers or events; only tool calls complete later)"},
		},
		{
			name:   "stack overflow",
			script: `function f() { return f() } try { f() } catch (e) { return e.name + ": " + e.message }`,
			want:   got{Result: `"InternalError: stack overflow"`},
		},
	}
	for _, tt := range tests {
		for _, kind := range sandboxKinds() {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				r := &recorder{}
				out := runIn(t, kind, r, tt.script, nil)
				if tt.want.Logs == nil {
					tt.want.Logs = []string{}
				}
				if diff := cmp.Diff(tt.want, view(out)); diff != "" {
					t.Errorf("Run(%q) (-want +got):\n%s", tt.script, diff)
				}
				calls, _ := r.snapshot()
				if diff := cmp.Diff(tt.calls, calls); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestRunHundredCalls(t *testing.T) {
	scripts := map[string]string{
		"sequential": `let sum = 0; for (let i = 0; i < 100; i++) sum += (await tools.s.echo({n: i})).n; return sum`,
		"Promise.all": `const rs = await Promise.all(Array.from({length: 100}, (_, i) => tools.s.echo({n: i})));
return rs.reduce((sum, r) => sum + r.n, 0)`,
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			out := run(t, r, script, nil)
			if diff := cmp.Diff(got{Result: "4950", Logs: []string{}}, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			calls, _ := r.snapshot()
			seen := map[string]bool{}
			for _, c := range calls {
				seen[c] = true
			}
			for i := range 100 {
				if c := fmt.Sprintf(`s.echo {"n":%d}`, i); !seen[c] {
					t.Errorf("no call %s", c)
				}
			}
			if len(calls) != 100 {
				t.Errorf("%d calls, want 100", len(calls))
			}
		})
	}
}

func TestRunConcurrencyCap(t *testing.T) {
	const limit, calls = 3, 12
	r := &recorder{gate: limit}
	script := fmt.Sprintf(`await Promise.all(Array.from({length: %d}, () => tools.s.gate({}))); return "done"`, calls)
	out := run(t, r, script, &Options{Timeout: time.Minute, MaxConcurrentCalls: limit})
	if diff := cmp.Diff(got{Result: `"done"`, Logs: []string{}}, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	made, _ := r.snapshot()
	if len(made) != calls || r.maxInflight != limit {
		t.Errorf("%d calls with at most %d in flight, want %d with %d", len(made), r.maxInflight, calls, limit)
	}
}

func TestRunConsole(t *testing.T) {
	r := &recorder{}
	out := run(t, r, `
console.log("a", 1, {b: 2}, [1, "x"], null, undefined, true, 3n, () => 1, function named() {}, new Error("e"));
console.info("info");
console.debug("debug");
console.warn("careful");
console.error("bad", new TypeError("worse"));
const cyclic = {}; cyclic.self = cyclic;
console.log(cyclic, Symbol("s"));
console.log();
return "ok"`, nil)
	want := got{Result: `"ok"`, Logs: []string{
		`a 1 {"b":2} [1,"x"] null undefined true 3n [Function anonymous] [Function named] Error: e`,
		"info",
		"debug",
		"[warn] careful",
		"[error] bad TypeError: worse",
		"[value that cannot be printed] Symbol(s)",
		"",
	}}
	if diff := cmp.Diff(want, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRunConsoleCap(t *testing.T) {
	tests := []struct {
		name   string
		script string
		logs   []string
	}{
		{
			name:   "many lines",
			script: `for (let i = 0; i < 1000; i++) console.log("line " + i)`,
			logs:   []string{"line 0", "line 1", "line 2", "line 3", "line 4", "line 5", "line … [console output truncated at 40 bytes]"},
		},
		{
			name:   "one long line",
			script: `console.log("x".repeat(100000)); console.log("after")`,
			logs:   []string{strings.Repeat("x", 40) + " … [console output truncated at 40 bytes]"},
		},
		{
			name:   "exact fit, then more",
			script: `console.log("x".repeat(40)); console.log("y")`,
			logs:   []string{strings.Repeat("x", 40), "… [console output truncated at 40 bytes]"},
		},
		{
			name:   "cut between characters",
			script: `console.log("é".repeat(100))`,
			logs:   []string{strings.Repeat("é", 20) + " … [console output truncated at 40 bytes]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, &recorder{}, tt.script, &Options{Timeout: time.Minute, MaxLogBytes: 40})
			if diff := cmp.Diff(got{Result: "null", Logs: tt.logs}, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunResultCap(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   got
	}{
		{name: "fits", script: `return "x".repeat(98)`, want: got{Result: `"` + strings.Repeat("x", 98) + `"`}},
		{name: "too long", script: `return "x".repeat(1000)`, want: got{Result: "null", Failure: FailureScript,
			Error: "the script's return value is at least 1002 bytes of JSON, over the limit of 100; return less (filter or summarise in the script)"}},
		{name: "too many bytes", script: `return "é".repeat(60)`, want: got{Result: "null", Failure: FailureScript,
			Error: "the script's return value is 122 bytes of JSON, over the limit of 100; return less (filter or summarise in the script)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, &recorder{}, tt.script, &Options{Timeout: time.Minute, MaxResultBytes: 100})
			tt.want.Logs = []string{}
			if diff := cmp.Diff(tt.want, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunFreshSandbox checks that nothing a script changes reaches the next.
func TestRunFreshSandbox(t *testing.T) {
	r := &recorder{}
	first := run(t, r, `globalThis.leak = 1; var declared = 2; Array.prototype.extra = 3; JSON.parse = null; tools.s.extra = 4; return "set"`, nil)
	if diff := cmp.Diff(got{Result: `"set"`, Logs: []string{}}, view(first)); diff != "" {
		t.Fatalf("first run (-want +got):\n%s", diff)
	}
	second := run(t, r, `return [typeof leak, typeof declared, [].extra, typeof JSON.parse, typeof tools.s.extra]`, nil)
	want := got{Result: `["undefined","undefined",null,"function","undefined"]`, Logs: []string{}}
	if diff := cmp.Diff(want, view(second)); diff != "" {
		t.Errorf("second run (-want +got):\n%s", diff)
	}
}

// TestRunNames calls tools whose names are not identifiers, or are names
// that objects already have, through the accessor the listing shows.
func TestRunNames(t *testing.T) {
	names := [][2]string{
		{"my-server", "my-tool"},
		{"__proto__", "constructor"},
		{"s", "delete"},
		{"s", "toString"},
		{"höhe", "größe"},
		{"a.b", "c\"d"},
		{"s", ""},
		{"s", "1st"},
	}
	var tools []Tool
	for _, n := range names {
		tools = append(tools, Tool{Server: n[0], Name: n[1]})
	}
	var calls []string
	caller := CallerFunc(func(_ context.Context, server, tool string, args json.RawMessage) (CallResult, error) {
		calls = append(calls, server+"|"+tool) // sequential: the script awaits each
		return CallResult{Content: `"ok"`}, nil
	})
	var script strings.Builder
	script.WriteString("const out = [];\n")
	var want []string
	for _, n := range names {
		fmt.Fprintf(&script, "out.push(await %s({}));\n", accessor(n[0], n[1]))
		want = append(want, n[0]+"|"+n[1])
	}
	script.WriteString("return out.length")
	out := Run(context.Background(), script.String(), tools, caller, &Options{Timeout: time.Minute})
	if diff := cmp.Diff(got{Result: fmt.Sprint(len(names)), Logs: []string{}}, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s\nscript:\n%s", diff, script.String())
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestOptionsDefaults(t *testing.T) {
	defaults := Options{
		Timeout:            DefaultTimeout,
		MemoryLimit:        DefaultMemoryLimit,
		MaxLogBytes:        DefaultMaxLogBytes,
		MaxResultBytes:     DefaultMaxResultBytes,
		MaxConcurrentCalls: DefaultMaxConcurrentCalls,
		AbandonGrace:       DefaultAbandonGrace,
	}
	tests := []struct {
		name string
		in   *Options
		want Options
	}{
		{name: "nil", in: nil, want: defaults},
		{name: "zero", in: &Options{}, want: defaults},
		{name: "negative", in: &Options{Timeout: -1, MemoryLimit: -1, MaxLogBytes: -1, MaxResultBytes: -1, MaxConcurrentCalls: -1, AbandonGrace: -1}, want: defaults},
		{name: "over the maximum", in: &Options{Timeout: 10 * time.Minute}, want: func() Options { o := defaults; o.Timeout = MaxTimeout; return o }()},
		{name: "set", in: &Options{Timeout: time.Second, MemoryLimit: 1 << 20, MaxLogBytes: 1, MaxResultBytes: 2, MaxConcurrentCalls: 3, AbandonGrace: 4},
			want: Options{Timeout: time.Second, MemoryLimit: 1 << 20, MaxLogBytes: 1, MaxResultBytes: 2, MaxConcurrentCalls: 3, AbandonGrace: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.in.withDefaults()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutputJSON(t *testing.T) {
	out := Run(context.Background(), `console.log("hi"); throw new Error("x")`, nil, &recorder{}, nil)
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":null,"logs":["hi"],"error":"Error: x\n    at \u003canonymous\u003e (\u003cscript\u003e:1:35)"}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRunContent checks what a call resolves to: the parsed JSON when its
// content is JSON, whatever white space surrounds it, and the text as it
// came otherwise, also when it has the shape of JSON at its ends.
func TestRunContent(t *testing.T) {
	tests := []struct{ content, want string }{
		{`{"a": [1, 2]}`, `{"a":[1,2]}`},
		{" \n[1, 2]\t ", `[1,2]`},
		{"\u00a0\f42\v", `42`},
		{`-1.5e3`, `-1500`},
		{`"quoted"`, `"quoted"`},
		{`true`, `true`},
		{`null`, `null`},
		{`plain text`, `"plain text"`},
		{`nullish`, `"nullish"`},
		{`[1] done, [2] failed`, `"[1] done, [2] failed"`},
		{" 3 of 4 ", `" 3 of 4 "`},
		{`{"unterminated": [}`, `"{\"unterminated\": [}"`},
		{`"`, `"\""`},
		{`-`, `"-"`},
		{``, `""`},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			caller := CallerFunc(func(context.Context, string, string, json.RawMessage) (CallResult, error) {
				return CallResult{Content: tt.content}, nil
			})
			out := Run(context.Background(), `return await tools.s.c({})`, []Tool{{Server: "s", Name: "c"}}, caller, nil)
			if diff := cmp.Diff(got{Result: tt.want, Logs: []string{}}, view(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
