// agui-bridge web console: ES modules, no build step; the only dependencies are the vendored libraries
// markdown.js imports (static/vendor/, see its manifest.json).
//
// It is an ordinary AG-UI client of the same origin: it POSTs RunAgentInput to "/" and parses the SSE
// body itself (fetch + ReadableStream), answers interrupts with a resume run, and uses the iac-code
// cancellation and thread status extensions. The bearer token lives in sessionStorage only and is sent
// in the Authorization header, never in a URL. threadId, rosInvocationId and cwd live in the query
// string so a reload restores the thread; the transcript of this tab is kept in sessionStorage (the
// server stores no message text) and the status extension brings back a pending interrupt.
// A dropped connection is not a lost run: every event carries `id: <n>`; the current runId and the last
// id shown are kept in sessionStorage with the transcript, and after a reload or a cut the console
// reattaches through GET .../threads/{threadId}/runs/{runId}/events with Last-Event-ID (README
// "Reattaching to a run"), skipping any event it has already shown.
// Assistant text is Markdown: each message is re-rendered from its whole text at most every
// RENDER_INTERVAL_MS while it streams, and once more at its end (markdown.js sanitises every rendering).

import { codeElement, codeFrame, languageOf, renderMarkdown } from "./markdown.js";

const TOKEN_KEY = "agui-console:token";
const LOG_PREFIX = "agui-console:log:";
const RUN_PREFIX = "agui-console:run:";
const MAX_LOG_ENTRIES = 5000;
const MAX_REATTACH_ATTEMPTS = 6; // consecutive attempts without progress; any new event resets the count
const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
const ROOT = new URL(".", window.location.href); // the server root: the page is <root>/console
const RENDER_INTERVAL_MS = 250; // a streaming message is re-rendered at most 4 times a second
const LONG_JSON_LINES = 12; // tool arguments/results longer than this start collapsed
const LONG_JSON_CHARS = 800;

const $ = (id) => document.getElementById(id);
const ui = {
  connection: $("connection"),
  connectionLabel: $("connection-label"),
  threadStatus: $("thread-status"),
  error: $("error"),
  errorCode: $("error-code"),
  errorMessage: $("error-message"),
  transcript: $("transcript"),
  interrupts: $("interrupts"),
  composer: $("composer"),
  message: $("message"),
  send: $("send"),
  cancel: $("cancel"),
  token: $("token"),
  cwd: $("cwd"),
  newThread: $("new-thread"),
  refreshStatus: $("refresh-status"),
  ids: $("ids"),
  steps: $("steps"),
  usage: document.querySelector("#usage tbody"),
};

const state = {
  threadId: "",
  ros: "",
  cwd: "",
  ids: {},
  executionId: null,
  executionRos: null,
  threadActive: false,
  running: false,
  sawTerminal: false,
  pending: [],
  shownKey: "",
  answers: new Map(),
  texts: new Map(),
  reasoning: new Map(),
  tools: new Map(),
  openSteps: [],
  log: [],
  persistTimer: 0,
  blobUrls: [],
  run: null, // { runId, lastId, ended, unnumbered }: the run being shown, saved with the log
};

// ---------------------------------------------------------------------------------------------- helpers

function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false || value === "") continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function api(path) {
  return new URL(path, ROOT).toString();
}

function headers() {
  const result = { "Content-Type": "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) result.Authorization = `Bearer ${token}`;
  return result;
}

async function readError(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.code) return body.error;
  } catch {
    // not the JSON envelope
  }
  return { code: `HTTP_${response.status}`, message: response.statusText || "Request failed." };
}

function showError(code, message) {
  ui.errorCode.textContent = code;
  ui.errorMessage.textContent = message;
  ui.error.hidden = false;
}

function clearError() {
  ui.error.hidden = true;
}

function setConnection(name, label) {
  ui.connection.dataset.state = name;
  ui.connectionLabel.textContent = label || name;
}

function heartbeat() {
  const count = Number(ui.connection.dataset.heartbeats || "0") + 1;
  ui.connection.dataset.heartbeats = String(count);
  ui.connection.classList.remove("beat");
  void ui.connection.offsetWidth; // restart the blink animation
  ui.connection.classList.add("beat");
  ui.connectionLabel.textContent = `streaming (heartbeat ${count})`;
}

function setThreadStatus(name, label) {
  ui.threadStatus.dataset.state = name;
  ui.threadStatus.textContent = label;
}

function updateButtons() {
  ui.send.disabled = state.running;
  ui.cancel.disabled = !state.executionId || !(state.running || state.pending.length > 0 || state.threadActive);
}

let scrollQueued = false;
function scrollToEnd() {
  if (scrollQueued) return;
  scrollQueued = true;
  requestAnimationFrame(() => {
    scrollQueued = false;
    ui.composer.scrollIntoView({ block: "end" });
  });
}

// ---------------------------------------------------------------------------------------------- URL, storage

function readQuery() {
  const query = new URLSearchParams(window.location.search);
  return {
    threadId: query.get("threadId") || "",
    ros: query.get("rosInvocationId") || "",
    cwd: query.get("cwd") || "",
  };
}

function writeQuery() {
  const query = new URLSearchParams();
  query.set("threadId", state.threadId);
  query.set("rosInvocationId", state.ros);
  if (state.cwd) query.set("cwd", state.cwd);
  window.history.replaceState(null, "", `${window.location.pathname}?${query}`);
}

function loadLog() {
  try {
    const entries = JSON.parse(sessionStorage.getItem(LOG_PREFIX + state.threadId) || "[]");
    return Array.isArray(entries) ? entries : [];
  } catch {
    return [];
  }
}

function loadRun() {
  try {
    const run = JSON.parse(sessionStorage.getItem(RUN_PREFIX + state.threadId) || "null");
    if (run && typeof run.runId === "string" && Number.isSafeInteger(run.lastId) && run.lastId >= 0) return run;
  } catch {
    // not ours: ignore
  }
  return null;
}

// The log and the run cursor are written together, so after a reload the cursor is the id of the last
// event the restored transcript shows: the reattach replays exactly what is missing.
function persistLog() {
  clearTimeout(state.persistTimer);
  state.persistTimer = 0;
  try {
    sessionStorage.setItem(LOG_PREFIX + state.threadId, JSON.stringify(state.log));
    if (state.run) sessionStorage.setItem(RUN_PREFIX + state.threadId, JSON.stringify(state.run));
    else sessionStorage.removeItem(RUN_PREFIX + state.threadId);
  } catch {
    // storage full: the transcript history is best effort
  }
}

function record(entry) {
  state.log.push(entry);
  if (state.log.length > MAX_LOG_ENTRIES) state.log.splice(0, state.log.length - MAX_LOG_ENTRIES);
  if (!state.persistTimer) state.persistTimer = setTimeout(persistLog, 250);
}

// ---------------------------------------------------------------------------------------------- rendering

function addNote(text) {
  ui.transcript.append(el("div", { class: "note", text }));
}

// Text arrives in deltas but is shown as a whole: a view keeps the message's text and re-renders it on a
// timer, never per delta: at most every RENDER_INTERVAL_MS, and never more than a third of the time (the
// wait grows with what the last rendering cost), so 20,000 deltas cost a few dozen renderings.
function streamedView(body, draw) {
  const view = { body, text: "", timer: 0, drawnAt: -Infinity, cost: 0 };
  view.draw = (final) => {
    clearTimeout(view.timer);
    view.timer = 0;
    const started = performance.now();
    draw(view, final);
    view.drawnAt = performance.now();
    view.cost = view.drawnAt - started;
    if (state.running) scrollToEnd();
  };
  view.append = (delta) => {
    view.text += typeof delta === "string" ? delta : "";
    if (view.timer) return;
    const interval = Math.max(RENDER_INTERVAL_MS, 2 * view.cost);
    const wait = Math.max(0, view.drawnAt + interval - performance.now());
    view.timer = setTimeout(() => view.draw(false), wait);
  };
  return view;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const CONTINUES_BLOCK = /^(\s|[-+*]|\d{1,9}[.)])/; // indented, or a list item (a loose list goes on)

// The end of the text's last finished top-level block: the start of a line after a blank line, outside any
// code fence, that starts a new block (not a list item or an indented continuation). What is
// before it never changes as more text arrives, so it is rendered once; only the rest is rendered again.
function stableEnd(text, from) {
  let end = from;
  let fence = null;
  let blank = false;
  let at = from;
  while (at < text.length) {
    const next = text.indexOf("\n", at);
    if (next < 0) break; // the last line is still arriving
    const line = text.slice(at, next);
    if (fence) {
      if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, "") === "") fence = null;
      blank = false;
    } else {
      const opens = FENCE.exec(line);
      if (blank && line.trim() && !CONTINUES_BLOCK.test(line)) end = at;
      if (opens) fence = opens[1];
      blank = !line.trim();
    }
    at = next + 1;
  }
  return end;
}

// Markdown in two parts: the finished blocks (appended once) and the tail (replaced on every rendering).
function drawMarkdown(view, final) {
  view.stable = view.stable || 0;
  for (const node of view.tail || []) node.remove();
  const end = stableEnd(view.text, view.stable);
  if (end > view.stable) {
    view.body.append(renderMarkdown(view.text.slice(view.stable, end)));
    view.stable = end;
  }
  const tail = renderMarkdown(view.text.slice(view.stable));
  view.tail = [...tail.childNodes];
  view.body.append(tail);
  view.body.dataset.rendered = final ? "final" : "streaming";
  view.body.dataset.renders = String(Number(view.body.dataset.renders || "0") + 1); // read by bench/console_render.py
}

function drawPlain(view, final) {
  view.body.textContent = view.text;
  view.body.dataset.rendered = final ? "final" : "streaming";
}

function newTextView(messageId) {
  const body = el("div", { class: "body markdown" });
  ui.transcript.append(el("div", { class: "msg assistant", "data-message-id": messageId }, body));
  const view = streamedView(body, drawMarkdown);
  state.texts.set(messageId, view);
  return view;
}

// A message that continues after a tool card (same messageId, no new START) gets a new bubble below it.
function textView(messageId) {
  const view = state.texts.get(messageId);
  if (view && view.body.parentElement === ui.transcript.lastElementChild) return view;
  if (view) view.draw(true);
  return newTextView(messageId);
}

function reasoningView(messageId) {
  let view = state.reasoning.get(messageId);
  if (!view) {
    const body = el("div", { class: "body" });
    ui.transcript.append(el("details", { class: "reasoning" }, el("summary", { text: "Reasoning" }), body));
    view = streamedView(body, drawPlain);
    state.reasoning.set(messageId, view);
  }
  return view;
}

function endView(views, messageId) {
  const view = views.get(messageId);
  if (!view) return;
  view.draw(true);
  views.delete(messageId);
}

function prettyJson(text) {
  const shown = pretty(text);
  try {
    JSON.parse(typeof text === "string" ? text : JSON.stringify(text));
    return { shown, language: "json" };
  } catch {
    return { shown, language: "" };
  }
}

// Tool arguments and results: pretty-printed, highlighted JSON, inside a collapsed <details> when long.
function showJson(box, className, label, value) {
  const { shown, language } = prettyJson(value);
  const pre = el("pre", { class: className }, codeElement(shown, language));
  const lines = shown.split("\n").length;
  if (lines > LONG_JSON_LINES || shown.length > LONG_JSON_CHARS) {
    box.replaceChildren(el("details", { class: "collapsible" }, el("summary", { text: `${label} (${lines} lines)` }), pre));
  } else {
    box.replaceChildren(pre);
  }
}

function toolCard(toolCallId, name) {
  let tool = state.tools.get(toolCallId);
  if (!tool) {
    const statusEl = el("span", { class: "status", text: "running" });
    const argsEl = el("div", { class: "json-box" }, el("pre", { class: "args" }));
    const progressEl = el("div", { class: "progress" });
    const resultEl = el("div", { class: "json-box" });
    resultEl.hidden = true;
    const node = el(
      "div",
      { class: "tool", "data-tool-call-id": toolCallId, "data-status": "running" },
      el("div", { class: "tool-head" }, "Tool ", el("strong", { class: "tool-name", text: name || "tool" }), statusEl),
      argsEl,
      progressEl,
      resultEl,
    );
    ui.transcript.append(node);
    tool = { node, statusEl, argsEl, progressEl, resultEl, args: "" };
    state.tools.set(toolCallId, tool);
  }
  return tool;
}

function stepStarted(name) {
  const parent = state.openSteps.length ? state.openSteps[state.openSteps.length - 1].children : ui.steps;
  const children = el("ul");
  const item = el("li", { "data-step": name }, el("span", { text: name }), children);
  parent.append(item);
  state.openSteps.push({ name, item, children });
}

function stepFinished(name) {
  const index = state.openSteps.map((step) => step.name).lastIndexOf(name);
  if (index < 0) return;
  state.openSteps[index].item.classList.add("done");
  state.openSteps.splice(index, 1);
}

function setIds(values) {
  for (const [key, value] of Object.entries(values)) {
    if (value !== undefined && value !== null && value !== "") state.ids[key] = String(value);
  }
  const order = ["threadId", "aguiRunId", "executionId", "contextId", "taskId", "sessionId", "rosInvocationId"];
  const shown = JSON.stringify(order.map((key) => state.ids[key] ?? null));
  if (ui.ids.dataset.shown === shown) return; // unchanged: keep the nodes (a status refresh repeats them)
  ui.ids.dataset.shown = shown;
  ui.ids.replaceChildren(
    ...order.filter((key) => key in state.ids).flatMap((key) => [
      el("dt", { text: key }),
      el("dd", { "data-id": key, text: state.ids[key] }),
    ]),
  );
}

function renderUsage(usage) {
  if (!Array.isArray(usage) || usage.length === 0) return;
  ui.usage.replaceChildren(
    ...usage.map((entry) =>
      el(
        "tr",
        {},
        el("td", { text: [entry.provider, entry.model].filter(Boolean).join("/") || "-" }),
        el("td", { text: String(entry.inputTokens ?? 0) }),
        el("td", { text: String(entry.outputTokens ?? 0) }),
        el("td", { text: String(entry.totalTokens ?? 0) }),
        el("td", { text: String(entry.cachedInputTokens ?? 0) }),
      ),
    ),
  );
}

function safeLink(url, label) {
  let parsed = null;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (parsed && (parsed.protocol === "https:" || parsed.protocol === "http:")) {
    return el("a", { href: parsed.toString(), target: "_blank", rel: "noopener noreferrer", text: label });
  }
  return el("code", { class: "artifact-uri", title: "not a web link", text: url });
}

// The content of an inline part (A2A `text`, or `raw` base64 that is UTF-8 text); null when there is none.
function inlineText(part) {
  if (typeof part.text === "string") return part.text;
  if (typeof part.raw !== "string") return null;
  try {
    const bytes = Uint8Array.from(atob(part.raw), (c) => c.charCodeAt(0));
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

// Inline content as a highlighted code block with copy and download (a blob: URL, revoked on a new thread).
function inlineArtifact(part, text, fallbackName) {
  const filename = part.filename || (part.metadata && part.metadata.sourcePath) || fallbackName || "artifact.txt";
  const language = languageOf(filename) || languageOf(part.mediaType);
  // Always octet-stream: a blob: URL belongs to the console's origin, so agent text/html or SVG opened from it
  // would run there (the `download` attribute keeps the file name).
  const url = URL.createObjectURL(new Blob([text], { type: "application/octet-stream" }));
  state.blobUrls.push(url);
  const name = filename.slice(filename.lastIndexOf("/") + 1);
  const download = el("a", { class: "download", href: url, download: name, text: "Download" });
  return codeFrame(el("pre", {}, codeElement(text, language)), language || "text", download);
}

function renderArtifact(value) {
  const parts = Array.isArray(value.parts) ? value.parts : [];
  const list = el("ul");
  for (const part of parts) {
    const meta = part.metadata || {};
    const details = [part.mediaType || meta.mediaType, meta.byteSize !== undefined ? `${meta.byteSize} bytes` : null]
      .filter(Boolean)
      .join(", ");
    const item = el("li");
    const text = inlineText(part);
    if (typeof part.url === "string") item.append(safeLink(part.url, part.filename || part.url));
    else if (text !== null) item.append(inlineArtifact(part, text, value.name));
    else item.append(el("code", { text: JSON.stringify(part) }));
    if (details) item.append(` (${details})`);
    if (meta.sourcePath) item.append(" ", el("code", { text: meta.sourcePath }));
    list.append(item);
  }
  ui.transcript.append(
    el("div", { class: "artifact", "data-artifact-id": value.artifactId }, "Artifact ", el("strong", { text: value.name || "artifact" }), list),
  );
}

function progressText(value) {
  const progress = value.mcpProgress ?? value.progress ?? value.message;
  if (typeof progress === "string") return progress;
  if (progress && typeof progress === "object" && typeof progress.progress === "number") {
    const total = typeof progress.total === "number" && progress.total > 0 ? progress.total : 1;
    const percent = Math.round((progress.progress / total) * 100);
    return `${progress.message || "progress"} (${percent}%)`;
  }
  return JSON.stringify(progress ?? value.status ?? "");
}

function onCustom(name, value) {
  value = value || {};
  switch (name) {
    case "iac-code.session.v1":
      state.executionId = value.executionId || state.executionId;
      state.executionRos = value.rosInvocationId || state.executionRos;
      setIds(value);
      updateButtons();
      break;
    case "iac-code.artifact.v1":
      renderArtifact(value);
      break;
    case "iac-code.tool-progress.v1": {
      const tool = toolCard(value.toolUseId, value.name);
      tool.progressEl.textContent = progressText(value);
      break;
    }
    case "iac-code.pipeline.v1":
      addNote(`pipeline: ${value.eventType || "event"}`);
      break;
    default:
      break; // unknown namespaced events are tolerated
  }
}

// ---------------------------------------------------------------------------------------------- interrupts

function optionTitle(interrupt, id) {
  const options = (interrupt.metadata && interrupt.metadata.standardOptions) || [];
  const option = options.find((candidate) => candidate.id === id);
  return option ? option.title : String(id).replaceAll("_", " ");
}

function enumProperty(schema) {
  const properties = (schema && schema.properties) || {};
  for (const [name, property] of Object.entries(properties)) {
    if (property && Array.isArray(property.enum)) return { name, values: property.enum };
  }
  return null;
}

function answerForm(interrupt) {
  const schema = interrupt.responseSchema || {};
  const form = el("form", { class: "answer" });
  form.addEventListener("submit", (event) => event.preventDefault());
  const enumeration = enumProperty(schema);
  if (enumeration) {
    const row = el("div", { class: "row" });
    enumeration.values.forEach((value, index) => {
      const button = el("button", {
        type: "button",
        class: index === 0 ? "primary choice" : "choice",
        "data-value": value,
        "aria-pressed": "false",
        text: optionTitle(interrupt, value),
      });
      button.addEventListener("click", () => {
        for (const other of row.querySelectorAll("button")) other.setAttribute("aria-pressed", "false");
        button.setAttribute("aria-pressed", "true");
        answer(interrupt, { [enumeration.name]: value });
      });
      row.append(button);
    });
    form.append(row);
    return form;
  }
  const branches = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : null;
  if (branches) {
    const group = `choice-${interrupt.id}`;
    let freeText = null;
    for (const branch of branches) {
      const properties = (branch && branch.properties) || {};
      if (properties.selectedId && "const" in properties.selectedId) {
        const value = String(properties.selectedId.const);
        const radio = el("input", { type: "radio", name: group, value });
        form.append(el("label", { class: "choice" }, radio, properties.selectedId.title || optionTitle(interrupt, value)));
      } else if (properties.freeText) {
        const prompt = (interrupt.metadata && interrupt.metadata.freeTextPrompt) || "Your answer";
        freeText = el("input", { type: "text", name: "freeText", class: "free-text", placeholder: prompt, "aria-label": prompt });
      }
    }
    if (freeText) {
      form.append(freeText);
      freeText.addEventListener("input", () => {
        for (const radio of form.querySelectorAll("input[type=radio]")) radio.checked = false;
      });
    }
    form.append(el("div", { class: "row" }, el("button", { type: "submit", text: "Answer" })));
    form.addEventListener("submit", () => {
      const chosen = form.querySelector("input[type=radio]:checked");
      if (chosen) answer(interrupt, { selectedId: chosen.value });
      else if (freeText && freeText.value.trim()) answer(interrupt, { freeText: freeText.value.trim() });
      else showError("ANSWER_REQUIRED", "Choose an option or type an answer.");
    });
    return form;
  }
  const raw = el("textarea", { rows: "3", class: "raw-payload", "aria-label": "JSON payload", placeholder: "{ }" });
  form.append(el("pre", { text: JSON.stringify(schema, null, 2) }), raw, el("div", { class: "row" }, el("button", { type: "submit", text: "Answer" })));
  form.addEventListener("submit", () => {
    try {
      answer(interrupt, JSON.parse(raw.value));
    } catch {
      showError("ANSWER_REQUIRED", "The answer must be JSON matching the schema.");
    }
  });
  return form;
}

function interruptCard(interrupt) {
  const meta = interrupt.metadata || {};
  const card = el("fieldset", { class: "interrupt", "data-interrupt-id": interrupt.id, "data-reason": interrupt.reason });
  card.append(el("legend", { text: meta.title || (interrupt.reason === "tool_call" ? "Permission required" : "Input required") }));
  card.append(el("p", { class: "message", text: interrupt.message || "" }));
  const facts = [
    ["tool", meta.toolName],
    ["tool call", interrupt.toolCallId],
    ["target", meta.target],
    ["summary", meta.safeSummary],
    ["purpose", meta.purpose],
    ["effect", meta.effect],
  ].filter(([, value]) => value !== undefined && value !== null && value !== "");
  if (facts.length) {
    card.append(el("dl", {}, ...facts.flatMap(([name, value]) => [el("dt", { text: name }), el("dd", { "data-fact": name, text: String(value) })])));
  }
  if (interrupt.expiresAt) card.append(el("p", { class: "expiry", "data-expires-at": interrupt.expiresAt }));
  card.append(answerForm(interrupt));
  return card;
}

function showInterrupts(interrupts) {
  const key = interrupts.map((interrupt) => interrupt.id).join("\n");
  state.pending = interrupts;
  if (key === state.shownKey && state.answers.size === 0 && ui.interrupts.childElementCount) return;
  state.shownKey = key;
  state.answers = new Map();
  ui.interrupts.replaceChildren(...interrupts.map(interruptCard));
  updateExpiry();
  updateButtons();
}

function clearInterrupts() {
  state.pending = [];
  state.shownKey = "";
  state.answers = new Map();
  ui.interrupts.replaceChildren();
  updateButtons();
}

function updateExpiry() {
  for (const node of ui.interrupts.querySelectorAll(".expiry[data-expires-at]")) {
    const left = Date.parse(node.dataset.expiresAt) - Date.now();
    if (Number.isNaN(left)) continue;
    if (left <= 0) {
      node.textContent = "expired";
      node.classList.add("expired");
    } else {
      const seconds = Math.floor(left / 1000);
      node.textContent = `expires in ${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
    }
  }
}

function answer(interrupt, payload) {
  if (state.running) return;
  clearError();
  state.answers.set(interrupt.id, { interruptId: interrupt.id, status: "resolved", payload });
  const card = ui.interrupts.querySelector(`[data-interrupt-id="${CSS.escape(interrupt.id)}"]`);
  if (card) card.dataset.answered = "true";
  if (state.pending.every((pending) => state.answers.has(pending.id))) sendResume();
}

// ---------------------------------------------------------------------------------------------- events

function onEvent(event, live) {
  if (live) record(event);
  switch (event.type) {
    case "USER_MESSAGE":
      ui.transcript.append(el("div", { class: "msg user", text: event.text }));
      break;
    case "USER_ANSWER":
      addNote(`answered: ${event.answers.map((a) => `${a.interruptId} → ${JSON.stringify(a.payload ?? a.status)}`).join("; ")}`);
      break;
    case "RUN_STARTED":
      state.sawTerminal = false;
      addNote(`run ${event.runId} started`);
      setIds({ aguiRunId: event.runId });
      break;
    case "TEXT_MESSAGE_START":
      endView(state.texts, event.messageId);
      newTextView(event.messageId);
      break;
    case "TEXT_MESSAGE_CONTENT":
      textView(event.messageId).append(event.delta);
      break;
    case "TEXT_MESSAGE_END":
      endView(state.texts, event.messageId);
      break;
    case "REASONING_START":
    case "REASONING_MESSAGE_START":
      reasoningView(event.messageId);
      break;
    case "REASONING_MESSAGE_CONTENT":
      reasoningView(event.messageId).append(event.delta);
      break;
    case "REASONING_END":
      endView(state.reasoning, event.messageId);
      break;
    case "TOOL_CALL_START":
      toolCard(event.toolCallId, event.toolCallName);
      break;
    case "TOOL_CALL_ARGS": {
      const tool = toolCard(event.toolCallId);
      tool.args += event.delta;
      tool.argsEl.replaceChildren(el("pre", { class: "args", text: tool.args }));
      break;
    }
    case "TOOL_CALL_END": {
      const tool = toolCard(event.toolCallId);
      showJson(tool.argsEl, "args", "arguments", tool.args);
      break;
    }
    case "TOOL_CALL_RESULT": {
      const tool = toolCard(event.toolCallId);
      tool.resultEl.hidden = false;
      showJson(tool.resultEl, "result", "result", event.content);
      tool.node.dataset.status = "done";
      tool.statusEl.textContent = "done";
      break;
    }
    case "STEP_STARTED":
      stepStarted(event.stepName);
      break;
    case "STEP_FINISHED":
      stepFinished(event.stepName);
      break;
    case "CUSTOM":
      onCustom(event.name, event.value);
      break;
    case "RUN_FINISHED":
      state.sawTerminal = true;
      renderUsage(event.usage);
      if (event.outcome && event.outcome.type === "interrupt") {
        const interrupts = event.outcome.interrupts || [];
        for (const interrupt of interrupts) addNote(`waiting for an answer: ${interrupt.message || interrupt.id}`);
        if (live) {
          showInterrupts(interrupts);
          setThreadStatus("pending", `waiting for ${interrupts.length} answer(s)`);
        }
      } else {
        addNote("run finished");
        if (live) {
          clearInterrupts();
          setThreadStatus("idle", "idle: nothing pending");
        }
      }
      break;
    case "RUN_ERROR":
      state.sawTerminal = true;
      renderUsage(event.usage);
      ui.transcript.append(el("div", { class: "run-error", "data-code": event.code }, el("code", { text: event.code || "RUN_ERROR" }), " ", event.message || ""));
      if (live) showError(event.code || "RUN_ERROR", event.message || "");
      break;
    default:
      break;
  }
  if (live) scrollToEnd();
}

function onRecord(text) {
  const data = [];
  let id = null;
  for (const line of text.split("\n")) {
    if (line.startsWith(":")) {
      if (line.slice(1).trim() === "heartbeat") heartbeat();
    } else if (line.startsWith("data:")) {
      data.push(line.slice(5).replace(/^ /, ""));
    } else if (line.startsWith("id:")) {
      const value = line.slice(3).trim();
      id = /^[0-9]{1,15}$/.test(value) && Number(value) > 0 ? Number(value) : null;
    }
  }
  if (!data.length) return;
  if (state.run && id !== null && id <= state.run.lastId) return; // already shown before the cut
  let event;
  try {
    event = JSON.parse(data.join("\n"));
  } catch {
    showError("PROTOCOL_ERROR", "The server sent an event that is not JSON.");
    return;
  }
  onEvent(event, true);
  if (state.run) {
    if (id === null) state.run.unnumbered = true;
    else state.run.lastId = id;
    if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") state.run.ended = true;
  }
}

// Reads one SSE body to its end (or throws when the connection breaks).
async function readBody(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const held = buffer.endsWith("\r") ? "\r" : "";
    buffer = buffer.slice(0, buffer.length - held.length).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      onRecord(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
    buffer += held;
  }
  // a record without its blank line was cut mid-way: a reattach replays it whole
}

function reattachRequest() {
  const run = state.run;
  const path = `extensions/iac-code/v1/threads/${encodeURIComponent(state.threadId)}/runs/${encodeURIComponent(run.runId)}/events`;
  const requestHeaders = { ...headers(), Accept: "text/event-stream" };
  delete requestHeaders["Content-Type"];
  if (run.lastId > 0) requestHeaders["Last-Event-ID"] = String(run.lastId);
  // The run's credential travels in a header, out of every URL a server or proxy logs; a value a header
  // cannot carry (outside printable ASCII) falls back to the query form.
  let url = api(path);
  if (/^[\x20-\x7e]+$/.test(state.ros)) requestHeaders["Ros-Invocation-Id"] = state.ros;
  else url += `?${new URLSearchParams({ rosInvocationId: state.ros })}`;
  return fetch(url, { method: "GET", headers: requestHeaders, cache: "no-store", credentials: "same-origin" });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Follows the current run to its terminal event: `open` gives the first response (the POST, or a
// reattach after a reload); when the connection drops or the body ends early it reattaches with
// Last-Event-ID, with a doubling backoff, until the terminal event or MAX_REATTACH_ATTEMPTS in a row fail.
// A POST that gets no answer at all is reported, not reattached (as `agui-bridge chat` does).
async function follow(open, { isPost = false } = {}) {
  clearError();
  state.running = true;
  state.sawTerminal = false;
  updateButtons();
  let failures = 0;
  let first = true;
  try {
    for (;;) {
      setConnection("connecting", failures ? `reattaching (attempt ${failures}/${MAX_REATTACH_ATTEMPTS})` : "connecting");
      let why = null;
      let response = null;
      try {
        response = await open();
      } catch (error) {
        why = ["NETWORK_ERROR", String(error && error.message ? error.message : error)];
        if (isPost && first) state.run = null; // the run may never have reached the bridge
      }
      const refused = isPost && first; // a POST refused before its stream: nothing was started
      first = false;
      if (response && (!response.ok || !response.body)) {
        const error = await readError(response);
        if (refused || !RETRYABLE_STATUS.has(response.status)) {
          state.run = null; // refused, unknown or no longer kept: nothing to reattach to
          showError(error.code, error.message);
          setConnection("error", `HTTP ${response.status}`);
          return;
        }
        why = [error.code, error.message];
      } else if (response) {
        setConnection("streaming", failures ? "streaming (reattached)" : "streaming");
        const before = state.run ? state.run.lastId : 0;
        try {
          await readBody(response);
          why = ["STREAM_ENDED", "The stream ended without a terminal event."];
        } catch (error) {
          why = ["NETWORK_ERROR", String(error && error.message ? error.message : error)];
        }
        if (state.sawTerminal) {
          setConnection("idle", "closed");
          return;
        }
        if (state.run && state.run.lastId > before) failures = 0;
      }
      failures += 1;
      if (!state.run || state.run.unnumbered || failures > MAX_REATTACH_ATTEMPTS) {
        setConnection("error", "disconnected");
        showError(why[0], why[1]);
        return;
      }
      persistLog();
      setConnection("connecting", `connection lost after event ${state.run.lastId}: reattaching`);
      await sleep(Math.min(8000, 500 * 2 ** (failures - 1)));
      open = reattachRequest;
    }
  } finally {
    state.running = false;
    persistLog();
    updateButtons();
    await refreshStatus();
  }
}

async function stream(body) {
  state.run = { runId: body.runId, lastId: 0, ended: false, unnumbered: false };
  persistLog();
  await follow(
    () =>
      fetch(api(""), {
        method: "POST",
        headers: { ...headers(), Accept: "text/event-stream" },
        body: JSON.stringify(body),
        cache: "no-store",
        credentials: "same-origin",
      }),
    { isPost: true },
  );
}

// ---------------------------------------------------------------------------------------------- actions

function runBody() {
  return {
    threadId: state.threadId,
    runId: uuid(),
    state: {},
    messages: [],
    tools: [],
    context: [],
    forwardedProps: { iacCode: { schemaVersion: 1, rosInvocationId: state.ros, cwd: state.cwd } },
  };
}

function readyToRun() {
  if (ui.cwd.value.trim() !== state.cwd) {
    state.cwd = ui.cwd.value.trim();
    writeQuery();
  }
  if (!state.cwd) {
    showError("CWD_REQUIRED", "Enter the workspace path (an absolute directory inside the allowed roots).");
    ui.cwd.focus();
    return false;
  }
  return !state.running;
}

async function sendMessage(text) {
  if (!readyToRun()) return;
  if (state.pending.length) {
    showError("RESUME_REQUIRED", "Answer the pending interrupt first, or cancel the execution.");
    return;
  }
  const body = runBody();
  body.messages = [{ id: `message-${uuid()}`, role: "user", content: text }];
  onEvent({ type: "USER_MESSAGE", text }, true);
  await stream(body);
}

async function sendResume() {
  if (!readyToRun()) return;
  const answers = state.pending.map((pending) => state.answers.get(pending.id));
  for (const card of ui.interrupts.querySelectorAll("fieldset")) card.disabled = true;
  const body = runBody();
  body.resume = answers;
  onEvent({ type: "USER_ANSWER", answers }, true);
  await stream(body);
}

async function cancelExecution() {
  if (!state.executionId) return;
  clearError();
  let response;
  try {
    response = await fetch(api(`extensions/iac-code/v1/executions/${encodeURIComponent(state.executionId)}/cancel`), {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ threadId: state.threadId, rosInvocationId: state.executionRos || state.ros }),
      cache: "no-store",
    });
  } catch (error) {
    showError("NETWORK_ERROR", String(error));
    return;
  }
  if (!response.ok) {
    const error = await readError(response);
    showError(error.code, error.message);
    return;
  }
  const result = await response.json();
  addNote(`execution ${result.executionId}: ${result.status}`);
  record({ type: "CONSOLE_NOTE", text: `execution ${result.executionId}: ${result.status}` });
  clearInterrupts();
  if (!state.running) await refreshStatus();
}

async function refreshStatus() {
  if (!state.threadId || !state.ros) return;
  let response;
  try {
    response = await fetch(api(`extensions/iac-code/v1/threads/${encodeURIComponent(state.threadId)}/status`), {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ rosInvocationId: state.ros }),
      cache: "no-store",
    });
  } catch {
    setThreadStatus("unknown", "status unavailable");
    return;
  }
  if (response.status === 404) {
    state.threadActive = false;
    setThreadStatus("new", "new thread");
    if (!state.running) clearInterrupts();
    return;
  }
  if (!response.ok) {
    const error = await readError(response);
    setThreadStatus("unknown", `status: ${error.code}`);
    if (response.status === 401) showError(error.code, `${error.message} Paste the token under Connection.`);
    return;
  }
  const status = await response.json();
  state.executionId = status.executionId;
  state.executionRos = status.rosInvocationId;
  state.threadActive = Boolean(status.active);
  setIds({ threadId: status.threadId, executionId: status.executionId, taskId: status.taskId, rosInvocationId: status.rosInvocationId });
  const pending = Array.isArray(status.pending) ? status.pending : [];
  if (pending.length) {
    showInterrupts(pending);
    setThreadStatus("pending", `waiting for ${pending.length} answer(s)`);
  } else {
    if (!state.running) clearInterrupts();
    if (status.active) setThreadStatus("active", "run in progress");
    else setThreadStatus("idle", "idle: nothing pending");
  }
  updateButtons();
}

function resetView() {
  delete ui.ids.dataset.shown;
  for (const view of [...state.texts.values(), ...state.reasoning.values()]) clearTimeout(view.timer);
  for (const url of state.blobUrls.splice(0)) URL.revokeObjectURL(url);
  ui.transcript.replaceChildren();
  ui.steps.replaceChildren();
  ui.usage.replaceChildren();
  state.ids = {};
  state.texts.clear();
  state.reasoning.clear();
  state.tools.clear();
  state.openSteps = [];
  state.executionId = null;
  state.executionRos = null;
  state.threadActive = false;
  clearInterrupts();
  clearError();
}

function newThread() {
  if (state.running) return;
  resetView();
  state.threadId = uuid();
  state.ros = `console-${uuid()}`;
  state.log = [];
  state.run = null;
  writeQuery();
  setIds({ threadId: state.threadId, rosInvocationId: state.ros });
  setThreadStatus("new", "new thread");
}

function init() {
  const query = readQuery();
  ui.token.value = sessionStorage.getItem(TOKEN_KEY) || "";
  state.cwd = query.cwd;
  ui.cwd.value = query.cwd;
  if (query.threadId) {
    state.threadId = query.threadId;
    state.ros = query.ros || `console-${uuid()}`;
    writeQuery();
    setIds({ threadId: state.threadId, rosInvocationId: state.ros });
    state.log = loadLog();
    for (const entry of state.log) {
      if (entry.type === "CONSOLE_NOTE") addNote(entry.text);
      else onEvent(entry, false);
    }
    state.run = loadRun();
    if (state.run && !state.run.ended && !state.run.unnumbered) {
      addNote(`reattaching to run ${state.run.runId} after event ${state.run.lastId}`);
      follow(reattachRequest); // the reload cut the stream; the run went on without us
    } else {
      refreshStatus();
    }
  } else {
    newThread(); // nothing to ask the server about yet
  }
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = ui.message.value.trim();
    if (!text) return;
    ui.message.value = "";
    sendMessage(text);
  });
  ui.message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) ui.composer.requestSubmit();
  });
  ui.cancel.addEventListener("click", cancelExecution);
  ui.token.addEventListener("input", () => {
    const token = ui.token.value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  });
  ui.token.addEventListener("change", () => {
    clearError();
    refreshStatus();
  });
  ui.cwd.addEventListener("change", () => {
    state.cwd = ui.cwd.value.trim();
    writeQuery();
  });
  ui.newThread.addEventListener("click", newThread);
  ui.refreshStatus.addEventListener("click", refreshStatus);
  window.addEventListener("pagehide", persistLog);
  setInterval(updateExpiry, 1000);
  updateButtons();
}

init();
