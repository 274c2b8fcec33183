// The Vercel AI SDK side of runnel's step-loop benchmark (docs/benchmarks.md).
//
// It is driven by `go run ./bench/steploop`, which starts the fake model and
// the callback server and then talks to this process over stdin/stdout, one
// JSON line each way, so Node starts (and its JIT warms up) once:
//
//	node steploop.mjs --model http://127.0.0.1:P/v1 --callback http://127.0.0.1:Q/tools/call --steps 20 --key K [--history FILE]
//	stdin:  {"runs": 20, "mode": "streamText"}   (or "generateText", or "floor": a bare fetch loop)
//	stdout: {"ms": [12.3, ...], "cpuMs": 210.5, "steps": 21, "toolCalls": 20}
//
// Each run is one streamText (or generateText) call with the `echo` tool,
// whose execute POSTs runnel's callback envelope (DESIGN §4.2) to the same
// callback server runnel uses, and stopWhen: stepCountIs(steps + 1) so the
// loop is ended by the model's text answer, as runnel's is. generateText
// asks the model for whole (not streamed) replies: that is what it does.
//
// --history FILE is a replayed conversation that comes before the prompt
// in every run, written by the Go driver in both forms the script needs:
// {"chat": [Chat Completions messages], "model": [AI SDK ModelMessages]}.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const { values: args } = parseArgs({
  options: {
    model: { type: "string" },
    callback: { type: "string" },
    steps: { type: "string", default: "20" },
    key: { type: "string", default: "x" },
    history: { type: "string" },
  },
});
if (!args.model || !args.callback) {
  console.error("usage: steploop.mjs --model BASE_URL --callback URL [--steps N] [--history FILE]");
  process.exit(2);
}
const toolSteps = Number(args.steps);
const history = args.history
  ? JSON.parse(readFileSync(args.history, "utf8"))
  : { chat: [], model: [] };
const prompt = { role: "user", content: "Call echo until told to stop." };

const openai = createOpenAI({ baseURL: args.model, apiKey: args.key });
const model = openai.chat("bench-model");

// The same tool runnel advertises: name, description and JSON schema.
const echo = tool({
  description: "Echo n back.",
  inputSchema: jsonSchema({
    type: "object",
    properties: { n: { type: "number" } },
    required: ["n"],
  }),
  execute: async (input, { toolCallId }) => {
    const res = await fetch(args.callback, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        data: { id: toolCallId, type: "function", function: { name: "echo", arguments: input } },
      }),
    });
    if (!res.ok) throw new Error(`callback HTTP ${res.status}`);
    const reply = await res.json();
    if (reply.call?.status?.code !== "STATUS_CODE_OK") {
      throw new Error(`callback failed: ${reply.call?.status?.message}`);
    }
    return reply.call.data.content;
  },
});

// The options of every SDK turn. The messages are a new array each turn,
// as an app builds one from its stored conversation.
function turnOptions() {
  return {
    model,
    tools: { echo },
    messages: [...history.model, prompt],
    stopWhen: stepCountIs(toolSteps + 1),
    maxRetries: 0,
  };
}

// streamRun runs one agent turn with streamText and checks it did what
// runnel's does.
async function streamRun() {
  const result = streamText(turnOptions());
  // A minimal consumer: read every part, as an app piping the stream would.
  let parts = 0;
  for await (const _part of result.fullStream) parts++;
  const [steps, text] = await Promise.all([result.steps, result.text]);
  return check(steps, text, parts);
}

// generateRun is the same turn with generateText.
async function generateRun() {
  const result = await generateText(turnOptions());
  return check(result.steps, result.text, 0);
}

function check(steps, text, parts) {
  const toolCalls = steps.reduce((n, s) => n + s.toolResults.length, 0);
  if (steps.length !== toolSteps + 1 || toolCalls !== toolSteps || text !== "done") {
    throw new Error(
      `unexpected run: ${steps.length} steps, ${toolCalls} tool results, text ${JSON.stringify(text)}`,
    );
  }
  return { steps: steps.length, toolCalls, parts };
}

// floorRun is the same HTTP traffic from a bare fetch loop with no agent
// framework: what Node itself costs, to tell it apart from the SDK's cost.
async function floorRun() {
  const tools = [{
    type: "function",
    function: { name: "echo", description: "Echo n back.", parameters: echo.inputSchema.jsonSchema },
  }];
  const messages = [...history.chat, prompt];
  for (let step = 0; ; step++) {
    const res = await fetch(`${args.model}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${args.key}` },
      body: JSON.stringify({
        model: "bench-model", stream: true, stream_options: { include_usage: true }, tools, messages,
      }),
    });
    const sse = await res.text();
    const m = /"id":"(call_[^"]+)"/.exec(sse);
    if (!m) {
      if (step !== toolSteps || !sse.includes('"finish_reason":"stop"')) {
        throw new Error(`floor ended after ${step} steps`);
      }
      return { steps: step + 1, toolCalls: step, parts: 0 };
    }
    const id = m[1];
    messages.push({
      role: "assistant", content: null,
      tool_calls: [{ id, type: "function", function: { name: "echo", arguments: '{"n":1}' } }],
    });
    const cb = await fetch(args.callback, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ data: { id, type: "function", function: { name: "echo", arguments: { n: 1 } } } }),
    });
    const reply = await cb.json();
    messages.push({ role: "tool", tool_call_id: id, content: reply.call.data.content });
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === "") continue;
  const { runs, mode } = JSON.parse(line);
  const one = { floor: floorRun, generateText: generateRun, streamText: streamRun, sdk: streamRun }[mode ?? "sdk"];
  if (!one) throw new Error(`unknown mode ${mode}`);
  const ms = [];
  let last;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    last = await one();
    ms.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(
    JSON.stringify({ ms, cpuMs: (cpu.user + cpu.system) / 1000, ...last }) + "\n",
  );
}
