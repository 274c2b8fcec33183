// ConnectFlow runs the "connect" client tool (render.kind "connect"): it
// opens render.url in a popup, where a real deployment would run an OAuth
// consent, and waits for that page to post back
// {type: "runnel-connect", status: "done" | "cancelled", result?}.
//
// The popup's answer becomes the tool's output, which the model reads, so
// only a message from the popup itself, on the origin of render.url, counts:
// any other window can post to this one. The flow settles exactly once,
// whichever comes first: that message, the popup closing, the timeout, a
// blocked popup, or Cancel.

const defaultTimeoutMs = 120000;
const pollMs = 500;

export class ConnectFlow {
  // onSettle receives the tool's output, e.g. {connected: true, account}
  // or {connected: false, reason: "closed"}.
  constructor(render, onSettle) {
    this.render = render;
    this.onSettle = onSettle;
    this.done = false;
    this.popup = null;
    this.onMessage = (event) => this.receive(event);
    this.poll = 0;
    this.timer = 0;
    this.closedSeen = false;
  }

  start() {
    let url;
    try {
      url = new URL(this.render.url, location.href);
    } catch {
      url = null;
    }
    // A javascript: or data: URL would run in or replace the page's origin.
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
      this.settle({ connected: false, reason: "invalid_url" });
      return;
    }
    this.origin = url.origin;
    // Listen before opening, so even an instant answer is heard.
    window.addEventListener("message", this.onMessage);
    this.popup = window.open(url, "runnel-connect", "popup,width=480,height=640");
    if (!this.popup) {
      this.settle({ connected: false, reason: "blocked" });
      return;
    }
    this.poll = setInterval(() => this.checkClosed(), pollMs);
    const timeout = Number(this.render.timeoutMs);
    this.timer = setTimeout(() => {
      this.closePopup();
      this.settle({ connected: false, reason: "timeout" });
    }, Number.isFinite(timeout) && timeout > 0 ? timeout : defaultTimeoutMs);
  }

  receive(event) {
    if (this.done || event.origin !== this.origin || event.source !== this.popup) return;
    const data = event.data;
    if (data === null || typeof data !== "object" || data.type !== "runnel-connect") return;
    if (data.status === "done") {
      this.settle(connectedOutput(data.result));
    } else if (data.status === "cancelled") {
      this.settle({ connected: false, reason: "cancelled" });
    }
  }

  // checkClosed settles "closed" one poll after it first sees the popup
  // gone: a page that posts its answer and closes itself right away must
  // not lose the race with this timer.
  checkClosed() {
    if (!this.popup.closed) return;
    if (this.closedSeen) this.settle({ connected: false, reason: "closed" });
    this.closedSeen = true;
  }

  cancel() {
    this.closePopup();
    this.settle({ connected: false, reason: "cancelled" });
  }

  // abandon stops the flow without an answer: the chat it belonged to is gone.
  abandon() {
    this.done = true;
    this.cleanup();
    this.closePopup();
  }

  settle(output) {
    if (this.done) return;
    this.done = true;
    this.cleanup();
    this.onSettle(output);
  }

  cleanup() {
    window.removeEventListener("message", this.onMessage);
    clearInterval(this.poll);
    clearTimeout(this.timer);
  }

  closePopup() {
    if (this.popup && !this.popup.closed) this.popup.close();
  }
}

// connectedOutput is {connected: true} plus what the consent page reported
// (an account reference, never a secret). connected stays true whatever the
// page sent, and a __proto__ key cannot reach the output's prototype.
function connectedOutput(result) {
  const output = { connected: true };
  if (result !== null && typeof result === "object" && !Array.isArray(result)) {
    for (const [key, value] of Object.entries(result)) {
      if (key !== "connected" && key !== "__proto__") output[key] = value;
    }
  }
  return output;
}
