#!/usr/bin/env node
// Drives real interrupt -> resume flows against a running agui-bridge with the
// official @ag-ui/client 1.0 HttpAgent (its event verifier is always on inside
// runAgent), and reports what the client saw.
//
// Usage:
//   node tests/conformance/interrupt_flows.mjs --url <bridge base url> --token <bearer token>
//        --cwd <absolute workspace dir> --flow allow|deny|question|question-free|expired-cancel [--timeout <seconds>]
//
//   allow     "please write file" -> permission interrupt -> resume {"decision":"allow_once"} -> success
//   deny      "please write file" -> permission interrupt -> resume {"decision":"deny"}       -> success
//   question  "ask me a question" -> question interrupt   -> resume {"selectedId":"small"}     -> success
//   question-free   the same question answered with            {"freeText":"medium"}      -> success
//   expired-cancel  "please write file", wait until the interrupt expired (bridge with a short
//                   --interrupt-ttl), resume `cancelled` -> outcome cancelled, then a plain run -> success
//
// Output: one JSON line per run on stdout (`"kind":"run"`, run = "interrupt" | "resume"), then one
// `"kind":"flow"` line. Exit code 0 only if every check passed; 1 on any failure (a verifier error
// thrown by the client, an HTTP error, RUN_ERROR, a wrong outcome, a client deviation warning, a
// wrong request body); 2 on usage errors.
//
// ---------------------------------------------------------------------------------------------
// What @ag-ui/client 1.0.0 does with interrupts (read from node_modules/@ag-ui/client/dist/index.mjs
// and its source map, src/agent/agent.ts, src/agent/http.ts, src/apply/default.ts,
// src/interrupts/index.ts, and @ag-ui/core src/generated/schemas.ts):
//
// * Request body. `agent.runAgent(parameters, subscriber)` builds the RunAgentInput in
//   AbstractAgent.prepareRunAgentInput:
//     { threadId: agent.threadId,            // fixed per agent (constructor `threadId`, else uuid)
//       runId: parameters.runId || uuidv4(),
//       protocolVersion: "1.0",              // always, unless the agent pins an older peer ceiling
//       tools, context, forwardedProps,      // structuredClone of parameters.* (default [] / [] / {})
//       state: agent.state,                  // {} unless set
//       messages: agent.messages,            // the WHOLE local history minus role "activity":
//                                            // on a resume this is the original user message plus the
//                                            // assistant/tool messages the reducer built from run 1
//       resume: parameters.resume }          // only when given; copied verbatim
//   `resume` is the only interrupt-specific request field: RunAgentParameters.resume is
//   `ResumeEntry[]` = `{interruptId, status: "resolved"|"cancelled", payload?, metadata?}`
//   (core schema: payload any JSON but not null). There is no other resume API: resuming is
//   "call runAgent again on the same agent with `resume` and a new runId". forwardedProps are
//   NOT remembered between runs, so the caller must pass the same object (same rosInvocationId)
//   again. HttpAgent.run then applies enforceOutgoingInput (strips unknown top-level members with
//   an `[ag-ui][enforce] ... from the outgoing input` warning, zod-parses the input) and POSTs
//   JSON with headers {...config.headers, "Content-Type": "application/json",
//   Accept: "text/event-stream"}.
// * Helper `buildResumeArray(interrupts, {[id]: {status, payload?, metadata?}})` builds the array
//   in the interrupts' order; it throws if an open interrupt has no response or a response names an
//   unknown id, and drops `payload` for `cancelled`. Used below with agent.pendingInterrupts.
// * How the interrupt reaches the caller. RUN_FINISHED with `outcome.type == "interrupt"` is
//   exposed three ways: (1) subscriber `onRunFinishedEvent({event, outcome: "interrupt",
//   interrupts})`; (2) `agent.pendingInterrupts` (a copy of outcome.interrupts, set after the
//   subscribers ran unless one returned stopPropagation); (3) the raw event via `onEvent`.
//   runAgent's resolved `{result, newMessages}` says nothing about it: `result` is only
//   RUN_FINISHED.result of a *success*. pendingInterrupts is replaced on every RUN_FINISHED
//   (success/cancelled -> []), and is NOT touched by RUN_ERROR or by a thrown/HTTP error, so after
//   a failed resume the same interrupts stay pending client-side and a corrected resume can follow.
// * A RUN_ERROR event does not reject runAgent (the promise resolves; only onRunErrorEvent fires).
//   A non-2xx HTTP answer (e.g. a pre-stream 409 JSON error) or any verifier/schema violation
//   rejects it (after console.error("Agent execution failed:", err)).
// * Client-side rules before any byte is sent (AbstractAgent.onInitialize, throws AGUIError, the
//   runAgent promise rejects, no HTTP request is made):
//     - while agent.pendingInterrupts is non-empty, every pending interrupt id must appear in
//       `resume` ("Thread has N pending interrupt(s) not addressed by resume: ..."); so the same
//       agent refuses a plain new run (there is no client API to drop pending interrupts other
//       than assigning agent.pendingInterrupts yourself). Extra/unknown/duplicate ids in `resume`
//       are NOT checked here (only buildResumeArray checks unknown ids).
//     - expiresAt: `isInterruptExpired(i)` is `new Date(i.expiresAt) <= now` (absent -> never
//       expires; an unparseable string gives an Invalid Date, which compares false -> never
//       expires). An expired pending interrupt may only be answered with status "cancelled";
//       "resolved" throws "Interrupt <id> expired at <expiresAt> and can no longer be answered.
//       Cancel it to continue the thread." So a server's expiresAt is enforced against the
//       CLIENT's clock, and a client can always get past an expired interrupt by cancelling it.
//   A fresh HttpAgent (pendingInterrupts empty) has no such check: it can send any resume.
// * The verifier is per runAgent call (a resume run is verified as an independent stream:
//   RUN_STARTED first, balanced spans, nothing after RUN_ERROR, ...). The interrupt outcome must
//   carry at least one interrupt (`interrupts: min(1)`), each `{id, reason}` required,
//   `message`, `toolCallId`, `expiresAt` (string), `responseSchema` (object), `metadata` optional.
// ---------------------------------------------------------------------------------------------

import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { HttpAgent, buildResumeArray, isInterruptExpired } from "@ag-ui/client";

// The client reads this at call time; make sure nothing silences its warnings.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

const FLOWS = {
  allow: {
    text: "please write file x.yaml",
    reason: "tool_call",
    answer: () => ({ decision: "allow_once" }),
  },
  deny: {
    text: "please write file x.yaml",
    reason: "tool_call",
    answer: () => ({ decision: "deny" }),
  },
  question: {
    text: "ask me a question about the size",
    reason: "input_required",
    answer: (interrupt) => {
      // Answer from the advertised schema, as a generic client would: the option "small".
      const branches = Array.isArray(interrupt.responseSchema?.oneOf) ? interrupt.responseSchema.oneOf : [];
      const hasSmall = branches.some((b) => b?.properties?.selectedId?.const === "small");
      return hasSmall ? { selectedId: "small" } : { freeText: "medium" };
    },
  },
  "question-free": {
    text: "ask me a question about the size",
    reason: "input_required",
    answer: () => ({ freeText: "medium" }),
  },
  // Needs a bridge started with a short --interrupt-ttl: the client refuses to answer an expired
  // interrupt with anything but `cancelled` ("Cancel it to continue the thread"); the bridge then
  // ends RUN_FINISHED cancelled, the client forgets the interrupt, and a plain new run succeeds.
  "expired-cancel": {
    text: "please write file x.yaml",
    reason: "tool_call",
    status: "cancelled",
    outcome: "cancelled",
    waitForExpiry: true,
    followUp: "thanks, say hello",
  },
};

function parseArgs(argv) {
  const opts = { timeout: 60 };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "-h" || arg === "--help") {
      opts.help = true;
      continue;
    }
    const m = /^--(url|token|cwd|flow|timeout)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unknown argument ${arg}`);
    const value = m[2] !== undefined ? m[2] : argv[++i];
    if (value === undefined) throw new Error(`${arg} needs a value`);
    opts[m[1]] = value;
  }
  if (opts.help) return opts;
  for (const name of ["url", "token", "cwd", "flow"]) {
    if (!opts[name]) throw new Error(`--${name} is required`);
  }
  if (!Object.hasOwn(FLOWS, opts.flow)) throw new Error(`--flow must be one of ${Object.keys(FLOWS).join("|")}`);
  if (!opts.cwd.startsWith("/")) throw new Error("--cwd must be an absolute path");
  opts.timeout = Number(opts.timeout);
  if (!(opts.timeout > 0)) throw new Error("--timeout must be a positive number of seconds");
  return opts;
}

// Same conventions as verify_streams.mjs: every `[ag-ui]` warning is a deviation, a member stripped
// from a standard event ("Removed unrecognised material") included (docs/design.md#decision-agui-1-0-clients).
function isDeviation(message) {
  return message.startsWith("[ag-ui]");
}

function describeError(err) {
  if (!(err instanceof Error)) return String(err);
  return `${err.name}: ${err.message}`;
}

/** One "request as sent": the exact JSON body the client POSTed (Authorization redacted). */
function recordingFetch(requests) {
  return async (url, init) => {
    const entry = { url, method: init?.method, headers: {}, body: undefined, status: undefined };
    for (const [k, v] of Object.entries(init?.headers ?? {})) {
      entry.headers[k] = k.toLowerCase() === "authorization" ? v.replace(/\s.*$/, " <redacted>") : v;
    }
    try {
      entry.body = JSON.parse(String(init?.body));
    } catch {
      entry.body = String(init?.body);
    }
    requests.push(entry);
    const response = await fetch(url, init);
    entry.status = response.status;
    entry.contentType = response.headers.get("content-type");
    return response;
  };
}

/** Checks of the stream as a whole, stricter than the official verifier (as verify_streams.mjs). */
function streamProblems(events, runId, threadId) {
  const problems = [];
  const starts = events.filter((e) => e.type === "RUN_STARTED");
  const terminals = events.filter((e) => TERMINAL.has(e.type));
  if (starts.length !== 1) problems.push(`expected exactly one RUN_STARTED, got ${starts.length}`);
  if (terminals.length !== 1) {
    problems.push(`expected exactly one terminal event, got ${terminals.map((e) => e.type).join(", ") || "none"}`);
  }
  const last = events[events.length - 1];
  if (!last || !TERMINAL.has(last.type)) problems.push(`stream does not end with a terminal event (last: ${last ? last.type : "nothing"})`);
  for (const e of [...starts, ...events.filter((x) => x.type === "RUN_FINISHED")]) {
    if (e.threadId !== threadId || e.runId !== runId) {
      problems.push(`${e.type} is ${e.threadId}/${e.runId}, the request was ${threadId}/${runId}`);
    }
  }
  return problems;
}

/** One runAgent call with warnings captured; never throws. */
async function runOnce(agent, params, requests, timeoutS) {
  const events = [];
  let finished; // onRunFinishedEvent params
  const captured = [];
  const origWarn = console.warn;
  const origError = console.error;
  const record = (...args) => captured.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
  console.warn = record;
  console.error = record;
  const before = requests.length;
  let error;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    agent.abortRun();
  }, timeoutS * 1000);
  try {
    await agent.runAgent(params, {
      onEvent: ({ event }) => {
        events.push(event);
      },
      onRunFinishedEvent: (p) => {
        finished = { outcome: p.outcome, interrupts: p.interrupts };
      },
    });
  } catch (err) {
    error = describeError(err);
  } finally {
    clearTimeout(timer);
    console.warn = origWarn;
    console.error = origError;
  }
  if (timedOut) error = `${error ? `${error}; ` : ""}timed out after ${timeoutS}s (run aborted)`;
  const warnings = captured.filter((w) => !w.startsWith("Agent execution failed:"));
  const request = requests.length > before ? requests[requests.length - 1] : undefined;
  return { events, finished, error, warnings, request, requestsSent: requests.length - before };
}

function summarizeInterrupt(i) {
  return {
    id: i.id,
    reason: i.reason,
    message: i.message,
    toolCallId: i.toolCallId,
    expiresAt: i.expiresAt,
    expiredForClient: isInterruptExpired(i),
    kind: i.metadata?.kind,
    responseSchema: i.responseSchema,
  };
}

function runLine(flow, name, threadId, runId, r, extra, problems) {
  const terminal = r.events.filter((e) => TERMINAL.has(e.type)).pop();
  const runError = terminal?.type === "RUN_ERROR" ? { code: terminal.code, message: terminal.message } : undefined;
  const outcome = terminal?.type === "RUN_FINISHED" ? (terminal.outcome?.type ?? "success") : runError ? "RUN_ERROR" : null;
  const body = r.request?.body;
  return {
    kind: "run",
    flow,
    run: name,
    ok: problems.length === 0,
    problems,
    threadId,
    runId,
    httpStatus: r.request?.status ?? null,
    events: r.events.map((e) => (e.type === "CUSTOM" ? `CUSTOM:${e.name}` : e.type)),
    outcome,
    interrupts: terminal?.outcome?.type === "interrupt" ? terminal.outcome.interrupts.map(summarizeInterrupt) : [],
    runError: runError ?? null,
    error: r.error ?? null,
    warnings: r.warnings,
    request:
      body && typeof body === "object"
        ? {
            threadId: body.threadId,
            runId: body.runId,
            protocolVersion: body.protocolVersion,
            messageRoles: Array.isArray(body.messages) ? body.messages.map((m) => m.role) : null,
            forwardedProps: body.forwardedProps,
            resume: body.resume,
          }
        : (body ?? null),
    ...extra,
  };
}

/** Problems common to both runs: client error, deviations, stream shape, request identity. */
function commonProblems(r, threadId, runId, forwardedProps) {
  const problems = [];
  if (r.error) problems.push(`client: ${r.error}`);
  const deviations = r.warnings.filter(isDeviation);
  if (deviations.length) problems.push(`client deviation warnings: ${deviations.join(" | ")}`);
  if (r.requestsSent !== 1) problems.push(`expected exactly one HTTP request, the client sent ${r.requestsSent}`);
  if (r.request) {
    if (r.request.status !== 200) problems.push(`HTTP ${r.request.status}`);
    const b = r.request.body ?? {};
    if (b.threadId !== threadId) problems.push(`request threadId ${b.threadId} != ${threadId}`);
    if (b.runId !== runId) problems.push(`request runId ${b.runId} != ${runId}`);
    if (!isDeepStrictEqual(b.forwardedProps, forwardedProps)) problems.push("request forwardedProps differ from the flow's");
  }
  if (!r.error) problems.push(...streamProblems(r.events, runId, threadId));
  const runError = r.events.find((e) => e.type === "RUN_ERROR");
  if (runError) problems.push(`RUN_ERROR ${runError.code}: ${runError.message}`);
  return problems;
}

async function runFlow(opts) {
  const spec = FLOWS[opts.flow];
  const url = opts.url.endsWith("/") ? opts.url : `${opts.url}/`;
  const threadId = randomUUID();
  const forwardedProps = {
    iacCode: { schemaVersion: 1, rosInvocationId: `ros-${randomUUID()}`, cwd: opts.cwd, runMode: "normal" },
  };
  const requests = [];
  const agent = new HttpAgent({
    url,
    threadId,
    headers: { Authorization: `Bearer ${opts.token}`, "Content-Type": "application/json" },
    initialMessages: [{ id: `message-${randomUUID()}`, role: "user", content: spec.text }],
    fetch: recordingFetch(requests),
  });
  const lines = [];
  let ok = true;

  // Run 1: the turn that asks for input.
  const firstRunId = randomUUID();
  const first = await runOnce(
    agent,
    { runId: firstRunId, tools: [], context: [], forwardedProps },
    requests,
    opts.timeout,
  );
  const p1 = commonProblems(first, threadId, firstRunId, forwardedProps);
  if (first.request?.body && "resume" in first.request.body) p1.push("the first run must not carry `resume`");
  const pending = agent.pendingInterrupts.map((i) => ({ ...i }));
  if (!first.error && first.finished?.outcome !== "interrupt") {
    p1.push(`expected RUN_FINISHED outcome interrupt, got ${first.finished?.outcome ?? "no RUN_FINISHED"}`);
  }
  if (first.finished?.outcome === "interrupt") {
    if (pending.length !== 1) p1.push(`expected exactly one pending interrupt, agent.pendingInterrupts has ${pending.length}`);
    if (!isDeepStrictEqual(pending.map((i) => i.id), first.finished.interrupts.map((i) => i.id))) {
      p1.push("agent.pendingInterrupts differs from the RUN_FINISHED interrupts");
    }
    for (const i of pending) {
      if (i.reason !== spec.reason) p1.push(`interrupt ${i.id}: reason ${i.reason}, expected ${spec.reason}`);
      if (typeof i.responseSchema !== "object") p1.push(`interrupt ${i.id}: no responseSchema`);
      // docs/design.md#decision-interrupts-expire: every interrupt carries expiresAt (RFC 3339 UTC).
      if (i.expiresAt === undefined) p1.push(`interrupt ${i.id}: no expiresAt`);
      else if (Number.isNaN(Date.parse(i.expiresAt))) {
        p1.push(`interrupt ${i.id}: expiresAt ${JSON.stringify(i.expiresAt)} is not a date the client can read`);
      }
      if (isInterruptExpired(i)) p1.push(`interrupt ${i.id}: already expired for the client (expiresAt ${i.expiresAt})`);
    }
  }

  // Client-side guard: with interrupts pending, the same agent refuses a plain new run before
  // anything is sent (AbstractAgent.onInitialize).
  let clientGuard = null;
  if (pending.length > 0) {
    const sentBefore = requests.length;
    try {
      await agent.runAgent({ runId: randomUUID(), tools: [], context: [], forwardedProps });
      clientGuard = { refused: false, error: null, requestsSent: requests.length - sentBefore };
      p1.push("the client started a plain run although interrupts were pending");
    } catch (err) {
      clientGuard = { refused: true, error: describeError(err), requestsSent: requests.length - sentBefore };
      if (requests.length !== sentBefore) p1.push("the refused run still sent an HTTP request");
    }
  }
  lines.push(runLine(opts.flow, "interrupt", threadId, firstRunId, first, { clientGuard }, p1));
  ok &&= p1.length === 0;

  if (pending.length === 0) {
    lines.push({ kind: "flow", flow: opts.flow, ok: false, threadId, error: "no interrupt to resume" });
    return { ok: false, lines };
  }

  // Run 2: the resume, through the client's own API (same agent, same threadId and forwardedProps,
  // new runId, `resume` built by buildResumeArray from agent.pendingInterrupts).
  if (spec.waitForExpiry) {
    const deadline = Date.now() + 20_000;
    while (!agent.pendingInterrupts.every((i) => isInterruptExpired(i)) && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 100));
    }
  }
  const status = spec.status ?? "resolved";
  const responses = Object.fromEntries(
    pending.map((i) => [i.id, status === "resolved" ? { status, payload: spec.answer(i) } : { status }]),
  );
  const resume = buildResumeArray(agent.pendingInterrupts, responses);
  const resumeRunId = randomUUID();
  const second = await runOnce(
    agent,
    { runId: resumeRunId, tools: [], context: [], forwardedProps, resume },
    requests,
    opts.timeout,
  );
  const p2 = commonProblems(second, threadId, resumeRunId, forwardedProps);
  const sentResume = second.request?.body?.resume;
  const expectedResume = pending.map((i) => ({ interruptId: i.id, ...responses[i.id] }));
  if (second.request && !isDeepStrictEqual(sentResume, expectedResume)) {
    p2.push(`request resume ${JSON.stringify(sentResume)} != ${JSON.stringify(expectedResume)}`);
  }
  if (resumeRunId === firstRunId) p2.push("the resume reused the first runId");
  const expectedOutcome = spec.outcome ?? "success";
  if (!second.error && second.finished?.outcome !== expectedOutcome) {
    p2.push(`expected RUN_FINISHED outcome ${expectedOutcome}, got ${second.finished?.outcome ?? "no RUN_FINISHED"}`);
  }
  if (second.finished?.outcome === expectedOutcome && agent.pendingInterrupts.length !== 0) {
    p2.push(`agent.pendingInterrupts still has ${agent.pendingInterrupts.length} after ${expectedOutcome}`);
  }
  const text = second.events
    .filter((e) => e.type === "TEXT_MESSAGE_CONTENT")
    .map((e) => e.delta)
    .join("");
  lines.push(
    runLine(opts.flow, "resume", threadId, resumeRunId, second, {
      answer: responses,
      pendingAfter: agent.pendingInterrupts.map((i) => i.id),
      text: text.length > 400 ? `${text.slice(0, 400)}...` : text,
    }, p2),
  );
  ok &&= p2.length === 0;

  // Run 3 (flows with a follow-up): the same agent takes a plain new turn on the thread.
  if (spec.followUp) {
    agent.addMessage({ id: `message-${randomUUID()}`, role: "user", content: spec.followUp });
    const followRunId = randomUUID();
    const third = await runOnce(agent, { runId: followRunId, tools: [], context: [], forwardedProps }, requests, opts.timeout);
    const p3 = commonProblems(third, threadId, followRunId, forwardedProps);
    if (third.request?.body && "resume" in third.request.body) p3.push("the follow-up run must not carry `resume`");
    if (!third.error && third.finished?.outcome !== "success") {
      p3.push(`expected RUN_FINISHED outcome success, got ${third.finished?.outcome ?? "no RUN_FINISHED"}`);
    }
    lines.push(runLine(opts.flow, "followup", threadId, followRunId, third, {}, p3));
    ok &&= p3.length === 0;
  }
  lines.push({ kind: "flow", flow: opts.flow, ok, threadId, rosInvocationId: forwardedProps.iacCode.rosInvocationId });
  return { ok, lines };
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`interrupt_flows: ${err.message}\n`);
    return 2;
  }
  if (opts.help) {
    process.stderr.write(
      "usage: node interrupt_flows.mjs --url <base url> --token <bearer> --cwd <abs dir> --flow allow|deny|question|question-free|expired-cancel [--timeout s]\n",
    );
    return 0;
  }
  const { ok, lines } = await runFlow(opts);
  for (const line of lines) process.stdout.write(`${JSON.stringify(line)}\n`);
  return ok ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`interrupt_flows: ${err && err.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  },
);
