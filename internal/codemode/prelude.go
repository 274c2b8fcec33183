package codemode

import (
	"sync"

	"modernc.org/quickjs"
)

// preludeBytecode is the prelude compiled once per process, like a
// compiled regexp: parsing it took most of a fresh sandbox's time.
var preludeBytecode = sync.OnceValues(func() ([]byte, error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, err
	}
	defer vm.Close()
	return vm.Compile(prelude, quickjs.EvalGlobal)
})

// prelude runs in every sandbox when it is built, before any script is
// known (see Warm), and returns {install, settle, resolve, reject}, which Go
// keeps and the script never reaches:
//   - install gives the sandbox its script's tools and limits, once, when the
//     sandbox is handed to its script: the tool list (JSON [[server, tool],
//     ...]; a tool is called by its index in the list), the result limit
//     and the log limit;
//   - settle reports how the script's promise settled;
//   - resolve settles a call's promise with its content when it may be JSON
//     (see jsonShaped), parsed, or the text when it turns out not to be (a
//     SyntaxError; any other error, such as running out of memory, is the
//     script's); content that cannot be JSON does not go through it, Go
//     calls the promise's own resolving function;
//   - reject rejects a call's promise with an Error (a TypeError for
//     arguments that are not an object) whose message is the failure's.
//
// It takes the three host functions off the global object (so the script
// only reaches them through the wrappers), deletes every global not on the
// allow-list, and makes the Function, AsyncFunction, GeneratorFunction and
// AsyncGeneratorFunction constructors throw, which closes eval's other
// doors: fn.constructor, Reflect.construct(Function, ...), and
// Object.getPrototypeOf(async function(){}).constructor all reach one of
// those throwers, and no reference to a real constructor is left anywhere.
//
// The functions it defines are named runnel$..., so that their frames can be
// taken out of the stack traces the model reads (see cleanStack); the
// throwers keep that name too, so Function.name is runnel$forbidden. It keeps
// its own references to the built-ins it uses: a script that replaces
// JSON.stringify or Promise.prototype.then changes nothing here. It avoids
// template literals because it lives in a Go raw string.
const prelude = `(function runnel$prelude() {
"use strict";
var g = globalThis;
var call = g.__runnel_call, log = g.__runnel_log, report = g.__runnel_report;
var stringify = JSON.stringify, parse = JSON.parse;
var defineProperty = Object.defineProperty, freeze = Object.freeze, create = Object.create;
var getPrototypeOf = Object.getPrototypeOf, ownKeys = Reflect.ownKeys, apply = Reflect.apply;
var slice = String.prototype.slice;
var ErrorCtor = Error, TypeErrorCtor = TypeError, InternalErrorCtor = InternalError;
var SyntaxErrorProto = SyntaxError.prototype;
var StringCtor = String, PromiseCtor = Promise;
var promiseThen = Promise.prototype.then, promiseResolve = Promise.resolve, promiseReject = Promise.reject;

var allowed = create(null);
var names = ["globalThis", "undefined", "NaN", "Infinity",
	"Object", "Function", "Array", "Number", "Boolean", "String", "Symbol", "BigInt",
	"Math", "JSON", "Reflect", "Proxy", "Promise", "Date", "RegExp", "Iterator",
	"Map", "Set", "WeakMap", "WeakSet",
	"ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray",
	"Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "BigInt64Array",
	"BigUint64Array", "Float16Array", "Float32Array", "Float64Array",
	"Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError",
	"URIError", "InternalError", "AggregateError",
	"parseInt", "parseFloat", "isNaN", "isFinite", "decodeURI", "decodeURIComponent",
	"encodeURI", "encodeURIComponent", "escape", "unescape"];
for (var i = 0; i < names.length; i++) allowed[names[i]] = true;
var keys = ownKeys(g);
for (var i = 0; i < keys.length; i++) {
	var key = keys[i];
	if (typeof key === "string" && allowed[key] === true) continue;
	if (!delete g[key]) throw new TypeErrorCtor("sandbox: cannot remove global " + StringCtor(key));
}

function runnel$forbid(kind, proto) {
	var thrower = function runnel$forbidden() {
		throw new TypeErrorCtor(kind + " is not available in this sandbox: code cannot be compiled at run time");
	};
	defineProperty(thrower, "prototype", {value: proto, writable: false});
	defineProperty(proto, "constructor", {value: thrower, writable: false, enumerable: false, configurable: false});
	return thrower;
}
var FunctionThrower = runnel$forbid("Function", Function.prototype);
runnel$forbid("AsyncFunction", getPrototypeOf(async function () {}));
runnel$forbid("GeneratorFunction", getPrototypeOf(function* () {}));
runnel$forbid("AsyncGeneratorFunction", getPrototypeOf(async function* () {}));
defineProperty(g, "Function", {value: FunctionThrower, writable: true, enumerable: false, configurable: true});

// A tool is a plain function returning the host's promise, which the host
// settles through runnel$resolve and runnel$reject: no async function and
// no reaction of our own per call. It still never throws, it rejects. It
// does as little as it can, since it runs at every call: the host checks
// that the JSON is an object's (which also refuses arrays, primitives, and
// a toJSON that returns either), and a value without JSON (a function,
// undefined from toJSON) arrives as "", which is not.
function runnel$tool(index) {
	return function runnel$call(args) {
		var json;
		try {
			json = stringify(args === undefined ? noArgs : args);
		} catch (e) {
			return apply(promiseReject, PromiseCtor, [e]);
		}
		var promise = call(index, typeof json === "string" ? json : "");
		if (promise === undefined) return apply(promiseReject, PromiseCtor, [new ErrorCtor("out of memory")]);
		return promise;
	};
}
var noArgs = freeze(create(null));
var installed = false, maxResult = 0;
function runnel$install(toolList, resultLimit, logLimit) {
	if (installed) throw new TypeErrorCtor("sandbox: installed twice");
	installed = true;
	maxResult = resultLimit;
	room = logLimit;
	var tools = create(null);
	var list = parse(toolList);
	for (var i = 0; i < list.length; i++) {
		var server = list[i][0], name = list[i][1];
		if (tools[server] === undefined) tools[server] = create(null);
		tools[server][name] = runnel$tool(i);
	}
	var servers = ownKeys(tools);
	for (var i = 0; i < servers.length; i++) freeze(tools[servers[i]]);
	defineProperty(g, "tools", {value: freeze(tools), writable: false, enumerable: false, configurable: false});
}

function runnel$format(args) {
	var out = "";
	for (var i = 0; i < args.length; i++) {
		var v = args[i], s;
		try {
			if (typeof v === "string") s = v;
			else if (v instanceof ErrorCtor) s = StringCtor(v.name) + ": " + StringCtor(v.message);
			else if (typeof v === "function") s = "[Function " + (v.name || "anonymous") + "]";
			else if (typeof v === "bigint") s = StringCtor(v) + "n";
			else if (typeof v === "object" && v !== null) {
				s = stringify(v);
				if (s === undefined) s = StringCtor(v);
			} else s = StringCtor(v);
		} catch (e) {
			s = "[value that cannot be printed]";
		}
		out += (i > 0 ? " " : "") + s;
	}
	return out;
}
var room = -1; // until install: nothing is logged
function runnel$console(prefix) {
	return function runnel$log() {
		if (room < 0) return;
		var line = prefix + runnel$format(arguments);
		// A character is at least a byte: room+1 of them are enough for
		// the host to see that the line does not fit.
		if (line.length > room + 1) line = apply(slice, line, [0, room + 1]);
		room = log(line);
	};
}
var console = create(null);
console.log = runnel$console("");
console.info = runnel$console("");
console.debug = runnel$console("");
console.warn = runnel$console("[warn] ");
console.error = runnel$console("[error] ");
defineProperty(g, "console", {value: freeze(console), writable: true, enumerable: false, configurable: true});

function runnel$describe(e) {
	try {
		if (e instanceof ErrorCtor) {
			var s = StringCtor(e.name) + ": " + StringCtor(e.message);
			if (typeof e.stack === "string") s += "\n" + e.stack;
			return s;
		}
		var json = stringify(e);
		return "Uncaught " + (json === undefined ? StringCtor(e) : json);
	} catch (err) {
		return "Uncaught exception that cannot be printed";
	}
}
function runnel$fulfilled(v) {
	var json;
	try {
		json = stringify(v);
	} catch (e) {
		report("unserialisable", runnel$describe(e));
		return;
	}
	if (json === undefined) json = "null";
	if (json.length > maxResult) report("too_large", StringCtor(json.length));
	else report("ok", json);
}
function runnel$rejected(e) {
	if (e instanceof InternalErrorCtor && e.message === "interrupted") report("interrupted", "");
	else if (e instanceof InternalErrorCtor && e.message === "out of memory") report("memory", "");
	else report("error", runnel$describe(e));
}
return {
	install: runnel$install,
	settle: function runnel$settle(p) {
		apply(promiseThen, apply(promiseResolve, PromiseCtor, [p]), [runnel$fulfilled, runnel$rejected]);
	},
	resolve: function runnel$resolve(resolve, content, text) {
		var value;
		try {
			value = parse(content);
		} catch (e) {
			if (getPrototypeOf(e) !== SyntaxErrorProto) throw e;
			value = text === undefined ? content : text;
		}
		resolve(value);
	},
	reject: function runnel$reject(reject, message, typeError) {
		reject(typeError === true ? new TypeErrorCtor(message) : new ErrorCtor(message));
	}
};
})`
