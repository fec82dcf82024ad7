#!/usr/bin/env node
// Drives demo scenarios through the JavaScript clients people use, against a running agui-bridge, and
// reports what each client saw next to what went over the wire. Run with `node --import tsx` (the
// reattaching agent is TypeScript, read without a build step).
//
//   node --import tsx drive.mjs < job.json        one JSON line per scenario on stdout
//
// job: {"client": "httpagent" | "copilotkit" | "reattach", "url", "token", "cwd", "timeoutS", "agentUrl",
//       "scenarios": [{"name", "text", "iacCode": {...}, "prefer": {...}, "cancel": bool,
//                      "cutAt": "<marker>", "proxyUrl": "<cutting proxy>"}]}
//
// * httpagent: @ag-ui/client 1.0 HttpAgent.runAgent with a full subscriber; a resume is a new runAgent
//   on the same agent (its messages accumulate) with `resume` built by buildResumeArray from
//   agent.pendingInterrupts, each answer chosen from the interrupt's responseSchema.
// * copilotkit: @copilotkit/runtime's CopilotRuntime (an HttpAgent pointing at the bridge) served on
//   loopback, driven by @copilotkit/core's ProxiedCopilotRuntimeAgent (what its React client uses) over
//   the runtime's REST routes; after the scenario a fresh client replays the thread with connectAgent.
// * reattach: clients/typescript/reattaching-http-agent.ts through a proxy that cuts the first stream
//   (with `agentUrl`, copilotkit's runtime holds that agent, reaching the bridge through the proxy).
//
// Checks made here (each a string in `problems`): every run's subscriber events equal the events on
// the wire to that client, in order (nothing dropped, nothing added); no console.warn/console.error;
// no thrown error; the last run reaches a terminal event. The pytest side checks the outcomes.

import http from "node:http";
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { HttpAgent, buildResumeArray, parseSSEStream } from "@ag-ui/client";
import { Subject } from "rxjs";

// Nothing may silence the clients' warnings, and nothing phones home.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;
process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";
process.env.DO_NOT_TRACK = "1";

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);
const EVENT_TYPES = [
  "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "STEP_FINISHED",
  "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
  "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
  "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
  "REASONING_ENCRYPTED_VALUE", "STATE_SNAPSHOT", "STATE_DELTA", "MESSAGES_SNAPSHOT", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA",
  "RAW", "CUSTOM", "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR",
];
/** RUN_STARTED -> onRunStartedEvent: the typed callback @ag-ui/client calls for each event type. */
const callbackOf = (type) => `on${type.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase())}Event`;
const EVENT_CALLBACKS = EVENT_TYPES.map(callbackOf);
const LIFECYCLE_CALLBACKS = ["onRunInitialized", "onRunFailed", "onRunFinalized", "onMessagesChanged", "onStateChanged", "onNewMessage", "onNewToolCall"];
const MAX_RUNS = 6;

// ---------------------------------------------------------------------------------------------------
// Wire capture: a fetch that tees every event-stream body. Its SSE records are read by @ag-ui/client's own
// SSE parser (parseSSEStream, what HttpAgent reads with), not by one of ours.

/** parseSSEStream fed as the bytes arrive: `push` each read, then `end()` after a whole body or `cut(why)`
 * after one that broke off (a record the body ends inside is no event, as the SSE standard says). */
function sseReader() {
  const source = new Subject();
  const reader = { events: [], error: undefined };
  // parseSSEStream subscribes to its source at once: bytes go in only once its output is subscribed.
  parseSSEStream(source).subscribe({
    next: (event) => reader.events.push(event),
    error: (error) => {
      if (!error?.cutOff) reader.error = describe(error);
    },
  });
  reader.push = (bytes) => source.next({ type: "data", data: bytes });
  reader.end = () => source.complete();
  reader.cut = (why) => source.error(Object.assign(new Error(why), { cutOff: true }));
  return reader;
}

async function eventsOfBody(response) {
  const reader = sseReader();
  reader.push(new Uint8Array(await response.arrayBuffer()));
  reader.end();
  return reader;
}

function recordingFetch(log) {
  return async (url, init) => {
    const entry = { url: String(url), method: init?.method ?? "GET", status: null, events: [], done: Promise.resolve() };
    log.push(entry);
    const response = await fetch(url, init);
    entry.status = response.status;
    if (!response.body || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) return response;
    // A pass-through that keeps a copy: the client reads exactly the bytes the wire carried.
    const sse = sseReader();
    entry.events = sse.events;
    let finish;
    entry.done = new Promise((resolve) => (finish = resolve));
    const settle = (why) => {
      if (why) {
        entry.cut = why;
        sse.cut(why);
      } else sse.end();
      if (sse.error) entry.sseError = sse.error;
      finish();
    };
    const reader = response.body.getReader();
    const theirs = new ReadableStream({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            settle();
            controller.close();
            return;
          }
          sse.push(value);
          controller.enqueue(value);
        } catch (error) {
          settle(String(error));
          controller.error(error);
        }
      },
      cancel(reason) {
        settle("cancelled by the client");
        return reader.cancel(reason);
      },
    });
    return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

// ---------------------------------------------------------------------------------------------------
// Console capture: every warning or error any client prints is reported with its scenario.

const printed = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => {
    printed.push(`${level}: ${args.map((a) => (a instanceof Error ? a.stack ?? a.message : typeof a === "string" ? a : JSON.stringify(a))).join(" ")}`);
  };
}

// ---------------------------------------------------------------------------------------------------
// Answers chosen from the interrupt's responseSchema, as a generic client would.

function valueFor(schema, name, prefer) {
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum.includes(prefer[name]) ? prefer[name] : schema.enum[0];
  if (schema.type === "string") return prefer[name] ?? "medium";
  if (schema.type === "integer" || schema.type === "number") return prefer[name] ?? schema.minimum ?? 0;
  if (schema.type === "boolean") return prefer[name] ?? true;
  return prefer[name] ?? null;
}

function fits(branch, prefer) {
  return Object.entries(branch.properties ?? {}).every(
    ([name, sub]) => !(name in prefer) || sub.const === undefined || sub.const === prefer[name],
  );
}

export function answerFromSchema(schema, prefer = {}) {
  const branches = schema?.oneOf ?? schema?.anyOf;
  if (Array.isArray(branches) && branches.length) {
    return answerFromSchema(branches.find((b) => fits(b, prefer)) ?? branches[0], prefer);
  }
  const answer = {};
  for (const name of schema?.required ?? Object.keys(schema?.properties ?? {})) {
    answer[name] = valueFor(schema.properties?.[name] ?? {}, name, prefer);
  }
  return answer;
}

// ---------------------------------------------------------------------------------------------------
// One scenario: the first run, then one resume per interrupt outcome, until the run does not pause.

/** An id of the input cap's length (200 characters) when the scenario asks for long ids, else a UUID. */
function idFor(scenario, prefix) {
  const id = `${prefix}-${randomUUID()}`;
  return scenario.longIds ? `${id}-${"x".repeat(200)}`.slice(0, 200) : id;
}

function forwardedPropsFor(job, scenario, rosInvocationId) {
  return { iacCode: { schemaVersion: 1, rosInvocationId, cwd: job.cwd, ...(scenario.iacCode ?? {}) } };
}

async function cancelExecution(job, threadId, session) {
  const response = await fetch(new URL(`extensions/iac-code/v1/executions/${encodeURIComponent(session.executionId)}/cancel`, job.url), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${job.token}` },
    body: JSON.stringify({ threadId, rosInvocationId: session.rosInvocationId }),
  });
  return response.status;
}

function describe(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

async function oneRun(agent, params, job, scenario, wire) {
  const events = [];
  const callbacks = new Map();
  let cancelStatus;
  let error;
  const before = wire.length;
  const count = (name) => callbacks.set(name, (callbacks.get(name) ?? 0) + 1);
  // A full subscriber: every typed callback of @ag-ui/client 1.0 counts its calls (checked against the
  // wire in runProblems), plus the lifecycle and state callbacks.
  const subscriber = Object.fromEntries(EVENT_CALLBACKS.map((name) => [name, () => count(name)]));
  for (const name of LIFECYCLE_CALLBACKS) subscriber[name] = () => count(name);
  subscriber.onEvent = ({ event }) => {
    events.push(event);
  };
  subscriber.onCustomEvent = ({ event }) => {
    count("onCustomEvent");
    if (scenario.cancel && event.name === "iac-code.session.v1" && cancelStatus === undefined) {
      cancelStatus = null;
      cancelExecution(job, agent.threadId, event.value).then((s) => (cancelStatus = s));
    }
  };
  const timer = setTimeout(() => agent.abortRun(), (job.timeoutS ?? 60) * 1000);
  try {
    await agent.runAgent(params, subscriber);
  } catch (e) {
    error = describe(e);
  } finally {
    clearTimeout(timer);
  }
  const legs = wire.slice(before);
  await Promise.all(legs.map((leg) => leg.done));
  return { events, legs, error, callbacks: Object.fromEntries(callbacks), cancelStatus };
}

function runProblems(run, wireEvents) {
  const problems = [];
  if (run.error) problems.push(`client error: ${run.error}`);
  const terminal = run.events.filter((e) => TERMINAL.has(e.type));
  if (run.events[0]?.type !== "RUN_STARTED") problems.push(`first event ${run.events[0]?.type ?? "none"}, not RUN_STARTED`);
  if (run.events.filter((e) => e.type === "RUN_STARTED").length !== 1) problems.push("not exactly one RUN_STARTED");
  if (terminal.length !== 1 || !TERMINAL.has(run.events.at(-1)?.type)) problems.push("not exactly one terminal event, last");
  for (const type of new Set(wireEvents.map((e) => e.type))) {
    const onWire = wireEvents.filter((e) => e.type === type).length;
    const called = run.callbacks[callbackOf(type)] ?? 0;
    if (called !== onWire) problems.push(`${callbackOf(type)} was called ${called} times for ${onWire} ${type} on the wire`);
  }
  if (!isDeepStrictEqual(run.events, wireEvents)) {
    const at = run.events.findIndex((e, i) => !isDeepStrictEqual(e, wireEvents[i]));
    const index = at < 0 ? run.events.length : at;
    problems.push(
      `subscriber events differ from the wire at #${index}: ${JSON.stringify(run.events[index])?.slice(0, 300)} vs ${JSON.stringify(wireEvents[index])?.slice(0, 300)} (${run.events.length} vs ${wireEvents.length} events)`,
    );
  }
  return problems;
}

function summary(run) {
  const last = run.events.at(-1);
  return {
    types: run.events.map((e) => (e.type === "CUSTOM" ? `CUSTOM:${e.name}` : e.type)),
    terminal: last?.type ?? null,
    outcome: last?.type === "RUN_FINISHED" ? last.outcome?.type ?? "success" : null,
    code: last?.type === "RUN_ERROR" ? last.code ?? null : null,
    interrupts: last?.outcome?.type === "interrupt" ? last.outcome.interrupts.map((i) => ({ reason: i.reason, kind: i.metadata?.kind })) : [],
    callbacks: run.callbacks,
    httpStatus: run.legs.map((leg) => leg.status),
  };
}

async function playScenario(agent, job, scenario, wire, problems, extraCheck) {
  const rosInvocationId = `interop-${randomUUID()}`;
  const forwardedProps = forwardedPropsFor(job, scenario, rosInvocationId);
  const runs = [];
  let resume;
  for (let n = 0; n < MAX_RUNS; n += 1) {
    const params = { runId: idFor(scenario, "run"), forwardedProps, ...(resume ? { resume } : {}) };
    const run = await oneRun(agent, params, job, scenario, wire);
    const wireEvents = run.legs.flatMap((leg) => leg.events);
    const sseErrors = run.legs.filter((leg) => leg.sseError).map((leg) => `the SSE on the wire to ${leg.url} does not parse: ${leg.sseError}`);
    const found = runProblems(run, wireEvents).concat(sseErrors, extraCheck ? await extraCheck(run, params, forwardedProps) : []);
    problems.push(...found.map((p) => `run ${n + 1}: ${p}`));
    runs.push({ ...summary(run), cancelStatus: run.cancelStatus ?? undefined, reattached: agent.reattachCount ?? undefined, lastEventId: agent.lastEventId ?? undefined });
    if (run.error || runs.at(-1).outcome !== "interrupt" || !agent.pendingInterrupts?.length) break;
    const responses = Object.fromEntries(
      agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: answerFromSchema(i.responseSchema, scenario.prefer) }]),
    );
    resume = buildResumeArray(agent.pendingInterrupts, responses);
  }
  return { runs, forwardedProps };
}

// ---------------------------------------------------------------------------------------------------
// Clients.

async function withHttpAgent(job, scenario) {
  const wire = [];
  const problems = [];
  const agent = new HttpAgent({
    url: job.url,
    headers: { Authorization: `Bearer ${job.token}` },
    threadId: idFor(scenario, "thread"),
    initialMessages: [{ id: `message-${randomUUID()}`, role: "user", content: scenario.text }],
    fetch: recordingFetch(wire),
  });
  const { runs } = await playScenario(agent, job, scenario, wire, problems);
  return { runs, problems };
}

async function withReattachingAgent(job, scenario) {
  const { ReattachingHttpAgent } = await import("../../clients/typescript/reattaching-http-agent.ts");
  const wire = [];
  const problems = [];
  const agent = new ReattachingHttpAgent({
    url: scenario.proxyUrl ?? job.url,
    headers: { Authorization: `Bearer ${job.token}` },
    initialMessages: [{ id: `message-${randomUUID()}`, role: "user", content: scenario.text }],
    fetch: recordingFetch(wire),
    reattachDelayMs: 50,
  });
  // The subscriber must see one uninterrupted run: the wire is the stitched legs, and the SSE ids
  // the bridge gave (1..n) are exactly the positions the agent counted.
  // ... and exactly the run the bridge recorded: every event once, in order (the record, read whole).
  const followed = [];
  const { runs } = await playScenario(agent, job, scenario, wire, problems, async (run, params, forwardedProps) => {
    const found = [];
    if (agent.lastEventId !== run.events.length) found.push(`lastEventId ${agent.lastEventId} != ${run.events.length} events`);
    const path = `extensions/iac-code/v1/threads/${encodeURIComponent(agent.threadId)}/runs/${encodeURIComponent(params.runId)}/events`;
    const url = new URL(path, job.url);
    const headers = { Authorization: `Bearer ${job.token}`, Accept: "text/event-stream", "Ros-Invocation-Id": forwardedProps.iacCode.rosInvocationId };
    const response = await fetch(url, { headers });
    const { events: recorded, error: sseError } = await eventsOfBody(response);
    if (sseError) found.push(`the recorded run's SSE does not parse: ${sseError}`);
    if (!isDeepStrictEqual(run.events, recorded)) {
      found.push(`the subscriber saw ${run.events.length} events, the bridge recorded ${recorded.length} (HTTP ${response.status}), or they differ`);
    }
    followed.push({ runId: params.runId, forwardedProps, events: run.events });
    return found;
  });
  // The connect() seam: a fresh agent (a reloaded page) follows each run from its first event.
  for (const [n, run] of followed.entries()) {
    const fresh = new ReattachingHttpAgent({ url: job.url, headers: { Authorization: `Bearer ${job.token}` } });
    fresh.threadId = agent.threadId;
    const seen = [];
    try {
      await fresh.connectAgent({ runId: run.runId, forwardedProps: run.forwardedProps }, { onEvent: ({ event }) => seen.push(event) });
    } catch (e) {
      problems.push(`connectAgent to run ${n + 1}: ${describe(e)}`);
    }
    if (!isDeepStrictEqual(seen, run.events)) problems.push(`connectAgent to run ${n + 1} saw ${seen.length} events, the run had ${run.events.length}, or they differ`);
  }
  return { runs, problems, connected: followed.length };
}

async function startRuntime(job, bridgeWire) {
  const { CopilotRuntime } = await import("@copilotkit/runtime/v2");
  const { createCopilotNodeListener } = await import("@copilotkit/runtime/v2/node");
  // With `agentUrl` (a cutting proxy) the runtime holds the reattaching agent instead of HttpAgent.
  const { ReattachingHttpAgent } = await import("../../clients/typescript/reattaching-http-agent.ts");
  const Agent = job.agentUrl ? ReattachingHttpAgent : HttpAgent;
  const agent = new Agent({ url: job.agentUrl ?? job.url, headers: { Authorization: `Bearer ${job.token}` }, fetch: recordingFetch(bridgeWire), reattachDelayMs: 50 });
  const runtime = new CopilotRuntime({ agents: { bridge: agent } });
  const listener = createCopilotNodeListener({ runtime, basePath: "/api/copilotkit", activateChannels: false });
  const server = http.createServer(listener);
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return { server, runtimeUrl: `http://127.0.0.1:${server.address().port}/api/copilotkit` };
}

async function withCopilotKit(job, scenario, runtime) {
  const { ProxiedCopilotRuntimeAgent } = await import("@copilotkit/core");
  const wire = [];
  const problems = [];
  const before = runtime.bridgeWire.length;
  const threadId = idFor(scenario, "thread");
  const agent = new ProxiedCopilotRuntimeAgent({
    runtimeUrl: runtime.runtimeUrl,
    agentId: "bridge",
    transport: "rest",
    runtimeMode: "sse",
    fetch: recordingFetch(wire),
  });
  agent.threadId = threadId;
  agent.addMessage({ id: `message-${randomUUID()}`, role: "user", content: scenario.text });
  // What the runtime relays must be what the bridge sent: the same events, the same order (CopilotKit
  // adds the run's `input` to RUN_STARTED, which is its documented addition, nothing else).
  let relayIndex = before;
  const relayCheck = async () => {
    const legs = runtime.bridgeWire.slice(relayIndex);
    relayIndex = runtime.bridgeWire.length;
    await Promise.all(legs.map((leg) => leg.done));
    return legs.flatMap((leg) => leg.events);
  };
  const { runs, forwardedProps } = await playScenario(agent, job, scenario, wire, problems);
  // Compare the relay afterwards, run by run (the bridge legs are in order too).
  const bridgeEvents = await relayCheck();
  const relayed = wire.flatMap((leg) => (leg.url.endsWith("/run") ? leg.events : []));
  const clientEvents = relayed.map((event) => {
    if (event.type !== "RUN_STARTED") return event;
    const { input, ...rest } = event;
    return rest;
  });
  if (!isDeepStrictEqual(clientEvents, bridgeEvents)) {
    const at = clientEvents.findIndex((e, i) => !isDeepStrictEqual(e, bridgeEvents[i]));
    problems.push(
      `the runtime relayed other events than the bridge sent, at #${at}: ${JSON.stringify(clientEvents[at])?.slice(0, 300)} vs ${JSON.stringify(bridgeEvents[at])?.slice(0, 300)} (${clientEvents.length} vs ${bridgeEvents.length})`,
    );
  }
  // connect: a fresh client on the same thread replays it and rebuilds the same conversation.
  const fresh = new ProxiedCopilotRuntimeAgent({ runtimeUrl: runtime.runtimeUrl, agentId: "bridge", transport: "rest", runtimeMode: "sse" });
  fresh.threadId = threadId;
  const replayed = [];
  let connectError;
  try {
    await fresh.connectAgent({ forwardedProps }, { onEvent: ({ event }) => replayed.push(event) });
  } catch (e) {
    connectError = describe(e);
  }
  if (connectError) problems.push(`connect: ${connectError}`);
  const startedRuns = replayed.filter((e) => e.type === "RUN_STARTED").length;
  if (startedRuns !== runs.length) problems.push(`connect replayed ${startedRuns} runs, ${runs.length} ran`);
  if (!TERMINAL.has(replayed.at(-1)?.type)) problems.push(`connect replay ends with ${replayed.at(-1)?.type ?? "nothing"}`);
  const conversation = (messages) => messages.filter((m) => m.role !== "activity").map((m) => ({ id: m.id, role: m.role, content: m.content ?? null, toolCalls: m.toolCalls ?? null }));
  // The same messages, each with the same content and tool calls; their order is reported apart
  // (CopilotKit's replay compacts each message to where it ended).
  const byId = (messages) => [...conversation(messages)].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (!isDeepStrictEqual(byId(fresh.messages), byId(agent.messages))) {
    problems.push(`connect rebuilt another conversation: ${JSON.stringify(conversation(fresh.messages)).slice(0, 600)} vs ${JSON.stringify(conversation(agent.messages)).slice(0, 600)}`);
  }
  const replayOrder = conversation(fresh.messages).map((m) => m.id);
  const liveOrder = conversation(agent.messages).map((m) => m.id);
  return { runs, problems, replayedEvents: replayed.length, replayKeepsOrder: isDeepStrictEqual(replayOrder, liveOrder) };
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const job = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  let runtime;
  if (job.client === "copilotkit") {
    const bridgeWire = [];
    runtime = { bridgeWire, ...(await startRuntime(job, bridgeWire)) };
  }
  try {
    for (const scenario of job.scenarios) {
      const printedBefore = printed.length;
      let result;
      try {
        if (job.client === "httpagent") result = await withHttpAgent(job, scenario);
        else if (job.client === "reattach") result = await withReattachingAgent(job, scenario);
        else result = await withCopilotKit(job, scenario, runtime);
      } catch (e) {
        result = { runs: [], problems: [`driver: ${e && e.stack ? e.stack : e}`] };
      }
      const warnings = printed.slice(printedBefore);
      process.stdout.write(`${JSON.stringify({ scenario: scenario.name, client: job.client, ...result, warnings })}\n`);
    }
  } finally {
    runtime?.server.close();
    runtime?.server.closeAllConnections?.();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`drive: ${error && error.stack ? error.stack : error}\n`);
    process.exit(1);
  },
);
