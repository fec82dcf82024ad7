#!/usr/bin/env node
// Replays captured agui-bridge SSE response bodies through the official
// @ag-ui/client 1.0 consumer pipeline and reports, per stream, whether a real
// AG-UI 1.0 client accepts it.
//
// Usage:
//   node tests/conformance/verify_streams.mjs [--official-only] [--quiet] <dir-or-file.sse>...
//
// Each directory argument contributes its `*.sse` files (sorted, not recursive).
// Every file must hold exactly the bytes our server sent on one POST / response.
//
// How a stream is checked: one local `http` server on 127.0.0.1:0 serves each
// file verbatim with `content-type: text/event-stream`; for each file a fresh
// `new HttpAgent({url, threadId})` runs `runAgent({runId})`, with threadId/runId
// taken from the stream's first `data:` record. runAgent drives the full client
// pipeline of @ag-ui/client 1.0:
//   runHttpRequest -> transformHttpEventStream/parseSSEStream (framing, JSON)
//   -> CompatibilityBoundary middleware (translates legacy nulls, warns)
//   -> enforceEvents (zod schema of every event; malformed known field = fatal,
//      unknown properties stripped with a warning)
//   -> transformChunks -> verifyEvents (the protocol state machine: RUN_STARTED
//      first, nothing after RUN_ERROR, only RUN_ERROR after RUN_FINISHED, no
//      open text/tool/reasoning/step span at RUN_FINISHED, START/CONTENT/END
//      pairing per id) -> defaultApplyEvents (the reducer).
// Any error thrown anywhere in that pipeline rejects runAgent => ok:false,
// stage "verifier".
//
// On top of the official pipeline (disabled with --official-only) this script
// applies agui-bridge's stricter contract
// (docs/design.md#decision-balanced-spans-and-strict-framing):
//   stage "deviation": the client had to repair the stream: any
//     `[ag-ui][compat]` warning (e.g. a JSON null on an optional field),
//     any `[ag-ui][enforce]` warning (unknown event dropped / unknown property
//     stripped: "Removed unrecognised material" on any event is a failure, a
//     standard event carries only its schema's members), and any `[ag-ui]`
//     protocol-version warning;
//   stage "harness": the official verifier tolerates a stream that ends with no
//     terminal event, RUN_FINISHED followed by RUN_ERROR, and several runs in one
//     response; agui-bridge promises exactly one run ending in exactly one
//     terminal event, so those are rejected here, and RUN_FINISHED must repeat
//     RUN_STARTED's threadId/runId.
//
// Output: one JSON line per file on stdout:
//   {"file", "ok", "error", "stage", "events", "applied", "warnings"}
// where events = `data:` records in the file, applied = events the client's
// reducer processed before finishing or failing, warnings = every console
// warning the client printed for this stream.
// Exit code 0 only if every file is ok (2 on usage errors).

import { readFileSync, readdirSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { join, resolve } from "node:path";
import { HttpAgent, parseSSEStream } from "@ag-ui/client";
import { Subject } from "rxjs";

// The client reads this at call time; make sure nothing silences the warnings
// the deviation stage relies on.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;


const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

function parseArgs(argv) {
  const opts = { officialOnly: false, quiet: false, paths: [] };
  for (const arg of argv) {
    if (arg === "--official-only") opts.officialOnly = true;
    else if (arg === "--quiet") opts.quiet = true;
    else if (arg === "-h" || arg === "--help") opts.help = true;
    else if (arg.startsWith("--")) throw new Error(`unknown option ${arg}`);
    else opts.paths.push(arg);
  }
  return opts;
}

function collectFiles(paths) {
  const files = [];
  for (const p of paths) {
    const abs = resolve(p);
    const st = statSync(abs);
    if (st.isDirectory()) {
      for (const name of readdirSync(abs).sort()) {
        if (name.endsWith(".sse")) files.push(join(abs, name));
      }
    } else {
      files.push(abs);
    }
  }
  return files;
}

/** The records of a captured body as @ag-ui/client's own SSE parser (parseSSEStream, what HttpAgent reads
 *  with) reads them, up to the first it cannot read (the client reports that one itself). */
function sseRecords(raw) {
  // parseSSEStream subscribes to its source at once: the bytes go in only once its output is subscribed.
  const source = new Subject();
  const records = [];
  parseSSEStream(source).subscribe({ next: (record) => records.push(record), error: () => {} });
  source.next({ type: "data", data: new Uint8Array(raw) });
  source.complete();
  return records;
}

/** threadId/runId of the first record (none when it does not parse: the client will report why). */
function runIdentity(records) {
  const event = records[0];
  if (event && typeof event === "object") {
    return {
      threadId: typeof event.threadId === "string" ? event.threadId : undefined,
      runId: typeof event.runId === "string" ? event.runId : undefined,
    };
  }
  return { threadId: undefined, runId: undefined };
}

/** Every `[ag-ui]` warning is a deviation: [enforce] (an unknown event dropped, or
 *  "Removed unrecognised material" stripped from a standard event: none is allowed),
 *  [compat] (legacy shapes repaired), [transform] / [legacy] (chunk repairs), and bare
 *  [ag-ui] protocol-version warnings. */
function isDeviation(message) {
  return message.startsWith("[ag-ui]");
}

function harnessErrors(events) {
  const errors = [];
  const terminals = events.filter((e) => TERMINAL.has(e.type));
  const starts = events.filter((e) => e.type === "RUN_STARTED");
  if (starts.length !== 1) errors.push(`expected exactly one RUN_STARTED, got ${starts.length}`);
  if (terminals.length !== 1) {
    errors.push(
      `expected exactly one terminal event, got ${terminals.length} (${terminals.map((e) => e.type).join(", ") || "none"})`,
    );
  }
  const last = events[events.length - 1];
  if (!last || !TERMINAL.has(last.type)) {
    errors.push(`stream does not end with RUN_FINISHED/RUN_ERROR (last: ${last ? last.type : "nothing"})`);
  }
  const finished = events.find((e) => e.type === "RUN_FINISHED");
  if (finished && starts.length === 1) {
    const s = starts[0];
    if (finished.threadId !== s.threadId || finished.runId !== s.runId) {
      errors.push(
        `RUN_FINISHED ${finished.threadId}/${finished.runId} does not match RUN_STARTED ${s.threadId}/${s.runId}`,
      );
    }
  }
  return errors;
}

async function verifyOne(baseUrl, index, file, raw, opts) {
  const records = sseRecords(raw);
  const { threadId, runId } = runIdentity(records);
  const captured = [];
  const events = [];
  const origWarn = console.warn;
  const origError = console.error;
  const record = (...args) =>
    captured.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
  console.warn = record;
  console.error = record;
  let error;
  try {
    const agent = new HttpAgent({ url: `${baseUrl}/${index}`, threadId, initialMessages: [] });
    await agent.runAgent(
      { runId, tools: [], context: [], forwardedProps: {} },
      {
        onEvent: ({ event }) => {
          events.push(event);
        },
      },
    );
  } catch (err) {
    error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  } finally {
    console.warn = origWarn;
    console.error = origError;
  }
  const warnings = captured.filter((w) => !w.startsWith("Agent execution failed:"));
  const result = {
    file,
    ok: true,
    error: null,
    stage: null,
    events: records.length, // what the server sent, read by the client's SSE parser: not what it applied
    applied: events.length,
    warnings,
  };
  if (error !== undefined) {
    return { ...result, ok: false, error, stage: "verifier" };
  }
  if (!opts.officialOnly) {
    const deviations = warnings.filter(isDeviation);
    if (deviations.length > 0) {
      return { ...result, ok: false, error: deviations.join(" | "), stage: "deviation" };
    }
    const problems = harnessErrors(events);
    if (problems.length > 0) {
      return { ...result, ok: false, error: problems.join("; "), stage: "harness" };
    }
  }
  return result;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    return 2;
  }
  if (opts.help || opts.paths.length === 0) {
    process.stderr.write(
      "usage: node verify_streams.mjs [--official-only] [--quiet] <dir-or-file.sse>...\n",
    );
    return opts.help ? 0 : 2;
  }
  const files = collectFiles(opts.paths);
  const bodies = files.map((f) => readFileSync(f));

  const server = createServer((req, res) => {
    // Drain the RunAgentInput the client posts, then replay the captured bytes.
    req.resume();
    req.on("end", () => {
      const index = Number.parseInt((req.url || "/").slice(1), 10);
      const body = bodies[index];
      if (req.method !== "POST" || body === undefined) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end('{"error":{"code":"NOT_FOUND","message":"no such capture"}}');
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.end(body);
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  const baseUrl = `http://127.0.0.1:${port}`;

  let failures = 0;
  try {
    for (let i = 0; i < files.length; i += 1) {
      const result = await verifyOne(baseUrl, i, files[i], bodies[i], opts);
      if (!result.ok) failures += 1;
      if (!opts.quiet || !result.ok) process.stdout.write(`${JSON.stringify(result)}\n`);
    }
  } finally {
    server.close();
  }
  return failures === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`verify_streams: ${err && err.stack ? err.stack : err}\n`);
    process.exitCode = 2;
  },
);
