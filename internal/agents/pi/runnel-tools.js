// runnel-tools: the Pi extension runnel writes into a Pi run's agent directory
// (<PI_CODING_AGENT_DIR>/extensions/runnel-tools.js). Pi has no MCP client; this
// extension gives the model runnel's tools and puts Pi's own tools behind
// runnel's permission gate.
//
// Plain ES module JavaScript on purpose: Pi loads *.js and *.ts extensions
// through jiti with no build step, and a .js file can also be checked and
// tested with plain Node. It imports only node: built-ins, so it resolves from
// any directory. It never writes to stdout or stderr: under pi-acp, Pi's stdout
// is the RPC channel that pi-acp turns into ACP.
//
// Configuration: the JSON file named by $RUNNEL_PI_TOOLS, written by runnel per run:
//
//   {"url": "http://127.0.0.1:PORT/mcp",
//    "headers": {"Authorization": "Bearer ..."},
//    "tools": [{"name": "...", "description": "...", "inputSchema": {...}}],
//    "gateBuiltins": true,
//    "builtins": ["read", "bash", "edit", "write"]}      (optional)
//
// 1. Every entry of "tools" becomes a Pi tool of the same name whose
//    parameters are its JSON schema. A call is sent to runnel's internal MCP
//    server over streamable HTTP (initialize, notifications/initialized,
//    tools/call) with "headers" on every request. A failed request ends the
//    call as an error at once. A connection closed without a response (runnel
//    does that when a call must pause for a person) also fails the call at
//    once and, through the result's `terminate`, ends Pi's turn without
//    another model request. Pi's abort signal aborts the request.
// 2. With "gateBuiltins", every call of a tool that is not in "tools" (Pi's
//    read, bash, edit, write, grep, find, ls, powershell, and any other
//    extension's tools) first asks ctx.ui.confirm; pi-acp turns that into an
//    ACP session/request_permission. The call runs only when confirmed. The
//    confirm title is a short human summary; the confirm message is a JSON
//    object a client can parse (see permissionMessage below), because pi-acp's
//    permission request carries neither the tool name nor its arguments
//    otherwise.
// 3. With "builtins", the extension sets Pi's active tools to those built-ins
//    plus runnel's tools at session start. runnel pairs it with
//    "defaultTools": [] in settings.json, so a Pi that failed to load this
//    extension has no built-in tool at all (fail closed).
//
// Without $RUNNEL_PI_TOOLS the extension does nothing (pi-acp also runs
// `pi --version`). With an unreadable or invalid file it registers no tool and
// blocks every tool call, rather than letting Pi's tools run ungated.

import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";

const CONFIG_ENV = "RUNNEL_PI_TOOLS";
const PERMISSION_MARKER = "runnel.pi.permission/v1";
const MCP_PROTOCOL_VERSION = "2025-11-25";
const INIT_TIMEOUT_MS = 30_000;
const NOTIFY_TIMEOUT_MS = 2_000;
const MAX_RESPONSE_BYTES = 64 << 20;
const TITLE_MAX = 200;

/** @param {import("@earendil-works/pi-coding-agent").ExtensionAPI} pi */
export default function runnelTools(pi) {
	const path = process.env[CONFIG_ENV];
	if (!path) return;

	let cfg;
	try {
		cfg = parseConfig(readFileSync(path, "utf8"));
	} catch (err) {
		const reason = `runnel: no tool may run, the tool configuration ${path} is unusable: ${errorText(err)}`;
		pi.on("tool_call", () => ({ block: true, reason }));
		return;
	}

	const client = new McpClient(cfg.url, cfg.headers);
	const runnelNames = new Set();
	for (const tool of cfg.tools) {
		runnelNames.add(tool.name);
		pi.registerTool({
			name: tool.name,
			label: tool.title || tool.name,
			description: tool.description,
			promptSnippet: firstLine(tool.description) || undefined,
			parameters: tool.inputSchema,
			async execute(toolCallId, params, signal) {
				let result;
				try {
					result = await client.callTool(tool.name, params ?? {}, signal);
				} catch (err) {
					if (!(err instanceof Interrupted)) throw err;
					// runnel closed the call on purpose (it pauses for a person) or went
					// away: fail the call and end Pi's turn without another model request.
					return { content: [{ type: "text", text: err.message }], details: { runnelInterrupted: true }, terminate: true };
				}
				return toPiResult(result);
			},
		});
	}
	// A returned result cannot mark itself as an error; this marks the interrupted ones.
	pi.on("tool_result", (event) => (event.details?.runnelInterrupted === true ? { isError: true } : undefined));

	if (cfg.builtins) {
		const active = [...cfg.builtins, ...runnelNames];
		pi.on("session_start", () => {
			pi.setActiveTools(active);
		});
	}

	if (cfg.gateBuiltins) {
		pi.on("tool_call", async (event, ctx) => {
			if (runnelNames.has(event.toolName)) return undefined;
			if (!ctx.hasUI) {
				return { block: true, reason: `runnel: ${event.toolName} needs permission and there is no one to ask; it did not run.` };
			}
			const allowed = await ctx.ui.confirm(
				permissionTitle(event.toolName, event.input),
				permissionMessage(event.toolCallId, event.toolName, event.input),
				{ signal: ctx.signal },
			);
			if (allowed === true) return undefined;
			return { block: true, reason: `Permission to run ${event.toolName} was not granted; the tool did not run.` };
		});
	}

	pi.on("session_shutdown", async () => {
		await client.close();
	});
}

// ---- configuration ----

function parseConfig(text) {
	const raw = JSON.parse(text);
	if (!isObject(raw)) throw new Error("not a JSON object");
	const url = new URL(String(raw.url ?? ""));
	if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`url: unsupported scheme ${url.protocol}`);
	const headers = {};
	if (raw.headers !== undefined) {
		if (!isObject(raw.headers)) throw new Error("headers: not an object");
		for (const [k, v] of Object.entries(raw.headers)) {
			if (typeof v !== "string") throw new Error(`headers.${k}: not a string`);
			headers[k] = v;
		}
	}
	if (!Array.isArray(raw.tools ?? [])) throw new Error("tools: not an array");
	const tools = [];
	const seen = new Set();
	for (const [i, t] of (raw.tools ?? []).entries()) {
		if (!isObject(t) || typeof t.name !== "string" || t.name === "") throw new Error(`tools[${i}]: no name`);
		if (seen.has(t.name)) throw new Error(`tools[${i}]: duplicate name ${t.name}`);
		seen.add(t.name);
		tools.push({
			name: t.name,
			title: typeof t.title === "string" ? t.title : "",
			description: typeof t.description === "string" ? t.description : "",
			inputSchema: objectSchema(t.inputSchema),
		});
	}
	let builtins;
	if (raw.builtins !== undefined) {
		if (!Array.isArray(raw.builtins) || raw.builtins.some((b) => typeof b !== "string")) {
			throw new Error("builtins: not an array of strings");
		}
		builtins = raw.builtins;
	}
	return { url: url.toString(), headers, tools, gateBuiltins: raw.gateBuiltins !== false, builtins };
}

// Pi validates arguments against the schema (plain JSON Schema is fine);
// models need an object schema at the top.
function objectSchema(s) {
	if (!isObject(s)) return { type: "object", properties: {} };
	const out = { ...s };
	if (out.type === undefined) out.type = "object";
	if (out.type === "object" && out.properties === undefined) out.properties = {};
	return out;
}

// ---- permission prompt ----

function permissionTitle(toolName, input) {
	let detail = "";
	if (isObject(input)) {
		const v = input.command ?? input.path ?? input.pattern ?? input.file_path;
		detail = typeof v === "string" ? v : JSON.stringify(input);
	}
	const title = detail ? `${toolName}: ${detail}` : toolName;
	return title.length > TITLE_MAX ? title.slice(0, TITLE_MAX - 1) + "…" : title;
}

// The machine-readable part of the confirm dialog. pi-acp sends it as
// toolCall.rawInput.message of the session/request_permission.
function permissionMessage(toolCallId, toolName, input) {
	return JSON.stringify({ runnel: PERMISSION_MARKER, toolCallId, toolName, input: input ?? {} });
}

// ---- MCP result -> Pi tool result ----

function toPiResult(result) {
	if (!isObject(result)) throw new Error("runnel: the MCP server returned no tool result");
	const content = [];
	for (const part of Array.isArray(result.content) ? result.content : []) {
		if (!isObject(part)) continue;
		if (part.type === "text" && typeof part.text === "string") {
			content.push({ type: "text", text: part.text });
		} else if (part.type === "image" && typeof part.data === "string" && typeof part.mimeType === "string") {
			content.push({ type: "image", data: part.data, mimeType: part.mimeType });
		} else if (part.type === "resource" && isObject(part.resource) && typeof part.resource.text === "string") {
			content.push({ type: "text", text: part.resource.text });
		} else {
			content.push({ type: "text", text: JSON.stringify(part) });
		}
	}
	if (content.length === 0 && result.structuredContent !== undefined) {
		content.push({ type: "text", text: JSON.stringify(result.structuredContent) });
	}
	if (result.isError === true) {
		const text = content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
		throw new Error(text || "the tool reported an error");
	}
	return { content, details: result.structuredContent !== undefined ? { structuredContent: result.structuredContent } : undefined };
}

// ---- MCP streamable HTTP client ----

class McpClient {
	constructor(url, headers) {
		this.url = new URL(url);
		this.headers = headers;
		this.mod = this.url.protocol === "https:" ? https : http;
		// No keep-alive: a reused socket that the server closed while idle would fail a
		// tools/call exactly like a deliberate close, so every request gets its own connection.
		this.agent = new this.mod.Agent({ keepAlive: false });
		this.sessionId = undefined;
		this.protocolVersion = undefined;
		this.ready = undefined;
		this.nextId = 1;
	}

	async callTool(name, args, signal) {
		for (let attempt = 0; ; attempt++) {
			await withSignal(this.initialize(), signal);
			const id = this.nextId++;
			const session = this.sessionId;
			try {
				const res = await this.post({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } }, { id, signal });
				if (res.error) throw new Error(`runnel: tool ${name} failed: MCP error ${res.error.code}: ${res.error.message}`);
				return res.result;
			} catch (err) {
				if (err instanceof SessionGone && attempt === 0 && session !== undefined) {
					// The server forgot the session and did not run the call: start over once.
					if (this.sessionId === session) this.reset();
					continue;
				}
				if (signal?.aborted) {
					this.notify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "aborted" } });
					throw new Error(`runnel: tool ${name} was aborted`);
				}
				if (err instanceof CallError && err.interrupted) throw new Interrupted(`runnel: tool ${name} was interrupted: ${err.message}; it has no result.`);
				if (err instanceof CallError) throw new Error(`runnel: tool ${name} failed: ${err.message}`);
				throw err;
			}
		}
	}

	initialize() {
		this.ready ??= this.handshake().catch((err) => {
			this.reset();
			throw new Error(`runnel: cannot reach the tool server: ${errorText(err)}`);
		});
		return this.ready;
	}

	async handshake() {
		const id = this.nextId++;
		const res = await this.post({
			jsonrpc: "2.0", id, method: "initialize",
			params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "runnel-pi-tools", version: "1" } },
		}, { id, timeoutMs: INIT_TIMEOUT_MS, initialize: true });
		if (res.error) throw new Error(`initialize: MCP error ${res.error.code}: ${res.error.message}`);
		this.protocolVersion = typeof res.result?.protocolVersion === "string" ? res.result.protocolVersion : MCP_PROTOCOL_VERSION;
		await this.post({ jsonrpc: "2.0", method: "notifications/initialized" }, { timeoutMs: INIT_TIMEOUT_MS });
	}

	reset() {
		this.ready = undefined;
		this.sessionId = undefined;
		this.protocolVersion = undefined;
	}

	notify(message) {
		if (!this.ready) return;
		this.post(message, { timeoutMs: NOTIFY_TIMEOUT_MS }).catch(() => {});
	}

	async close() {
		const { sessionId: session, protocolVersion } = this;
		this.reset();
		if (session !== undefined) {
			await this.request("DELETE", undefined, { timeoutMs: NOTIFY_TIMEOUT_MS, session, protocolVersion }).catch(() => {});
		}
	}

	// POST one JSON-RPC message. With opts.id, resolves with the response of
	// that id (from a JSON or an SSE body); otherwise resolves when the server
	// accepted the message.
	post(message, opts) {
		return this.request("POST", JSON.stringify(message), opts);
	}

	request(method, body, opts) {
		const { id, signal, timeoutMs, initialize } = opts;
		const session = opts.session ?? this.sessionId;
		const headers = { ...this.headers, accept: "application/json, text/event-stream" };
		if (body !== undefined) {
			headers["content-type"] = "application/json";
			headers["content-length"] = Buffer.byteLength(body);
		}
		if (session !== undefined) headers["mcp-session-id"] = session;
		const version = opts.protocolVersion ?? this.protocolVersion;
		if (version !== undefined) headers["mcp-protocol-version"] = version;

		return new Promise((resolve, reject) => {
			let done = false;
			let timer;
			const finish = (err, value) => {
				if (done) return;
				done = true;
				if (timer) clearTimeout(timer);
				signal?.removeEventListener("abort", onAbort);
				if (err) {
					req.destroy();
					reject(err);
				} else {
					resolve(value);
				}
			};
			const onAbort = () => finish(new CallError("aborted"));
			const req = this.mod.request(this.url, { method, headers, agent: this.agent }, (res) => {
				const status = res.statusCode ?? 0;
				if (initialize) {
					const sid = res.headers["mcp-session-id"];
					if (typeof sid === "string" && sid !== "") this.sessionId = sid;
				}
				if (status === 404 && session !== undefined) {
					res.resume();
					finish(new SessionGone());
					return;
				}
				if (status < 200 || status > 299) {
					readAll(res, 4096).then(
						(text) => finish(new CallError(`HTTP ${status}${text ? ": " + text.trim() : ""}`)),
						() => finish(new CallError(`HTTP ${status}`)),
					);
					return;
				}
				if (id === undefined) {
					res.resume();
					finish(undefined, undefined);
					return;
				}
				const type = String(res.headers["content-type"] ?? "").toLowerCase();
				if (type.startsWith("text/event-stream")) {
					readSse(res, id, (err, msg) => finish(err, msg));
				} else {
					readAll(res, MAX_RESPONSE_BYTES).then((text) => {
						let parsed;
						try {
							parsed = JSON.parse(text);
						} catch {
							finish(new CallError(`unreadable response (${type || "no content type"}, HTTP ${status})`));
							return;
						}
						const msg = (Array.isArray(parsed) ? parsed : [parsed]).find((m) => isObject(m) && m.id === id && ("result" in m || "error" in m));
						finish(msg ? undefined : new CallError("the response did not answer the request"), msg);
					}, (err) => finish(new CallError(`the connection closed before the response was complete (${errorText(err)})`, true)));
				}
			});
			let connected = false;
			req.on("socket", (sock) => {
				if (!sock.connecting) connected = true;
				else sock.once("connect", () => { connected = true; });
			});
			req.on("error", (err) => finish(connected
				? new CallError(`the connection closed without a response (${errorText(err)})`, true)
				: new CallError(`cannot connect (${errorText(err)})`)));
			if (timeoutMs) timer = setTimeout(() => finish(new CallError(`no response within ${timeoutMs} ms`)), timeoutMs);
			if (signal) {
				if (signal.aborted) {
					onAbort();
					return;
				}
				signal.addEventListener("abort", onAbort, { once: true });
			}
			req.end(body);
		});
	}
}

// interrupted: the request reached the server and the connection then closed
// (or the stream ended) without a response.
class CallError extends Error {
	constructor(message, interrupted = false) {
		super(message);
		this.interrupted = interrupted;
	}
}
class Interrupted extends Error {}
class SessionGone extends Error {
	constructor() {
		super("the MCP session is gone (HTTP 404)");
	}
}

// Read an SSE body until the JSON-RPC response with the given id arrives.
// Notifications and server requests on the stream are ignored (this client
// declares no capabilities). The stream ending first is an error.
function readSse(res, id, cb) {
	let buf = "";
	let data = [];
	let size = 0;
	let settled = false;
	const settle = (err, msg) => {
		if (settled) return;
		settled = true;
		res.destroy();
		cb(err, msg);
	};
	const dispatch = () => {
		if (data.length === 0) return;
		const payload = data.join("\n");
		data = [];
		let msg;
		try {
			msg = JSON.parse(payload);
		} catch {
			return;
		}
		for (const m of Array.isArray(msg) ? msg : [msg]) {
			if (isObject(m) && m.id === id && ("result" in m || "error" in m)) {
				settle(undefined, m);
				return;
			}
		}
	};
	res.setEncoding("utf8");
	res.on("data", (chunk) => {
		size += chunk.length;
		if (size > MAX_RESPONSE_BYTES) {
			settle(new CallError("the response is too large"));
			return;
		}
		buf += chunk;
		let nl;
		while (!settled && (nl = buf.indexOf("\n")) >= 0) {
			let line = buf.slice(0, nl);
			buf = buf.slice(nl + 1);
			if (line.endsWith("\r")) line = line.slice(0, -1);
			if (line === "") dispatch();
			else if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
		}
	});
	res.on("end", () => {
		dispatch();
		settle(new CallError("the server ended the stream without a response", true));
	});
	res.on("error", (err) => settle(new CallError(`the connection closed without a response (${errorText(err)})`, true)));
	res.on("close", () => settle(new CallError("the connection closed without a response", true)));
}

function readAll(res, limit) {
	return new Promise((resolve, reject) => {
		const chunks = [];
		let size = 0;
		res.on("data", (c) => {
			size += c.length;
			if (size > limit) {
				res.destroy(new Error("response too large"));
				return;
			}
			chunks.push(c);
		});
		res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
		res.on("error", reject);
		res.on("aborted", () => reject(new Error("aborted")));
		res.on("close", () => {
			if (!res.complete) reject(new Error("the connection closed"));
		});
	});
}

function withSignal(promise, signal) {
	if (!signal) return promise;
	if (signal.aborted) return Promise.reject(new Error("runnel: the tool call was aborted"));
	return new Promise((resolve, reject) => {
		const onAbort = () => reject(new Error("runnel: the tool call was aborted"));
		signal.addEventListener("abort", onAbort, { once: true });
		promise.then(
			(v) => { signal.removeEventListener("abort", onAbort); resolve(v); },
			(e) => { signal.removeEventListener("abort", onAbort); reject(e); },
		);
	});
}

function isObject(v) {
	return typeof v === "object" && v !== null && !Array.isArray(v);
}

function firstLine(s) {
	const line = String(s ?? "").split("\n", 1)[0].trim();
	return line.length > TITLE_MAX ? line.slice(0, TITLE_MAX - 1) + "…" : line;
}

function errorText(err) {
	if (err instanceof Error) {
		const code = /** @type {any} */ (err).code;
		return code && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
	}
	return String(err);
}
