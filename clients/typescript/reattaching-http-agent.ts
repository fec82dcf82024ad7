// An @ag-ui/client 1.0 HttpAgent that survives a dropped connection to agui-bridge.
//
// HttpAgent streams a run over one POST; when that connection drops (a proxy idle timeout, a network
// switch) the run is lost for the app, although the bridge keeps it running and records every event
// (docs/design.md#reattach). This subclass keeps the last event id and, when a stream ends without
// RUN_FINISHED or RUN_ERROR, reattaches with `GET .../threads/{threadId}/runs/{runId}/events`
// (cursor `Last-Event-ID`, the agent's headers with their bearer, the run's rosInvocationId in the
// `Ros-Invocation-Id` header, never in the URL) and goes on feeding the same run to its subscribers:
// they see one run, every event once, in order. A reattach answered 429, 502, 503 or 504 (the bridge's
// follower cap, a proxy between deploys) is retried after its Retry-After, within the same bounded
// attempts; any other HTTP status is final.
// It also fills HttpAgent's `connect()` seam, so `agent.connectAgent({ runId, forwardedProps })` follows
// a run this page did not start (after a reload), from its first event.
//
// Readable as is, no build step: run it with a TypeScript runner (`node --import tsx`) or copy it in.

import {
  HttpAgent,
  runHttpRequest,
  transformHttpEventStream,
  type BaseEvent,
  type HttpAgentConfig,
  type RunAgentInput,
} from "@ag-ui/client";
import { Observable, type Subscription } from "rxjs";

export interface ReattachingHttpAgentConfig extends HttpAgentConfig {
  /** Reattach attempts in a row that bring no new event before the run is given up (default 5). */
  maxReattachAttempts?: number;
  /** Wait before the first reattach; doubled at each attempt that brings nothing (default 250 ms). */
  reattachDelayMs?: number;
}

const TERMINAL_TYPES = new Set(["RUN_FINISHED", "RUN_ERROR"]);
/** Answers that say "later", not "never": rate limit, follower cap, a proxy's bad gateway or timeout. */
const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);
/** The longest Retry-After honoured as given: a larger one is waited this long instead. */
const MAX_RETRY_AFTER_MS = 60_000;
const SESSION_EVENT = "iac-code.session.v1";

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || error.message === "Fetch is aborted");
}

/** The caller's invocation id as the request carried it (`forwardedProps.iacCode.rosInvocationId`). */
function requestedInvocationId(input: RunAgentInput): string | undefined {
  const id = (input.forwardedProps as { iacCode?: { rosInvocationId?: unknown } } | undefined)?.iacCode
    ?.rosInvocationId;
  return typeof id === "string" && id ? id : undefined;
}

/** Milliseconds a `Retry-After` value (delay-seconds or an HTTP date) asks to wait, or undefined. */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Math.min(MAX_RETRY_AFTER_MS, Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, at - now));
}

/**
 * The response with a body that ends (instead of failing) when the connection drops.
 *
 * HttpAgent's reader, when its stream fails, cancels the failed body and rethrows the rejection, which
 * is an unhandled rejection (it stops a Node process). A dropped connection is expected here: the
 * stream just ends, the run has no terminal event yet, and the agent reattaches. A user's abort still
 * fails the body, as HttpAgent expects.
 */
function endsCleanlyWhenDropped(response: Response, signal: AbortSignal | null | undefined): Response {
  if (!response.ok || !response.body) return response;
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        if (signal?.aborted) controller.error(error);
        else controller.close();
      }
    },
    cancel(reason) {
      return reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

export class ReattachingHttpAgent extends HttpAgent {
  /** The SSE id of the last event delivered: the bridge numbers a run's events 1, 2, ... */
  lastEventId = 0;
  /** How many times the current run was reattached (for logs and tests). */
  reattachCount = 0;
  private readonly maxReattachAttempts: number;
  private readonly reattachDelayMs: number;
  /** What the last refused answer's Retry-After asked for (runHttpRequest's error keeps only the status). */
  private refusedRetryAfterMs: number | undefined;

  constructor(config: ReattachingHttpAgentConfig) {
    super(config);
    this.maxReattachAttempts = config.maxReattachAttempts ?? 5;
    this.reattachDelayMs = config.reattachDelayMs ?? 250;
    const transport = this.fetch;
    this.fetch = async (url, init) => {
      const response = await transport(url, init);
      this.refusedRetryAfterMs = response.ok ? undefined : retryAfterMs(response.headers.get("Retry-After"));
      return endsCleanlyWhenDropped(response, init.signal);
    };
  }

  run(input: RunAgentInput): Observable<BaseEvent> {
    return this.follow(input, () => super.run(input));
  }

  connectAgent(...args: Parameters<HttpAgent["connectAgent"]>): ReturnType<HttpAgent["connectAgent"]> {
    this.abortController = new AbortController(); // as runAgent does: abortRun() stops this follow only
    return super.connectAgent(...args);
  }

  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    return this.follow(input, () => this.eventsAfter(input, 0, requestedInvocationId(input)));
  }

  clone(): ReattachingHttpAgent {
    const copy = super.clone() as ReattachingHttpAgent;
    Object.assign(copy, {
      maxReattachAttempts: this.maxReattachAttempts,
      reattachDelayMs: this.reattachDelayMs,
      lastEventId: 0,
      reattachCount: 0,
    });
    return copy;
  }

  /** The run's recorded events after `after` and then live ones, until its terminal event. */
  protected eventsAfter(input: RunAgentInput, after: number, rosInvocationId: string | undefined): Observable<BaseEvent> {
    if (!rosInvocationId) throw new Error("reattach needs the run's rosInvocationId (forwardedProps.iacCode)");
    const base = this.url.endsWith("/") ? this.url : `${this.url}/`;
    const path = `extensions/iac-code/v1/threads/${encodeURIComponent(input.threadId)}/runs/${encodeURIComponent(input.runId)}/events`;
    const url = new URL(path, base);
    // The credential goes in a header only: a query string is what proxies and access logs write down.
    const headers: Record<string, string> = {
      ...this.headers,
      Accept: "text/event-stream",
      "Ros-Invocation-Id": rosInvocationId,
    };
    if (after > 0) headers["Last-Event-ID"] = String(after);
    const init: RequestInit = { method: "GET", headers, signal: this.abortController.signal };
    return transformHttpEventStream(runHttpRequest(() => this.fetch(url.toString(), init)), this.debugLogger);
  }

  /** One run for the subscriber, stitched from the first stream and as many reattaches as needed. */
  private follow(input: RunAgentInput, first: () => Observable<BaseEvent>): Observable<BaseEvent> {
    return new Observable<BaseEvent>((subscriber) => {
      let rosInvocationId = requestedInvocationId(input);
      let ended = false;
      let failedAttempts = 0;
      let current: Subscription | undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      this.lastEventId = 0;
      this.reattachCount = 0;

      const deliver = (event: BaseEvent): void => {
        this.lastEventId += 1;
        failedAttempts = 0;
        const custom = event as BaseEvent & { name?: string; value?: { rosInvocationId?: unknown } };
        if (event.type === "CUSTOM" && custom.name === SESSION_EVENT && typeof custom.value?.rosInvocationId === "string") {
          rosInvocationId = custom.value.rosInvocationId; // the id the bridge bound this run to
        }
        if (TERMINAL_TYPES.has(event.type)) ended = true;
        subscriber.next(event);
      };

      const dropped = (error?: unknown): void => {
        const status = (error as { status?: unknown } | undefined)?.status;
        const refused = typeof status === "number";
        const giveUp =
          ended ||
          this.abortController.signal.aborted ||
          isAbort(error) ||
          (refused && !RETRYABLE_STATUSES.has(status)) || // 400, 401, 404, 410, 416: retrying will not change it
          this.lastEventId === 0 || // the run never started: nothing to reattach to
          !rosInvocationId ||
          failedAttempts >= this.maxReattachAttempts;
        if (giveUp) {
          if (ended) subscriber.complete();
          else subscriber.error(error ?? new Error(`run ${input.runId} ended without a terminal event`));
          return;
        }
        const backoff = this.reattachDelayMs * 2 ** failedAttempts;
        const delay = refused ? Math.max(backoff, this.refusedRetryAfterMs ?? 0) : backoff;
        failedAttempts += 1;
        timer = setTimeout(() => {
          if (this.abortController.signal.aborted) return subscriber.error(new DOMException("aborted", "AbortError"));
          this.reattachCount += 1;
          leg(() => this.eventsAfter(input, this.lastEventId, rosInvocationId));
        }, delay);
      };

      const leg = (source: () => Observable<BaseEvent>): void => {
        try {
          current = source().subscribe({
            next: deliver,
            error: (error: unknown) => dropped(error),
            complete: () => (ended ? subscriber.complete() : dropped()),
          });
        } catch (error) {
          dropped(error);
        }
      };

      leg(first);
      return () => {
        if (timer !== undefined) clearTimeout(timer);
        current?.unsubscribe();
      };
    });
  }
}
