package codemode

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// compileRefused is the message of every way to a Function constructor.
func compileRefused(kind string) string {
	return `"TypeError: ` + kind + ` is not available in this sandbox: code cannot be compiled at run time"`
}

// TestEscapes tries the ways out of the sandbox a script might know. Each
// script returns what it found; a way that worked would return "escaped".
func TestEscapes(t *testing.T) {
	attempt := func(expr string) string {
		return `try { const f = ` + expr + `; return typeof f === "function" ? (f() === 1 ? "escaped" : "no") : "escaped" } catch (e) { return e.name + ": " + e.message }`
	}
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{name: "require", script: `return typeof require`, want: `"undefined"`},
		{name: "process", script: `return typeof process`, want: `"undefined"`},
		{name: "fetch", script: `return typeof fetch`, want: `"undefined"`},
		{name: "eval", script: `return typeof eval`, want: `"undefined"`},
		{name: "eval call", script: `try { return eval("1") } catch (e) { return e.name }`, want: `"ReferenceError"`},
		{name: "indirect eval", script: `try { return (0, globalThis["ev" + "al"])("1") } catch (e) { return e.name }`, want: `"TypeError"`},
		{name: "timers", script: `return [typeof setTimeout, typeof setInterval, typeof setImmediate, typeof queueMicrotask]`, want: `["undefined","undefined","undefined","undefined"]`},
		{name: "setTimeout call", script: `try { setTimeout(() => tools.s.echo({late: true}), 0) } catch (e) { return e.name + ": " + e.message }`, want: `"ReferenceError: 'setTimeout' is not defined"`},
		{name: "WebAssembly", script: `return typeof WebAssembly`, want: `"undefined"`},
		{name: "shared memory", script: `return [typeof SharedArrayBuffer, typeof Atomics]`, want: `["undefined","undefined"]`},
		{name: "GC hooks", script: `return [typeof WeakRef, typeof FinalizationRegistry]`, want: `["undefined","undefined"]`},
		{name: "quickjs helpers", script: `return [typeof print, typeof std, typeof os, typeof scriptArgs, typeof bjson]`, want: `["undefined","undefined","undefined","undefined","undefined"]`},
		{name: "host functions", script: `return [typeof __runnel_call, typeof __runnel_log, typeof __runnel_report]`, want: `["undefined","undefined","undefined"]`},
		{name: "new Function", script: attempt(`new Function("return 1")`), want: compileRefused("Function")},
		{name: "Function", script: attempt(`Function("return 1")`), want: compileRefused("Function")},
		{name: "fn.constructor", script: attempt(`(function () {}).constructor("return 1")`), want: compileRefused("Function")},
		{name: "arrow constructor", script: attempt(`(() => 0).constructor("return 1")`), want: compileRefused("Function")},
		{name: "constructor.constructor", script: attempt(`[].constructor.constructor("return 1")`), want: compileRefused("Function")},
		{name: "__proto__ constructor", script: attempt(`({}).__proto__.constructor.constructor("return 1")`), want: compileRefused("Function")},
		{name: "string constructor", script: attempt(`"".constructor.constructor("return 1")`), want: compileRefused("Function")},
		{name: "tool constructor", script: attempt(`tools.s.echo.constructor("return 1")`), want: compileRefused("Function")},
		{name: "console constructor", script: attempt(`console.log.constructor("return 1")`), want: compileRefused("Function")},
		{name: "async function constructor", script: attempt(`Object.getPrototypeOf(async function () {}).constructor("return 1")`), want: compileRefused("AsyncFunction")},
		{name: "async arrow constructor", script: attempt(`(async () => {}).constructor("return 1")`), want: compileRefused("AsyncFunction")},
		{name: "generator constructor", script: attempt(`Object.getPrototypeOf(function* () {}).constructor("yield 1")`), want: compileRefused("GeneratorFunction")},
		{name: "async generator constructor", script: attempt(`Object.getPrototypeOf(async function* () {}).constructor("yield 1")`), want: compileRefused("AsyncGeneratorFunction")},
		{name: "class constructor", script: attempt(`(class {}).constructor("return 1")`), want: compileRefused("Function")},
		{name: "bound constructor", script: attempt(`(function () {}).bind(null).constructor("return 1")`), want: compileRefused("Function")},
		{name: "Reflect.construct", script: attempt(`Reflect.construct(Function, ["return 1"])`), want: compileRefused("Function")},
		{name: "Reflect.construct async", script: attempt(`Reflect.construct((async () => {}).constructor, ["return 1"])`), want: compileRefused("AsyncFunction")},
		{name: "descriptor", script: attempt(`Object.getOwnPropertyDescriptor(Function.prototype, "constructor").value("return 1")`), want: compileRefused("Function")},
		{name: "call", script: attempt(`Function.prototype.constructor.call(null, "return 1")`), want: compileRefused("Function")},
		{name: "ThrowTypeError constructor", script: attempt(`Object.getOwnPropertyDescriptor(Function.prototype, "caller").get.constructor("return 1")`), want: compileRefused("Function")},
		{name: "error constructor chain", script: attempt(`new Error().constructor.constructor("return 1")`), want: compileRefused("Function")},
		{name: "promise then constructor", script: attempt(`Promise.resolve().then.constructor("return 1")`), want: compileRefused("Function")},
		{
			name: "delete and redefine constructor",
			script: `const ok = [delete Function.prototype.constructor, Reflect.defineProperty(Function.prototype, "constructor", {value: 1})];
try { (function () {}).constructor("return 1"); return ok } catch (e) { return [ok, e.name] }`,
			want: `[[false,false],"TypeError"]`,
		},
		{
			name:   "caller",
			script: `let c = "none"; JSON.stringify({toJSON: function () { c = typeof arguments.callee.caller; return 1 }}); return c`,
			want:   `"undefined"`,
		},
		{
			name:   "instanceof still works",
			script: `return [(() => 1) instanceof Function, (async () => 1) instanceof Function, tools.s.echo instanceof Function]`,
			want:   `[true,true,true]`,
		},
		{
			name:   "import",
			script: `try { await import("os") } catch (e) { return e.message }`,
			want:   `"module load failed: import is not available in this sandbox (module \"os\"); call tools.<server>.<tool>(args) instead"`,
		},
		{
			name:   "import a data URL",
			script: `try { await import("data:text/javascript,export default 1") } catch (e) { return e.name }`,
			want:   `"TypeError"`,
		},
		{name: "import statement", script: `import fs from "fs"`, want: "SyntaxError"},
		{name: "Atomics.wait", script: `try { Atomics.wait(new Int32Array(4), 0, 0) } catch (e) { return e.name }`, want: `"ReferenceError"`},
		{
			name:   "globals",
			script: `return [Object.getOwnPropertyNames(globalThis).sort(), Object.getOwnPropertySymbols(globalThis).length, Object.keys(globalThis)]`,
			want:   `[["AggregateError","Array","ArrayBuffer","BigInt","BigInt64Array","BigUint64Array","Boolean","DataView","Date","Error","EvalError","Float16Array","Float32Array","Float64Array","Function","Infinity","Int16Array","Int32Array","Int8Array","InternalError","Iterator","JSON","Map","Math","NaN","Number","Object","Promise","Proxy","RangeError","ReferenceError","Reflect","RegExp","Set","String","Symbol","SyntaxError","TypeError","URIError","Uint16Array","Uint32Array","Uint8Array","Uint8ClampedArray","WeakMap","WeakSet","console","decodeURI","decodeURIComponent","encodeURI","encodeURIComponent","escape","globalThis","isFinite","isNaN","parseFloat","parseInt","tools","undefined","unescape"],0,[]]`,
		},
		{
			name:   "tools and console only",
			script: `return [Object.keys(tools), Object.keys(tools.s).length, Object.keys(console), Object.getPrototypeOf(tools)]`,
			want:   `[["s"],12,["log","info","debug","warn","error"],null]`,
		},
	}
	for _, tt := range tests {
		for _, kind := range sandboxKinds() {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				r := &recorder{}
				out := runIn(t, kind, r, tt.script, nil)
				if tt.want == "SyntaxError" {
					// A static import cannot be written in a function body.
					if out.Failure != FailureScript || !strings.HasPrefix(out.Error, "SyntaxError:") {
						t.Errorf("got %+v, want a SyntaxError", out)
					}
					return
				}
				if diff := cmp.Diff(got{Result: tt.want, Logs: []string{}}, view(out)); diff != "" {
					t.Errorf("Run(%q) (-want +got):\n%s", tt.script, diff)
				}
				if calls, _ := r.snapshot(); len(calls) > 0 {
					t.Errorf("calls %q, want none", calls)
				}
			})
		}
	}
}
