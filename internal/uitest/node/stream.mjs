// The playground's stream module (internal/playground/static/stream.js) in
// Node, without a browser: the SSE reader against bodies cut at awkward
// places, and the reducer against a paused and resumed conversation, to the
// exact UIMessages the page posts back. Prints "ok" or throws.

import assert from "node:assert/strict";
import { readEventStream, MessageStream, isPending } from "../../playground/static/stream.js";

// body is a ReadableStream of the given pieces, each one read().
function body(pieces) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const p of pieces) controller.enqueue(typeof p === "string" ? enc.encode(p) : p);
      controller.close();
    },
  });
}

async function read(pieces) {
  const got = [];
  await readEventStream(body(pieces), (c) => got.push(c));
  return got;
}

// The SSE reader.
{
  const euro = new TextEncoder().encode('data: {"type":"text-delta","delta":"€"}\n\n');
  const cut = euro.indexOf(0xe2) + 1; // inside the euro sign's three bytes
  assert.deepEqual(
    await read([
      ": keep-alive\n\n",
      'data: {"type":"start"}\r',
      "\n\r\n",
      'data:{"type":"a"}\n\n',
      "event: ignored\nid: 7\nretry: 10\n",
      'data: {"type":\ndata: "multi"}\n\n',
      euro.slice(0, cut),
      euro.slice(cut),
      'data: {"type":"cr"}\r\r',
      "data: [DONE]\n\n",
      'data: {"type":"after-done"}\n\n',
    ]),
    [{ type: "start" }, { type: "a" }, { type: "multi" }, { type: "text-delta", delta: "€" }, { type: "cr" }],
  );
  // An event the body ends in the middle of is dropped, as EventSource does.
  assert.deepEqual(await read(['data: {"type":"x"}\n\ndata: {"type":"cut"}']), [{ type: "x" }]);
  await assert.rejects(read(["data: {not json\n\n"]), SyntaxError);
}

// The reducer: a turn that pauses for an approval, its resume, and a new
// answer.
{
  const shown = { notices: [], usage: [], errors: [] };
  const hooks = {
    onNotice: (t) => shown.notices.push(t),
    onUsage: (u) => shown.usage.push(u),
    onError: (e) => shown.errors.push(e),
  };
  let n = 0;
  const newId = (prefix) => `${prefix}${++n}`;
  const messages = [{ id: "u1", role: "user", parts: [{ type: "text", text: "Please delete a.txt" }] }];
  const apply = (chunks) => {
    const s = new MessageStream(messages, newId, hooks);
    for (const c of chunks) s.apply(c);
    s.close();
  };

  apply([
    { type: "start", messageId: "m1" },
    { type: "start-step" },
    { type: "reasoning-start", id: "r" },
    { type: "reasoning-delta", id: "r", delta: "Deleting " },
    { type: "reasoning-delta", id: "r", delta: "needs a yes." },
    { type: "reasoning-end", id: "r" },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Asking.\n" },
    { type: "text-end", id: "t" },
    { type: "tool-input-start", toolCallId: "c1", toolName: "delete_file" },
    { type: "tool-input-delta", toolCallId: "c1", inputTextDelta: '{"pa' },
    { type: "tool-input-available", toolCallId: "c1", toolName: "delete_file", input: { path: "a.txt" } },
    { type: "tool-approval-request", approvalId: "int_c1", toolCallId: "c1", signature: "1.sig" },
    { type: "data-runnel-interaction", id: "int_c1", data: { kind: "user_approval", toolCallId: "c1" } },
    { type: "data-runnel-interaction", id: "int_c1", data: { kind: "user_approval", toolCallId: "c1", options: ["approve", "deny"] } },
    { type: "tool-input-start", toolCallId: "c2", toolName: "lookup", dynamic: true },
    { type: "tool-input-available", toolCallId: "c2", toolName: "lookup", input: {}, dynamic: true },
    { type: "tool-output-error", toolCallId: "c2", errorText: "no such thing" },
    { type: "data-runnel-notice", data: { text: "heads up" }, transient: true },
    { type: "data-runnel-usage", data: { input: 1, output: 2, total: 3, cost: 0 }, transient: true },
    { type: "data-runnel-result", data: { ok: true }, transient: true },
    { type: "some-future-chunk", whatever: 1 },
    { type: "finish-step" },
    { type: "finish", finishReason: "tool-calls" },
  ]);
  const paused = {
    id: "m1",
    role: "assistant",
    parts: [
      { type: "step-start" },
      { type: "reasoning", text: "Deleting needs a yes.", state: "done" },
      { type: "text", text: "Asking.\n", state: "done" },
      { type: "tool-delete_file", toolCallId: "c1", state: "approval-requested", input: { path: "a.txt" }, approval: { id: "int_c1", signature: "1.sig" } },
      { type: "data-runnel-interaction", id: "int_c1", data: { kind: "user_approval", toolCallId: "c1", options: ["approve", "deny"] } },
      { type: "dynamic-tool", toolCallId: "c2", toolName: "lookup", state: "output-error", input: {}, errorText: "no such thing" },
    ],
  };
  assert.deepEqual(messages.at(-1), paused);
  assert.deepEqual(shown, { notices: ["heads up"], usage: [{ input: 1, output: 2, total: 3, cost: 0 }], errors: [] });
  assert.deepEqual(messages[1].parts.map((p) => isPending(messages[1], p)), [false, false, false, true, false, false]);
  // A call waits for the browser only when runnel said it is a client tool.
  const client = { parts: [
    { type: "tool-connect", toolCallId: "k", state: "input-available" },
    { type: "data-runnel-interaction", id: "int_k", data: { kind: "client_tool", toolCallId: "k" } },
    { type: "tool-search", toolCallId: "s", state: "input-available" },
  ] };
  assert.deepEqual(client.parts.map((p) => isPending(client, p)), [true, false, false]);

  // The resume continues m1: a start naming it adds to it.
  messages[1].parts[3].state = "approval-responded";
  messages[1].parts[3].approval.approved = true;
  apply([
    { type: "start", messageId: "m1" },
    { type: "tool-output-available", toolCallId: "c1", output: "Deleted a.txt." },
    { type: "start-step" },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Gone." },
    { type: "text-end", id: "t" },
    { type: "finish-step" },
    { type: "finish", finishReason: "stop" },
  ]);
  assert.equal(messages.length, 2);
  assert.deepEqual(messages[1].parts.slice(3), [
    { type: "tool-delete_file", toolCallId: "c1", state: "output-available", input: { path: "a.txt" }, approval: { id: "int_c1", signature: "1.sig", approved: true }, output: "Deleted a.txt." },
    paused.parts[4],
    paused.parts[5],
    { type: "step-start" },
    { type: "text", text: "Gone.", state: "done" },
  ]);

  // A start naming another message, or none, begins a new one; an error
  // is shown, not stored; Stop leaves nothing drawn as streaming.
  messages.push({ id: "u2", role: "user", parts: [{ type: "text", text: "Again" }] });
  apply([
    { type: "start" },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Par" },
    { type: "error", errorText: "model unavailable" },
  ]);
  assert.deepEqual(messages.at(-1), { id: "msg_1", role: "assistant", parts: [{ type: "text", text: "Par", state: "done" }] });
  assert.deepEqual(shown.errors, ["model unavailable"]);
  apply([{ type: "start", messageId: "m9" }, { type: "tool-input-start", toolCallId: "c3", toolName: "x" }, { type: "tool-output-denied", toolCallId: "c3" }]);
  assert.deepEqual(messages.at(-1), { id: "m9", role: "assistant", parts: [{ type: "tool-x", toolCallId: "c3", state: "output-denied" }] });
  assert.equal(messages.length, 5);
}

console.log("ok");
