// Feeds runnel's POST /v1/chat stream to one AI SDK release's own client
// code: DefaultChatTransport (which parses the SSE and validates every
// chunk with that release's uiMessageChunkSchema, strict in the ranges
// that reject unknown keys) and readUIMessageStream (which builds the
// UIMessage exactly as useChat does). Any chunk the client rejects throws,
// and fails the scenario.
//
//   node aisdk.mjs <package alias, e.g. ai-6.0.0> <runnel URL> <compat> [run fields]
//
// With run fields (a JSON object sent in every request body: an ACP
// harness, its tools and callback) the ACP scenarios run instead.
//
// Prints one JSON line per scenario ({name, ok, error?}) and exits 1 if any
// failed. Answers to approvals and client tools are written into the
// message the way AbstractChat's addToolApprovalResponse / addToolOutput
// write them, and sent back as the next request.
import assert from "node:assert/strict";

const [alias, baseURL, compat, runFieldsJSON] = process.argv.slice(2);
const runFields = runFieldsJSON ? JSON.parse(runFieldsJSON) : {};
const ai = await import(alias);
const approvals = compat !== "ai5";

function transport() {
  return new ai.DefaultChatTransport({ api: `${baseURL}/v1/chat`, body: { compat, ...runFields } });
}

// send posts the conversation and reads the answer into the continued
// assistant message (or a new one), as useChat does.
async function send(chat) {
  const last = chat.messages.at(-1);
  const continuing = last?.role === "assistant";
  const stream = await transport().sendMessages({
    chatId: chat.id, messages: chat.messages, trigger: "submit-message",
    messageId: continuing ? last.id : undefined, abortSignal: undefined,
  });
  let message, streamError;
  for await (const m of ai.readUIMessageStream({
    stream, message: continuing ? structuredClone(last) : undefined,
    onError: (e) => { streamError = e; },
  })) {
    message = m;
  }
  if (message) {
    chat.messages = continuing ? [...chat.messages.slice(0, -1), message] : [...chat.messages, message];
  }
  chat.error = streamError;
  return message;
}

function newChat(name) {
  return { id: `chat-${name}-${alias}`, messages: [] };
}

async function ask(chat, text) {
  chat.messages.push({ id: `u${chat.messages.length}`, role: "user", parts: [{ type: "text", text }] });
  return send(chat);
}

const toolParts = (m) => m.parts.filter((p) => p.type === "dynamic-tool" || p.type.startsWith("tool-"));
const text = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
const steps = (m) => m.parts.filter((p) => p.type === "step-start").length;
const interaction = (m, id) => m.parts.find((p) => p.type === "data-runnel-interaction" && p.data.toolCallId === id);

// answerApproval writes a person's answer into the tool part: on ai@6 and
// ai@7 as AbstractChat.addToolApprovalResponse does; on ai@5, where runnel
// asks as a client tool, as addToolResult does.
function answerApproval(chat, part, approved, reason) {
  const m = chat.messages.at(-1);
  m.parts = m.parts.map((p) => {
    if (p !== part) return p;
    if (approvals) return { ...p, state: "approval-responded", approval: { ...p.approval, approved, reason } };
    return { ...p, state: "output-available", output: { approved, ...(reason ? { reason } : {}) } };
  });
}

function addToolOutput(chat, part, output) {
  const m = chat.messages.at(-1);
  m.parts = m.parts.map((p) => (p === part ? { ...p, state: "output-available", output } : p));
}

const scenarios = {
  async "text and reasoning"() {
    const chat = newChat("hello");
    const m = await ask(chat, "Hello there");
    assert.equal(chat.error, undefined);
    assert.equal(m.role, "assistant");
    const reasoning = m.parts.find((p) => p.type === "reasoning");
    assert.ok(reasoning, "a reasoning part");
    assert.match(reasoning.text, /^The user said: Hello there\./);
    assert.equal(reasoning.state, "done");
    assert.match(text(m), /^Hello! I am a scripted model/);
    assert.equal(m.parts.find((p) => p.type === "text").state, "done");
    assert.equal(steps(m), 1);
  },

  async "server tool, multi-step"() {
    const chat = newChat("weather");
    const m = await ask(chat, "What is the weather in Paris?");
    assert.equal(chat.error, undefined);
    const [tool] = toolParts(m);
    assert.equal(tool.type, "dynamic-tool");
    assert.equal(tool.toolName, "get_weather");
    assert.equal(tool.state, "output-available");
    assert.deepEqual(tool.input, { city: "Paris" });
    assert.equal(tool.output, "18°C and sunny in Paris");
    assert.equal(steps(m), 2, "one step for the call, one for the answer");
    assert.equal(text(m), "Here is the weather: 18°C and sunny in Paris");
  },

  async "approval, approved"() {
    const chat = newChat("approve");
    const m = await ask(chat, "Please delete notes/q3-draft.txt");
    assert.equal(chat.error, undefined);
    const [tool] = toolParts(m);
    assert.equal(tool.toolName, "delete_file");
    assert.equal(interaction(m, tool.toolCallId).data.kind, "user_approval");
    if (approvals) {
      assert.equal(tool.state, "approval-requested");
      assert.equal(tool.approval.id, `int_${tool.toolCallId}`);
    } else {
      assert.equal(tool.state, "input-available");
      assert.deepEqual(interaction(m, tool.toolCallId).data.render, { kind: "approval" });
    }
    answerApproval(chat, tool, true);
    const after = await send(chat);
    assert.equal(chat.error, undefined);
    assert.equal(chat.messages.length, 2, "the answer continues the assistant message");
    assert.equal(after.id, m.id);
    const [done] = toolParts(after);
    assert.equal(done.state, "output-available");
    assert.match(done.output, /^Deleted notes\/q3-draft.txt/);
    assert.match(text(after), /Done\. Deleted notes\/q3-draft\.txt/);
    // The settled call comes before the resumed turn's first step.
    const at = (p) => after.parts.indexOf(p);
    assert.ok(at(done) < after.parts.findLastIndex((p) => p.type === "step-start"));
  },

  async "approval, denied"() {
    const chat = newChat("deny");
    const m = await ask(chat, "Please delete notes/q3-draft.txt");
    const [tool] = toolParts(m);
    answerApproval(chat, tool, false, "keep it");
    const after = await send(chat);
    assert.equal(chat.error, undefined);
    const [done] = toolParts(after);
    if (approvals) {
      assert.equal(done.state, "output-denied");
    } else {
      assert.equal(done.state, "output-error");
      assert.match(done.errorText, /denied/);
    }
    assert.match(text(after), /I left notes\/q3-draft\.txt alone/);
  },

  async "client tool round trip"() {
    const chat = newChat("connect");
    const m = await ask(chat, "Connect my Demo Drive account");
    assert.equal(chat.error, undefined);
    const [tool] = toolParts(m);
    assert.equal(tool.type, "tool-connect_account", "a client tool the frontend declares is static");
    assert.equal(tool.state, "input-available");
    const it = interaction(m, tool.toolCallId);
    assert.equal(it.data.kind, "client_tool");
    assert.equal(it.data.render.kind, "connect");
    addToolOutput(chat, tool, { connected: true, account: "demo@example.com" });
    const after = await send(chat);
    assert.equal(chat.error, undefined);
    const [done] = toolParts(after);
    assert.equal(done.state, "output-available");
    assert.deepEqual(done.output, { connected: true, account: "demo@example.com" });
    assert.match(text(after), /^Let's connect your Demo Drive\.Connected: your Demo Drive account is linked\.$/);
  },

  async "error mid-stream"() {
    const chat = newChat("fail");
    const m = await ask(chat, "Please fail now");
    assert.ok(chat.error, "the client saw an error");
    assert.match(chat.error.message, /model|provider|stream/i);
    assert.match(text(m), /^Partial/, "what streamed before the error is kept");
  },
};

// An ACP agent (the fake one, as claude) asks before it deletes; told of
// the answer in the next turn, it makes the call again under an id of its
// own. The part the person answered must end settled, with the one call's
// result, and nothing left for useChat to send again by itself.
const settledForGood = (chat) =>
  !approvals || !ai.lastAssistantMessageIsCompleteWithApprovalResponses({ messages: chat.messages });

const acpScenarios = {
  async "acp approval, approved"() {
    const chat = newChat("acp-approve");
    const m = await ask(chat, "Please delete notes/q3-draft.txt");
    assert.equal(chat.error, undefined);
    const [tool] = toolParts(m);
    assert.equal(tool.toolCallId, "toolu_A");
    assert.equal(tool.state, approvals ? "approval-requested" : "input-available");
    answerApproval(chat, tool, true);
    const after = await send(chat);
    assert.equal(chat.error, undefined);
    const tools = toolParts(after);
    assert.equal(tools.length, 1, "the agent's new id for the call is not a second part");
    assert.equal(tools[0].toolCallId, "toolu_A");
    assert.equal(tools[0].state, "output-available");
    assert.match(tools[0].output, /^Deleted notes\/q3-draft.txt/);
    assert.match(text(after), /Done: Deleted notes\/q3-draft\.txt/);
    assert.ok(settledForGood(chat), "useChat would send the approval again");
  },

  async "acp approval, denied"() {
    const chat = newChat("acp-deny");
    const m = await ask(chat, "Please delete notes/q3-draft.txt");
    const [tool] = toolParts(m);
    answerApproval(chat, tool, false, "keep it");
    const after = await send(chat);
    assert.equal(chat.error, undefined);
    const tools = toolParts(after);
    assert.equal(tools.length, 1);
    // ai@5 answered with the part's output, which stays.
    assert.equal(tools[0].state, approvals ? "output-denied" : "output-available");
    assert.match(text(after), /Understood, I left it alone\./);
    assert.ok(settledForGood(chat), "useChat would send the denial again");
  },
};

let failed = false;
for (const [name, run] of Object.entries(runFieldsJSON ? acpScenarios : scenarios)) {
  try {
    await run();
    console.log(JSON.stringify({ name, ok: true }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ name, ok: false, error: String(e?.stack ?? e) }));
  }
}
process.exit(failed ? 1 : 0);
