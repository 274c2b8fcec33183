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

// prelude runs in every fresh sandbox before the script. It is a function of
// the tool list (JSON [[server, tool, accessor], ...]), the result limit and
// the log limit, and returns {settle, error}: the function that reports how
// the script's promise settled, and the one that makes the Error a failed
// call rejects with.
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
const prelude = `(function runnel$prelude(toolList, maxResult, maxLog) {
"use strict";
var g = globalThis;
var call = g.__runnel_call, log = g.__runnel_log, report = g.__runnel_report;
var stringify = JSON.stringify, parse = JSON.parse, isArray = Array.isArray;
var defineProperty = Object.defineProperty, freeze = Object.freeze, create = Object.create;
var getPrototypeOf = Object.getPrototypeOf, ownKeys = Reflect.ownKeys, apply = Reflect.apply;
var slice = String.prototype.slice;
var ErrorCtor = Error, TypeErrorCtor = TypeError, InternalErrorCtor = InternalError;
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
// resolves with the result or rejects with an Error from runnel$error: no
// async function and no reaction of our own per call. It still never
// throws, it rejects.
function runnel$tool(server, name, label) {
	return function runnel$call(args) {
		if (args === undefined) args = {};
		if (args === null || typeof args !== "object" || isArray(args)) {
			return apply(promiseReject, PromiseCtor, [new TypeErrorCtor(label + " takes one object of arguments, e.g. " + label + "({...})")]);
		}
		var json;
		try {
			json = stringify(args);
		} catch (e) {
			return apply(promiseReject, PromiseCtor, [e]);
		}
		var promise = call(server, name, json);
		if (promise === undefined) return apply(promiseReject, PromiseCtor, [new ErrorCtor("out of memory")]);
		return promise;
	};
}
var tools = create(null);
var list = parse(toolList);
for (var i = 0; i < list.length; i++) {
	var server = list[i][0], name = list[i][1];
	if (tools[server] === undefined) tools[server] = create(null);
	tools[server][name] = runnel$tool(server, name, list[i][2]);
}
var servers = ownKeys(tools);
for (var i = 0; i < servers.length; i++) freeze(tools[servers[i]]);
defineProperty(g, "tools", {value: freeze(tools), writable: false, enumerable: false, configurable: false});

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
var room = maxLog;
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
	settle: function runnel$settle(p) {
		apply(promiseThen, apply(promiseResolve, PromiseCtor, [p]), [runnel$fulfilled, runnel$rejected]);
	},
	error: function runnel$error(message) {
		return new ErrorCtor(message);
	}
};
})`
