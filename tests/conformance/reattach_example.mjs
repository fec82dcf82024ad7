#!/usr/bin/env node
// Reattaching to a live agui-bridge run from JavaScript or TypeScript (docs/reattach.md, "Reattaching from a client").
//
// @ag-ui/client's HttpAgent cannot reconnect, so this reads the SSE itself: every event of a run carries
// `id: <n>` (1 = RUN_STARTED). Keep the last id; after a cut, GET the run's events route with
// `Last-Event-ID` and go on. The events are plain AG-UI events: feed them to @ag-ui/client's
// `verifyEvents` or your own reducer. docs/reattach.md quotes the part between the markers.
//
// Self-test (tests/e2e/test_reattach_clients.py runs it against a live bridge):
//   node reattach_example.mjs --url <bridge base url> --token <bearer> --cwd <workspace> --message <text> --cut-after <n>
// starts a run with POST, aborts the connection after n events, reattaches with the last id, and prints
// one JSON line: {"events": [...], "ids": [...], "reattached": true}. Exit 1 if @ag-ui/client's
// verifier rejects the stitched stream.

import { verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

// --- reattach example: begin
// Yields [id, event] for every SSE record of a fetch Response body.
async function* sseEvents(response) {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer = (buffer + decoder.decode(chunk, { stream: true })).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const lines = buffer.slice(0, end).split("\n");
      buffer = buffer.slice(end + 2);
      const id = lines.find((l) => l.startsWith("id:"))?.slice(3).trim();
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
      if (data.length) yield [Number(id), JSON.parse(data.join("\n"))];
    }
  }
}

// Reattach: the events after `lastId` (all when 0), then the live run until its terminal event.
export async function* reattach({ baseUrl, token, threadId, runId, rosInvocationId, lastId = 0 }) {
  const path = `extensions/iac-code/v1/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}/events`;
  const url = new URL(path, baseUrl);
  // The run's credential in a header, where no access log writes it (?rosInvocationId= also works).
  const headers = { Accept: "text/event-stream", Authorization: `Bearer ${token}`, "Ros-Invocation-Id": rosInvocationId };
  if (lastId > 0) headers["Last-Event-ID"] = String(lastId);
  const response = await fetch(url, { headers });
  if (!response.ok) throw new Error(`reattach: HTTP ${response.status} ${await response.text()}`);
  for await (const [id, event] of sseEvents(response)) {
    if (id <= lastId) continue; // already seen before the cut
    yield [id, event];
  }
}
// --- reattach example: end

function options(argv) {
  const result = {};
  for (let i = 0; i < argv.length; i += 2) result[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const name of ["url", "token", "cwd", "message", "cut-after"]) {
    if (!result[name]) {
      process.stderr.write(`usage: missing --${name}\n`);
      process.exit(2);
    }
  }
  return result;
}

async function selfTest() {
  const opts = options(process.argv.slice(2));
  const threadId = crypto.randomUUID();
  const runId = crypto.randomUUID();
  const rosInvocationId = `reattach-example-${crypto.randomUUID()}`;
  const body = {
    threadId, runId, state: {}, messages: [{ id: crypto.randomUUID(), role: "user", content: opts.message }],
    tools: [], context: [], forwardedProps: { iacCode: { schemaVersion: 1, rosInvocationId, cwd: opts.cwd } },
  };
  const cut = new AbortController();
  const response = await fetch(opts.url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream", Authorization: `Bearer ${opts.token}` },
    body: JSON.stringify(body),
    signal: cut.signal,
  });
  if (!response.ok) throw new Error(`POST: HTTP ${response.status} ${await response.text()}`);
  const seen = [];
  try {
    for await (const pair of sseEvents(response)) {
      seen.push(pair);
      if (seen.length >= Number(opts["cut-after"])) cut.abort(); // the cut: a dropped connection
    }
  } catch (error) {
    if (error.name !== "AbortError") throw error;
  }
  const lastId = seen.length ? seen[seen.length - 1][0] : 0;
  for await (const pair of reattach({ baseUrl: opts.url, token: opts.token, threadId, runId, rosInvocationId, lastId })) {
    seen.push(pair);
  }
  const events = seen.map(([, event]) => event);
  await lastValueFrom(verifyEvents(false)(from(events)).pipe(toArray())); // throws if not valid AG-UI
  process.stdout.write(`${JSON.stringify({ events, ids: seen.map(([id]) => id), lastIdAtCut: lastId })}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  selfTest().catch((error) => {
    process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
    process.exit(1);
  });
}
