// The playground page: a chat on runnel's POST /v1/chat. It keeps the
// conversation exactly as the AI SDK's useChat would (UIMessage[]) and
// posts all of it on every request, because runnel keeps nothing between
// requests: an approval or a client tool's output travels back inside the
// replayed messages (docs/pause-resume.md).
//
// Model and tool data are only ever drawn with textContent; the page's
// Content-Security-Policy forbids inline script and style.

import { readEventStream, MessageStream, isToolPart, toolName, clientInteraction, isPending } from "./stream.js";
import { ConnectFlow } from "./connect.js";

const tokenKey = "runnel-playground-token";

const suggestions = [
  { label: "Say hello", prompt: "Hello! What can you do?" },
  { label: "Delete a file", prompt: "Please delete notes/q3-draft.txt" },
  { label: "Connect my drive", prompt: "Connect my Demo Drive account" },
];

// h builds an element. props: class, text, testid, on<event> handlers, and
// attributes; children are nodes or strings (set as text, never parsed).
function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "testid") el.dataset.testid = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  el.append(...children.filter((c) => c != null));
  return el;
}

// setText writes only a change, so a streaming update leaves the rest of a
// message (and any text selected in it) alone.
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

function newId(prefix) {
  // getRandomValues, unlike randomUUID, works on plain http to a remote host.
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function pretty(value) {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

function apiURL(path) {
  // Relative to the page, so a runnel behind a path prefix still works.
  return new URL("../" + path, location.href);
}

function storedToken() {
  try {
    return sessionStorage.getItem(tokenKey) ?? "";
  } catch {
    return "";
  }
}

const badges = {
  "input-streaming": ["running", "running"],
  "input-available": ["running", "running"],
  "approval-requested": ["waiting for approval", "waiting"],
  "output-available": ["done", "done"],
  "output-error": ["error", "error"],
  "output-denied": ["denied", "denied"],
};

function badgeFor(message, part, live) {
  if (part.state === "approval-responded") {
    return part.approval?.approved ? ["approved", "running"] : ["denied", "denied"];
  }
  if (isPending(message, part)) {
    if (!live) return ["not answered", "denied"];
    if (part.state === "input-available") return ["waiting for you", "waiting"];
  }
  return badges[part.state] ?? [part.state ?? "unknown", "running"];
}

class Playground {
  constructor() {
    const $ = (id) => document.querySelector(`[data-testid="${id}"]`);
    this.dom = {
      thread: $("thread"), messages: $("messages"), empty: $("empty"), suggestions: $("suggestions"),
      error: $("error"), form: $("composer-form"), composer: $("composer"), send: $("send"), stop: $("stop"),
      status: $("status"), usage: $("usage"), picker: $("model-picker"), model: $("model"),
      newChat: $("new-chat"), tokenPanel: $("token-panel"), tokenInput: $("token-input"), tokenHint: $("token-hint"),
    };
    this.chatId = newId("chat_");
    this.messages = [];
    this.views = new Map(); // message object → its view
    this.flows = new Map(); // toolCallId → the ConnectFlow running for it
    this.controller = null; // the AbortController of the request in flight
    this.resumePending = false; // an answer came while a stream was still open
    this.retries = new Map(); // what to run again once a token is given: "profiles", "chat"
    this.dirty = new Set();
  }

  start() {
    const d = this.dom;
    for (const s of suggestions) {
      d.suggestions.append(h("button", { type: "button", class: "chip", testid: "suggestion", onclick: () => this.submit(s.prompt) }, s.label));
    }
    d.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit(d.composer.value);
    });
    d.composer.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit(d.composer.value);
      }
    });
    d.stop.addEventListener("click", () => this.controller?.abort());
    d.newChat.addEventListener("click", () => this.newChat());
    d.tokenPanel.addEventListener("submit", (e) => {
      e.preventDefault();
      this.saveToken(d.tokenInput.value.trim());
    });
    this.loadProfiles();
    d.composer.focus();
  }

  headers() {
    const headers = { "Content-Type": "application/json" };
    const token = storedToken();
    if (token) headers.Authorization = "Bearer " + token;
    return headers;
  }

  async loadProfiles() {
    let res;
    try {
      res = await fetch(apiURL("v1/profiles"), { headers: this.headers() });
    } catch {
      return; // the chat request will say what is wrong
    }
    if (res.status === 401) {
      await this.refuse(res, "profiles", () => this.loadProfiles());
      return;
    }
    if (!res.ok) return; // a runnel without profiles: the picker stays hidden
    const { profiles = [] } = await res.json().catch(() => ({}));
    const select = this.dom.model;
    select.replaceChildren();
    for (const p of profiles) {
      const option = h("option", { value: p.name, title: p.model }, p.label || p.name);
      option.selected = Boolean(p.default);
      select.append(option);
    }
    this.dom.picker.hidden = profiles.length === 0;
  }

  askToken(sentence, what, retry) {
    this.retries.set(what, retry);
    this.dom.tokenHint.textContent = sentence;
    this.dom.tokenPanel.hidden = false;
    this.dom.tokenInput.focus();
  }

  saveToken(token) {
    if (!token) return;
    try {
      sessionStorage.setItem(tokenKey, token);
    } catch {
      this.showError("This browser does not let the page keep the token (sessionStorage is off).");
      return;
    }
    this.dom.tokenPanel.hidden = true;
    this.dom.tokenInput.value = "";
    const retries = [...this.retries.values()];
    this.retries.clear();
    for (const retry of retries) retry();
  }

  // refuse shows the sentence of a non-200 answer; a 401 asks for a token
  // instead, and runs retry (what names it) once one is given.
  async refuse(res, what, retry) {
    let sentence = `runnel answered HTTP ${res.status}.`;
    const body = await res.json().catch(() => null);
    if (typeof body?.error === "string" && body.error) sentence = body.error;
    // A 401 is answered in the token panel, not as a chat error.
    if (res.status === 401) this.askToken(sentence, what, retry);
    else this.showError(sentence);
  }

  submit(text) {
    if (this.controller || !text.trim()) return;
    this.abandonFlows();
    this.messages.push({ id: newId("msg_"), role: "user", parts: [{ type: "text", text }] });
    this.dom.composer.value = "";
    this.renderAll();
    this.scrollToEnd();
    this.request();
  }

  newChat() {
    this.controller?.abort();
    this.controller = null;
    this.resumePending = false;
    this.retries.delete("chat"); // it would post the new, empty chat
    this.abandonFlows();
    this.chatId = newId("chat_");
    this.messages = [];
    this.views.clear();
    this.dom.messages.replaceChildren();
    this.dom.usage.textContent = "";
    this.hideError();
    this.setBusy(false);
    this.setStatus("idle", "Ready");
    this.renderAll();
    this.dom.composer.focus();
  }

  // request posts the whole conversation and streams the answer into it.
  // messageId names the assistant message a resume continues.
  async request(messageId) {
    const controller = new AbortController();
    const messages = this.messages;
    this.controller = controller;
    this.setBusy(true);
    this.hideError();
    this.setStatus("streaming", "Streaming…");
    const body = { id: this.chatId, messages, trigger: "submit-message", profile: this.dom.model.value || undefined, compat: "ai7" };
    if (messageId) body.messageId = messageId;
    let stream = null;
    let failed = false;
    let result = null;
    try {
      const res = await fetch(apiURL("v1/chat"), {
        method: "POST", headers: this.headers(), body: JSON.stringify(body), signal: controller.signal,
      });
      if (!res.ok) {
        failed = true;
        await this.refuse(res, "chat", () => this.request(messageId));
        return;
      }
      stream = new MessageStream(messages, newId, {
        onNotice: (text) => this.notice(stream.message, text),
        onUsage: (usage) => this.showUsage(usage),
        onResult: (r) => (result = r),
        onError: (text) => {
          failed = true;
          this.showError(text);
        },
      });
      await readEventStream(res.body, (chunk) => {
        const changed = stream.apply(chunk);
        if (changed) this.schedule(changed);
        // An error chunk ends the chat turn; nothing after it is drawn.
        if (failed) throw new StreamStopped();
      });
    } catch (err) {
      if (!controller.signal.aborted && !(err instanceof StreamStopped)) {
        failed = true;
        this.showError(`The connection to runnel failed: ${err.message}`);
      }
    } finally {
      stream?.close();
      if (this.controller === controller) {
        this.controller = null;
        this.setBusy(false);
        this.renderAll();
        this.settleStatus(controller.signal.aborted, failed, result);
        if (this.resumePending) {
          this.resumePending = false;
          const last = this.messages.at(-1);
          if (last) this.resumeIfAnswered(last);
        }
      }
    }
  }

  // settleStatus says how the answer ended. result is runnel's own account
  // (data-runnel-result), which wins over what the page infers: a run that
  // paused for an answer this page believes it gave shows as paused.
  settleStatus(aborted, failed, result) {
    const last = this.messages.at(-1);
    if (aborted) this.setStatus("stopped", "Stopped");
    else if (failed || result?.ok === false) this.setStatus("error", "Error");
    else if (last && last.parts?.some((p) => isPending(last, p))) this.setStatus("paused", "Paused: waiting for you");
    else if (result?.status === "paused") this.setStatus("paused", "Paused: runnel is still waiting for an answer");
    else this.setStatus("done", "Done");
  }

  // resumeIfAnswered posts the conversation again once every question of
  // the last assistant message is answered, like the AI SDK's
  // sendAutomaticallyWhen: runnel would otherwise pause again for the rest.
  resumeIfAnswered(message) {
    if (message !== this.messages.at(-1)) return;
    if (message.parts.some((p) => isPending(message, p))) {
      this.setStatus("paused", "Paused: waiting for you");
      return;
    }
    if (this.controller) {
      this.resumePending = true;
      return;
    }
    this.request(message.id);
  }

  answerApproval(message, part, approved, reason) {
    const approval = { ...part.approval, approved };
    if (!approved && reason) approval.reason = reason;
    part.state = "approval-responded";
    part.approval = approval;
    this.render(message);
    this.resumeIfAnswered(message);
  }

  answerClientTool(message, part, result) {
    this.flows.delete(part.toolCallId);
    if ("errorText" in result) {
      part.state = "output-error";
      part.errorText = result.errorText;
    } else {
      part.state = "output-available";
      part.output = result.output;
    }
    this.render(message);
    this.resumeIfAnswered(message);
  }

  abandonFlows() {
    for (const flow of this.flows.values()) flow.abandon();
    this.flows.clear();
  }

  // schedule draws changed messages once per batch of chunks rather than
  // once per chunk.
  schedule(message) {
    if (this.dirty.size === 0) queueMicrotask(() => this.flush());
    this.dirty.add(message);
  }

  flush() {
    const stick = this.nearEnd();
    for (const message of this.dirty) this.render(message);
    this.dirty.clear();
    if (stick) this.scrollToEnd();
  }

  renderAll() {
    this.dom.empty.hidden = this.messages.length > 0;
    for (const message of this.messages) this.render(message);
  }

  render(message) {
    const index = this.messages.indexOf(message);
    if (index < 0) return; // a stream of a chat left with "New chat"
    this.dom.empty.hidden = true;
    let view = this.views.get(message);
    if (!view) {
      view = new MessageView(message);
      this.views.set(message, view);
      this.dom.messages.append(view.root);
    }
    // Only the last message may answer questions: once the person has
    // typed something else, runnel no longer waits for those answers.
    view.update(this, index === this.messages.length - 1);
  }

  notice(message, text) {
    if (!text) return;
    const line = h("div", { class: "notice", testid: "notice" }, text);
    const view = message && this.views.get(message);
    if (view) view.notices.append(line);
    else this.dom.messages.append(line);
  }

  showUsage(u) {
    const n = (x) => (Number.isFinite(x) ? x.toLocaleString("en-US") : "–");
    let text = `${n(u.total)} tokens · in ${n(u.input)} · out ${n(u.output)}`;
    if (Number.isFinite(u.cost) && u.cost > 0) text += ` · $${u.cost.toFixed(4)}`;
    this.dom.usage.textContent = text;
  }

  showError(text) {
    this.dom.error.textContent = text;
    this.dom.error.hidden = false;
    this.scrollToEnd();
  }

  hideError() {
    this.dom.error.hidden = true;
    this.dom.error.textContent = "";
  }

  setBusy(busy) {
    this.dom.send.hidden = busy;
    this.dom.stop.hidden = !busy;
  }

  setStatus(state, text) {
    this.dom.status.dataset.state = state;
    this.dom.status.textContent = text;
  }

  nearEnd() {
    const t = this.dom.thread;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 120;
  }

  scrollToEnd() {
    this.dom.thread.scrollTop = this.dom.thread.scrollHeight;
  }
}

class StreamStopped extends Error {}

// MessageView draws one message; its part views are keyed by index, since
// parts are only ever appended or replaced in place.
class MessageView {
  constructor(message) {
    this.message = message;
    this.parts = [];
    this.body = h("div", { class: "message-body" });
    this.notices = h("div", { class: "notices" });
    this.root = h("article", { class: `message ${message.role}`, testid: "message", "data-role": message.role, "data-id": message.id }, this.body, this.notices);
  }

  update(app, live) {
    const { message } = this;
    message.parts.forEach((part, i) => {
      let view = this.parts[i];
      if (!view || view.type !== part.type) {
        const next = partView(part, message.role);
        if (view) view.root.replaceWith(next.root);
        else this.body.append(next.root);
        this.parts[i] = view = next;
      }
      view.update(part, { app, message, live });
    });
  }
}

function partView(part, role) {
  if (part.type === "text") return role === "user" ? new UserTextView() : new TextView();
  if (part.type === "reasoning") return new ReasoningView();
  if (isToolPart(part)) return new ToolCardView(part);
  // step-start, data-runnel-interaction and what this page does not draw.
  return { type: part.type, root: h("span", { hidden: true }), update() {} };
}

class UserTextView {
  type = "text";
  root = h("div", { class: "bubble", testid: "text" });
  update(part) {
    setText(this.root, part.text);
  }
}

class TextView {
  type = "text";
  root = h("div", { class: "text", testid: "text" });
  update(part) {
    setText(this.root, part.text);
    this.root.dataset.state = part.state ?? "done";
    this.root.hidden = part.text === "" && part.state !== "streaming";
  }
}

// ReasoningView is open while the model thinks and folds away when it is
// done, unless the person opened or closed it themselves.
class ReasoningView {
  type = "reasoning";
  constructor() {
    this.label = h("span", { class: "reasoning-label" });
    this.text = h("div", { class: "reasoning-text" });
    this.root = h("details", { class: "reasoning", testid: "reasoning" }, h("summary", { onclick: () => (this.touched = true) }, this.label), this.text);
    this.touched = false;
  }

  update(part) {
    const streaming = part.state === "streaming";
    this.root.dataset.state = streaming ? "streaming" : "done";
    setText(this.label, streaming ? "Thinking…" : "Thought");
    setText(this.text, part.text);
    if (!this.touched) this.root.open = streaming;
  }
}

class ToolCardView {
  constructor(part) {
    this.type = part.type;
    this.name = h("span", { class: "tool-name" });
    this.badge = h("span", { class: "badge", testid: "tool-badge" });
    this.input = h("pre", { class: "code", testid: "tool-input" });
    this.output = h("pre", { class: "code", testid: "tool-output" });
    this.error = h("div", { class: "tool-error", testid: "tool-error", hidden: true });
    this.inputBox = h("details", { class: "io" }, h("summary", {}, "Input"), this.input);
    this.outputBox = h("details", { class: "io", open: true, hidden: true }, h("summary", {}, "Output"), this.output);
    this.actions = h("div", { class: "tool-actions" });
    this.mode = "";
    this.state = "";
    this.root = h("section", { class: "tool-card", testid: "tool-card" },
      h("header", { class: "tool-head" }, h("span", { class: "tool-icon", "aria-hidden": "true" }), this.name, this.badge),
      this.inputBox, this.outputBox, this.error, this.actions);
  }

  update(part, { app, message, live }) {
    const name = toolName(part);
    const [label, tone] = badgeFor(message, part, live);
    Object.assign(this.root.dataset, { toolName: name, toolCallId: part.toolCallId, state: part.state, tone });
    setText(this.name, name);
    setText(this.badge, label);
    setText(this.input, part.input === undefined ? "…" : pretty(part.input));
    const hasOutput = part.state === "output-available";
    this.outputBox.hidden = !hasOutput;
    setText(this.output, hasOutput ? pretty(part.output) : "");
    this.error.hidden = part.state !== "output-error";
    setText(this.error, part.state === "output-error" ? String(part.errorText ?? "") : "");

    const interaction = clientInteraction(message, part.toolCallId);
    let mode = "";
    if (live && part.state === "approval-requested") mode = "approval";
    else if (live && part.state === "input-available" && interaction) {
      mode = interaction.render?.kind === "connect" ? "connect" : "client";
    }
    if (part.state !== this.state) {
      // Show what a person is asked to approve; fold it away afterwards.
      this.inputBox.open = mode !== "";
      this.state = part.state;
    }
    if (mode !== this.mode) {
      this.mode = mode;
      this.actions.replaceChildren();
      if (mode === "approval") this.actions.append(approvalForm(app, message, part));
      if (mode === "connect") this.actions.append(connectWidget(app, message, part, interaction));
      if (mode === "client") this.actions.append(clientForm(app, message, part));
    }
  }
}

function approvalForm(app, message, part) {
  const reason = h("input", { type: "text", class: "input", placeholder: "Why not? (optional, the model sees it)", testid: "deny-reason" });
  const denyForm = h("form", { class: "deny-form", hidden: true },
    reason,
    h("button", { type: "submit", class: "button danger", testid: "deny-confirm" }, "Deny"),
    h("button", { type: "button", class: "button ghost", onclick: () => { denyForm.hidden = true; buttons.hidden = false; } }, "Back"));
  denyForm.addEventListener("submit", (e) => {
    e.preventDefault();
    app.answerApproval(message, part, false, reason.value.trim());
  });
  const buttons = h("div", { class: "row" },
    h("button", { type: "button", class: "button primary", testid: "approve", onclick: () => app.answerApproval(message, part, true) }, "Approve"),
    h("button", { type: "button", class: "button", testid: "deny", onclick: () => { buttons.hidden = true; denyForm.hidden = false; reason.focus(); } }, "Deny"));
  return h("div", { class: "approval", testid: "approval" },
    h("p", { class: "prompt" }, "Allow ", h("code", {}, toolName(part)), " to run with this input?"),
    buttons, denyForm);
}

function connectWidget(app, message, part, interaction) {
  const render = interaction.render;
  const title = typeof render.title === "string" && render.title ? render.title : toolName(part);
  const status = h("p", { class: "connect-status", testid: "connect-status" }, "A window opens where you allow access.");
  const settle = (output) => app.answerClientTool(message, part, { output });
  const connect = h("button", { type: "button", class: "button primary", testid: "connect" }, "Connect");
  const cancel = h("button", { type: "button", class: "button", testid: "connect-cancel" }, "Cancel");
  connect.addEventListener("click", () => {
    connect.disabled = true;
    connect.textContent = "Connecting…";
    status.textContent = `Finish in the ${title} window.`;
    const flow = new ConnectFlow(render, settle);
    app.flows.set(part.toolCallId, flow);
    flow.start();
  });
  cancel.addEventListener("click", () => {
    const flow = app.flows.get(part.toolCallId);
    if (flow) flow.cancel();
    else settle({ connected: false, reason: "cancelled" });
  });
  return h("div", { class: "connect", testid: "connect-widget" },
    h("div", { class: "connect-head" }, h("span", { class: "connect-logo", "aria-hidden": "true" }, title.slice(0, 1).toUpperCase()),
      h("div", {}, h("div", { class: "connect-title" }, `Connect ${title}`), status)),
    h("div", { class: "row" }, connect, cancel));
}

// clientForm answers a client tool this page has no widget for: the person
// writes its output (JSON) or an error.
function clientForm(app, message, part) {
  const text = h("textarea", { class: "input code", rows: 4, spellcheck: "false", testid: "client-output" });
  text.value = "{}";
  const problem = h("p", { class: "form-problem", hidden: true });
  const send = () => {
    let output;
    try {
      output = JSON.parse(text.value);
    } catch (err) {
      problem.textContent = `Not JSON: ${err.message}`;
      problem.hidden = false;
      return;
    }
    app.answerClientTool(message, part, { output });
  };
  const fail = () => app.answerClientTool(message, part, { errorText: text.value.trim() || "The user reported an error." });
  return h("div", { class: "client-form", testid: "client-form" },
    h("p", { class: "prompt" }, "This tool runs in your browser. Its result:"), text, problem,
    h("div", { class: "row" },
      h("button", { type: "button", class: "button primary", testid: "client-send", onclick: send }, "Send result"),
      h("button", { type: "button", class: "button", testid: "client-error", onclick: fail }, "Send error")));
}

new Playground().start();
