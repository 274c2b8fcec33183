// The client half of the Vercel AI SDK "UI Message Stream" (DESIGN §3.6):
// an SSE reader, the reducer that turns chunks into UIMessage parts the way
// the AI SDK's own client does (so the messages this page posts back are the
// ones runnel expects from useChat), and what those parts ask of the person.

// readEventStream reads a text/event-stream body and calls onChunk with each
// event's parsed JSON, until `data: [DONE]` or the end of the body. Comment
// lines (runnel's keep-alives) and fields other than data are skipped.
export async function readEventStream(body, onChunk) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  // dispatch handles one complete line; it returns true at [DONE].
  const dispatch = (line) => {
    if (line === "") {
      if (data.length === 0) return false;
      const payload = data.join("\n");
      data = [];
      if (payload === "[DONE]") return true;
      onChunk(JSON.parse(payload));
      return false;
    }
    if (line.startsWith(":")) return false;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    if (field !== "data") return false;
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    data.push(value);
    return false;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      // A line ends at \n, \r\n or \r. A trailing \r may be the first half
      // of a \r\n split across reads, so it waits for the next read.
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i];
        if (c !== "\n" && c !== "\r") continue;
        if (c === "\r" && i === buffer.length - 1) break;
        if (dispatch(buffer.slice(start, i))) return;
        if (c === "\r" && buffer[i + 1] === "\n") i++;
        start = i + 1;
      }
      buffer = buffer.slice(start);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// MessageStream applies the chunks of one response to the conversation.
// A `start` naming the last assistant message continues it (a resume after
// an approval or a client tool); any other start begins a new assistant
// message. hooks receive what is shown but not stored: onNotice(text),
// onUsage(usage), onResult(how the run ended), onFinish(finishReason),
// onError(errorText).
export class MessageStream {
  constructor(messages, newId, hooks) {
    this.messages = messages;
    this.newId = newId;
    this.hooks = hooks;
    this.message = null;
    this.texts = new Map();
    this.reasonings = new Map();
  }

  // apply reduces one chunk and returns the message it changed, or null.
  apply(chunk) {
    const type = typeof chunk?.type === "string" ? chunk.type : "";
    switch (type) {
      case "start": {
        const last = this.messages.at(-1);
        if (last?.role === "assistant" && chunk.messageId === last.id) {
          this.message = last;
        } else {
          this.message = { id: chunk.messageId ?? this.newId("msg_"), role: "assistant", parts: [] };
          this.messages.push(this.message);
        }
        return this.message;
      }
      case "start-step":
        return this.push({ type: "step-start" });
      case "text-start":
      case "reasoning-start": {
        const kind = type === "text-start" ? "text" : "reasoning";
        const part = { type: kind, text: "", state: "streaming" };
        (kind === "text" ? this.texts : this.reasonings).set(chunk.id, part);
        return this.push(part);
      }
      case "text-delta":
      case "reasoning-delta": {
        const part = (type === "text-delta" ? this.texts : this.reasonings).get(chunk.id);
        if (!part) return null;
        part.text += chunk.delta ?? "";
        return this.message;
      }
      case "text-end":
      case "reasoning-end": {
        const active = type === "text-end" ? this.texts : this.reasonings;
        const part = active.get(chunk.id);
        if (!part) return null;
        part.state = "done";
        active.delete(chunk.id);
        return this.message;
      }
      case "tool-input-start":
      case "tool-input-available": {
        let part = this.tool(chunk.toolCallId);
        if (!part) {
          part = { type: "", toolCallId: chunk.toolCallId };
          this.push(part);
        }
        if (chunk.dynamic) {
          part.type = "dynamic-tool";
          part.toolName = chunk.toolName;
        } else {
          part.type = "tool-" + chunk.toolName;
        }
        part.state = type === "tool-input-start" ? "input-streaming" : "input-available";
        if (type === "tool-input-available") part.input = chunk.input;
        return this.message;
      }
      case "tool-output-available":
        return this.settle(chunk.toolCallId, { state: "output-available", output: chunk.output });
      case "tool-output-error":
        return this.settle(chunk.toolCallId, { state: "output-error", errorText: chunk.errorText });
      case "tool-output-denied":
        return this.settle(chunk.toolCallId, { state: "output-denied" });
      case "tool-approval-request": {
        const approval = { id: chunk.approvalId };
        if (chunk.signature != null) approval.signature = chunk.signature;
        return this.settle(chunk.toolCallId, { state: "approval-requested", approval });
      }
      case "finish":
        this.hooks.onFinish?.(chunk.finishReason);
        return null;
      case "error":
        this.hooks.onError?.(String(chunk.errorText ?? "The run failed."));
        return null;
    }
    if (type.startsWith("data-")) return this.data(chunk);
    return null; // finish-step, tool-input-delta and chunk types this page does not know
  }

  data(chunk) {
    if (chunk.transient) {
      if (chunk.type === "data-runnel-notice") this.hooks.onNotice?.(String(chunk.data?.text ?? ""));
      if (chunk.type === "data-runnel-usage") this.hooks.onUsage?.(chunk.data ?? {});
      if (chunk.type === "data-runnel-result") this.hooks.onResult?.(chunk.data ?? {});
      return null;
    }
    const message = this.current();
    const part = { type: chunk.type, id: chunk.id, data: chunk.data };
    const i = chunk.id == null ? -1 : message.parts.findIndex((p) => p.type === chunk.type && p.id === chunk.id);
    if (i >= 0) message.parts[i] = part;
    else message.parts.push(part);
    return message;
  }

  // current is the message chunks apply to; a stream that skips `start`
  // still gets one.
  current() {
    if (!this.message) this.apply({ type: "start" });
    return this.message;
  }

  push(part) {
    this.current().parts.push(part);
    return this.message;
  }

  tool(toolCallId) {
    return this.current().parts.findLast((p) => p.toolCallId === toolCallId && isToolPart(p));
  }

  settle(toolCallId, fields) {
    const part = this.tool(toolCallId);
    if (!part) return null;
    Object.assign(part, fields);
    return this.message;
  }

  // close marks what was still streaming as done, after Stop or an error,
  // so nothing is drawn as in progress any more.
  close() {
    for (const part of [...this.texts.values(), ...this.reasonings.values()]) part.state = "done";
    this.texts.clear();
    this.reasonings.clear();
  }
}

export function isToolPart(part) {
  return part.type === "dynamic-tool" || (typeof part.type === "string" && part.type.startsWith("tool-"));
}

export function toolName(part) {
  return part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
}

// clientInteraction is the runnel interaction that asks the browser to run
// a tool call, from the data-runnel-interaction part the stream stored.
export function clientInteraction(message, toolCallId) {
  const part = message.parts.find(
    (p) => p.type === "data-runnel-interaction" && p.data?.toolCallId === toolCallId && p.data?.kind === "client_tool",
  );
  return part?.data ?? null;
}

// isPending says whether a tool part waits for the person at this page.
export function isPending(message, part) {
  if (!isToolPart(part)) return false;
  if (part.state === "approval-requested") return true;
  return part.state === "input-available" && clientInteraction(message, part.toolCallId) != null;
}
