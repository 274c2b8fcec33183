// The playground's browser test: Debian's Chromium, driven by playwright-core,
// goes through the page against a running `runnel demo` and reports what the
// page showed, as one JSON line on stdout, for browser_test.go to judge.
// It waits for conditions (generous timeouts), never for time.
//
// Environment:
//   RUNNEL_UI_URL           runnel's base URL, http://127.0.0.1:PORT
//   RUNNEL_UI_NODE_MODULES  the node_modules holding playwright-core
//   RUNNEL_UI_CHROMIUM      the Chromium binary
//   RUNNEL_UI_PROFILE       an empty directory for Chromium's user data
//   RUNNEL_UI_SHOTS         where screenshots go
//   RUNNEL_UI_DOCS_SHOT     if set, where the README's screenshot goes
//   RUNNEL_UI_SCENARIO      "chat" (the default) or "token"
//   RUNNEL_UI_TOKEN         the token runnel requires, for "token"

import { createRequire } from "node:module";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env("RUNNEL_UI_URL");
const shots = env("RUNNEL_UI_SHOTS");
// The installation may live outside this directory, so playwright-core is
// resolved from the node_modules the Go test names.
const require = createRequire(path.join(env("RUNNEL_UI_NODE_MODULES"), "..", "resolve-from-here.js"));
const { chromium } = require("playwright-core");

const timeout = 90_000;
const report = { ok: false, blocked: [], consoleErrors: [], requests: 0, screenshots: [] };
const chatBodies = [];

// isLoopback: nothing this test does may leave the machine.
function isLoopback(url) {
  const u = new URL(url);
  if (u.protocol === "data:" || u.protocol === "blob:" || u.protocol === "about:") return true;
  return u.hostname === "127.0.0.1" || u.hostname === "localhost" || u.hostname === "[::1]";
}

function watch(page) {
  page.on("console", (msg) => {
    // The token scenario's first API calls are answered 401 on purpose.
    const expected = process.env.RUNNEL_UI_SCENARIO === "token" && msg.text().includes("status of 401");
    if (msg.type() === "error" && !expected) report.consoleErrors.push(`${page.url()}: ${msg.text()}`);
  });
  page.on("pageerror", (err) => report.consoleErrors.push(`${page.url()}: ${err.message}`));
  page.on("request", (req) => {
    if (req.method() === "POST" && req.url().endsWith("/v1/chat")) {
      chatBodies.push(JSON.parse(req.postData() ?? "null"));
    }
  });
}

async function shot(page, name) {
  const file = path.join(shots, name);
  await page.screenshot({ path: file, animations: "disabled" });
  report.screenshots.push(file);
}

const byTestId = (id) => `[data-testid="${id}"]`;

async function main() {
  const context = await chromium.launchPersistentContext(env("RUNNEL_UI_PROFILE"), {
    executablePath: env("RUNNEL_UI_CHROMIUM"),
    headless: true,
    viewport: { width: 1280, height: 800 },
    colorScheme: "light",
    timeout,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--disable-default-apps", "--disable-domain-reliability", "--disable-breakpad",
      "--no-default-browser-check", "--metrics-recording-only",
      // Names other than loopback resolve to nothing, so even Chromium's
      // own background requests stay on the machine.
      "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
    ],
  });
  try {
    await guard(context);
    if (process.env.RUNNEL_UI_SCENARIO === "token") await runToken(context);
    else await run(context);
    report.ok = true;
  } catch (err) {
    // What each window showed when the step failed.
    for (const [i, p] of context.pages().entries()) await shot(p, `failure-${i}.png`).catch(() => {});
    throw err;
  } finally {
    await context.close();
  }
}

// guard keeps the browser on loopback and watches every page it opens.
async function guard(context) {
  const port = new URL(base).port;
  // localhost:PORT is another origin than 127.0.0.1:PORT. The test answers
  // it itself with an empty page: a stand-in for a hostile site.
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (!isLoopback(url)) {
      report.blocked.push(url);
      return route.abort();
    }
    if (new URL(url).hostname === "localhost" && new URL(url).port === port) {
      return route.fulfill({ contentType: "text/html", body: "<!doctype html><title>another origin</title>" });
    }
    return route.continue();
  });
  context.on("page", watch);
  for (const p of context.pages()) watch(p);
}

async function firstPage(context) {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(timeout);
  return page;
}

async function run(context) {
  const port = new URL(base).port;
  const page = await firstPage(context);
  await page.goto(`${base}/playground/`);
  await page.locator(byTestId("empty")).waitFor();
  await page.locator(`${byTestId("model-picker")}:not([hidden])`).waitFor();
  report.profile = await page.locator(byTestId("model")).inputValue();
  report.suggestions = await page.locator(byTestId("suggestion")).allTextContents();

  report.streamed = await streamed(page);
  await shot(page, "01-streamed.png");

  report.approved = await deleteFile(page, "Please delete notes/q3-draft.txt", async (card) => {
    await shot(page, "02-approval-waiting.png");
    if (process.env.RUNNEL_UI_DOCS_SHOT) await page.screenshot({ path: process.env.RUNNEL_UI_DOCS_SHOT, animations: "disabled" });
    await card.locator(byTestId("approve")).click();
  });
  await shot(page, "03-approved.png");

  report.denied = await deleteFile(page, "Please delete notes/q4-plan.txt", async (card) => {
    await card.locator(byTestId("deny")).click();
    await card.locator(byTestId("deny-reason")).fill("I still need that plan");
    await card.locator(byTestId("deny-confirm")).click();
  });
  await shot(page, "04-denied.png");

  report.connected = await connect(page, async (card, step) => {
    const popup = await openPopup(page, card);
    await popup.locator(byTestId("allow")).waitFor();
    step.forged = await forge(page, popup, card, port);
    await shot(popup, "05-consent-popup.png");
    const closed = popup.waitForEvent("close");
    // The consent page closes itself on the click; a click that loses
    // that race to the close is a click that landed (closed must follow).
    await popup.locator(byTestId("allow")).click({ noWaitAfter: true }).catch(() => closed);
    await closed;
  });
  await shot(page, "06-connected.png");

  report.connectClosed = await connect(page, async (card) => {
    const popup = await openPopup(page, card);
    await popup.locator(byTestId("allow")).waitFor();
    await popup.close();
  });
  await shot(page, "07-connect-closed.png");

  report.connectCancelled = await connect(page, async (card) => {
    await card.locator(byTestId("connect-cancel")).click();
  });

  // The demo model's connection breaks mid-answer on "fail".
  await send(page, "Show me a failure");
  report.failed = {
    status: await settledStatus(page),
    error: await page.locator(byTestId("error")).textContent(),
    errorShown: await page.locator(byTestId("error")).isVisible(),
  };
  await shot(page, "08-error.png");

  report.colors = { light: await background(page) };
  await page.emulateMedia({ colorScheme: "dark" });
  report.colors.dark = await background(page);
  await shot(page, "09-dark.png");
  await page.emulateMedia({ colorScheme: "light" });

  report.stopped = await stopped(page);
  await page.locator(byTestId("new-chat")).click();
  report.newChat = {
    empty: await page.locator(byTestId("empty")).isVisible(),
    messages: await page.locator(byTestId("message")).count(),
    status: await page.locator(byTestId("status")).getAttribute("data-state"),
  };
  report.requests = chatBodies.length;
}

// runToken: a runnel that requires a token. The page asks for it when the
// API answers 401, keeps it for the tab, and sends it on every call.
async function runToken(context) {
  const page = await firstPage(context);
  const auth = [];
  page.on("request", (req) => {
    if (new URL(req.url()).pathname.startsWith("/v1/")) auth.push(req.headers()["authorization"] ?? "");
  });
  await page.goto(`${base}/playground/`);
  await page.locator(byTestId("token-panel")).waitFor();
  const t = {
    hint: await page.locator(byTestId("token-hint")).textContent(),
    pickerBefore: await page.locator(byTestId("model-picker")).isVisible(),
  };
  await shot(page, "10-token.png");
  await page.locator(byTestId("token-input")).fill(env("RUNNEL_UI_TOKEN"));
  await page.locator(byTestId("token-save")).click();
  await page.locator(`${byTestId("model-picker")}:not([hidden])`).waitFor();
  t.panelAfter = await page.locator(byTestId("token-panel")).isVisible();
  await send(page, "Hello! What can you do?");
  t.status = await settledStatus(page);
  t.reply = (await page.locator(`${byTestId("message")}[data-role="assistant"] ${byTestId("text")}`).allTextContents()).join("");
  // The token outlives a reload of the tab.
  await page.reload();
  await page.locator(`${byTestId("model-picker")}:not([hidden])`).waitFor();
  t.panelAfterReload = await page.locator(byTestId("token-panel")).isVisible();
  t.authorization = auth;
  report.token = t;
}

// stopped sends a prompt and presses Stop while the answer streams.
async function stopped(page) {
  await send(page, "Hello again! Tell me more.");
  const text = page.locator(`${byTestId("message")}[data-role="assistant"]`).last().locator(`${byTestId("text")}[data-state="streaming"]`);
  await text.waitFor();
  await page.locator(byTestId("stop")).click();
  await page.locator(`${byTestId("status")}[data-state="stopped"]`).waitFor();
  const assistant = page.locator(`${byTestId("message")}[data-role="assistant"]`).last();
  return {
    status: "stopped",
    streamingParts: await assistant.locator('[data-state="streaming"]').count(),
    sendShown: await page.locator(byTestId("send")).isVisible(),
    stopShown: await page.locator(byTestId("stop")).isVisible(),
  };
}

async function background(page) {
  return page.evaluate(() => getComputedStyle(document.body).backgroundColor);
}

async function send(page, prompt) {
  await page.locator(byTestId("composer")).fill(prompt);
  await page.locator(byTestId("composer")).press("Enter");
}

// status waits until the status line leaves "streaming" and says what it
// settled on.
async function settledStatus(page) {
  await page.waitForFunction(
    (sel) => {
      const s = document.querySelector(sel);
      return s && s.dataset.state !== "streaming" && s.dataset.state !== "idle";
    },
    byTestId("status"),
    { timeout, polling: 50 },
  );
  return page.locator(byTestId("status")).getAttribute("data-state");
}

async function streamed(page) {
  // Record each length the answer's text has while it is still streaming,
  // as the DOM changes: growth is seen, not inferred from timing.
  await page.evaluate(() => {
    window.__lengths = [];
    const messages = document.querySelector('[data-testid="messages"]');
    new MutationObserver(() => {
      const el = [...messages.querySelectorAll('[data-role="assistant"] [data-testid="text"]')].at(-1);
      if (!el || el.dataset.state !== "streaming") return;
      const n = el.textContent.length;
      if (n > 0 && window.__lengths.at(-1) !== n) window.__lengths.push(n);
    }).observe(messages, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  await send(page, "Hello! What can you do?");
  await page.locator(`${byTestId("status")}[data-state="streaming"]`).waitFor();
  await page.waitForFunction(() => window.__lengths.length >= 2, null, { timeout, polling: 50 });
  const status = await settledStatus(page);
  const assistant = page.locator(`${byTestId("message")}[data-role="assistant"]`).last();
  return {
    lengths: await page.evaluate(() => window.__lengths),
    status,
    text: (await assistant.locator(byTestId("text")).allTextContents()).join(""),
    finalLength: ((await assistant.locator(byTestId("text")).last().textContent()) ?? "").length,
    textState: await assistant.locator(byTestId("text")).last().getAttribute("data-state"),
    reasoning: await assistant.locator(byTestId("reasoning")).count(),
    user: await page.locator(`${byTestId("message")}[data-role="user"]`).last().textContent(),
  };
}

// toolStep sends prompt, waits for a new tool card in waitState, lets answer
// act on it, and reports what the card and the model showed afterwards.
async function toolStep(page, prompt, toolName, waitState, answer) {
  const cards = page.locator(byTestId("tool-card"));
  const before = await cards.count();
  const requestsBefore = chatBodies.length;
  await send(page, prompt);
  const card = cards.nth(before);
  await card.and(page.locator(`[data-tool-name="${toolName}"][data-state="${waitState}"]`)).waitFor();
  const step = { pausedStatus: await settledStatus(page), waitingBadge: await card.locator(byTestId("tool-badge")).textContent() };
  await answer(card, step);
  await card.and(page.locator('[data-state="output-available"], [data-state="output-denied"], [data-state="output-error"]')).waitFor();
  step.status = await settledStatus(page);
  step.state = await card.getAttribute("data-state");
  step.badge = await card.locator(byTestId("tool-badge")).textContent();
  const output = (await card.locator(byTestId("tool-output")).textContent()) ?? "";
  try {
    step.output = JSON.parse(output);
  } catch {
    step.output = output;
  }
  step.reply = await card.evaluate((el) => {
    // The model's answer: the text after the card in the same message.
    const texts = [];
    for (let n = el.nextElementSibling; n; n = n.nextElementSibling) {
      if (n.dataset.testid === "text") texts.push(n.textContent);
    }
    return texts.join("");
  });
  step.messageId = await card.evaluate((el) => el.closest('[data-testid="message"]').dataset.id);
  // What the page posted to resume: the same assistant message, carrying
  // the answer in the tool part.
  const resume = chatBodies.slice(requestsBefore).at(-1);
  const toolCallId = await card.getAttribute("data-tool-call-id");
  const last = resume?.messages?.at(-1);
  step.resume = {
    requests: chatBodies.length - requestsBefore,
    trigger: resume?.trigger,
    compat: resume?.compat,
    messageId: resume?.messageId,
    lastMessageId: last?.id,
    part: last?.parts?.find((p) => p.toolCallId === toolCallId) ?? null,
  };
  return step;
}

function deleteFile(page, prompt, answer) {
  return toolStep(page, prompt, "delete_file", "approval-requested", answer);
}

function connect(page, answer) {
  return toolStep(page, "Connect my Demo Drive account", "connect_account", "input-available", async (card, step) => {
    await card.locator(byTestId("connect-widget")).waitFor();
    step.widgetTitle = await card.locator(".connect-title").textContent();
    await answer(card, step);
  });
}

async function openPopup(page, card) {
  const [popup] = await Promise.all([page.waitForEvent("popup"), card.locator(byTestId("connect")).click()]);
  popup.setDefaultTimeout(timeout);
  await popup.waitForLoadState();
  return popup;
}

// forge posts a "done" answer the page must not trust, twice: from the page
// itself (right origin, wrong window) and from the popup once it is on
// another origin (right window, wrong origin). Each waits until the message
// was delivered (the page's own listener, registered when Connect was
// clicked, runs before the test's), then reads the card's state.
async function forge(page, popup, card, port) {
  const forged = {};
  const delivered = (marker) =>
    page.evaluate(
      (marker) =>
        (window.__forged = new Promise((resolve) => {
          const listener = (e) => {
            if (e.data?.marker !== marker) return;
            window.removeEventListener("message", listener);
            resolve();
          };
          window.addEventListener("message", listener);
        })) && null,
      marker,
    );
  const forgery = (marker) => ({ type: "runnel-connect", status: "done", result: { account: "mallory@example.com" }, marker });

  await delivered("self");
  await page.evaluate((msg) => window.postMessage(msg, "*"), forgery("self"));
  await page.evaluate(() => window.__forged);
  forged.sameOriginOtherWindow = await card.getAttribute("data-state");

  await navigate(popup, `http://localhost:${port}/forged`);
  await delivered("origin");
  await popup.evaluate((msg) => window.opener.postMessage(msg, "*"), forgery("origin"));
  await page.evaluate(() => window.__forged);
  forged.popupOtherOrigin = await card.getAttribute("data-state");
  forged.widgetShown = await card.locator(byTestId("connect-widget")).count();

  await navigate(popup, `${base}/playground/connect-demo.html`);
  return forged;
}

// navigate moves the popup the way a page would, from its own script: a
// navigation the browser starts (page.goto) to another site cuts
// window.opener, an OAuth redirect does not.
async function navigate(popup, url) {
  await Promise.all([
    popup.waitForURL(url, { waitUntil: "load" }),
    popup.evaluate((url) => setTimeout(() => location.assign(url)), url),
  ]);
}

try {
  await main();
} catch (err) {
  report.error = String(err?.stack ?? err);
} finally {
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exitCode = report.ok ? 0 : 1;
}
