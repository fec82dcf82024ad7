"""A minimal A2A 1.0 JSON-RPC upstream that replays an iac-code turn at full speed (bench only).

It speaks the dialect recorded from the real kernel (tests/fixtures/a2a-transcripts/iac-a-text.sse):
a `task` event, SUBMITTED and WORKING status updates carrying `metadata.iac_code.iacCodeSessionId`,
text deltas as WORKING `status.message`s with messageId `<taskId>-message`, a usage update, the final
full-text echo (`<taskId>-2`, `assistantFinal.complete`) and `TASK_STATE_INPUT_REQUIRED` without
`input` (= the turn finished). SSE framing is CRLF, one event per HTTP chunk, compact JSON with `result`
first, exactly like iac-code 0.16.0 (a2a-sdk 1.2.0 + sse-starlette).

It must cost next to nothing so that whatever sits in front of it is the bottleneck:

* every turn body is pre-rendered once per (deltas, id lengths) as the exact chunked bytes, with
  fixed-length placeholders for the task id, context id, session id and JSON-RPC id; a request costs one
  `bytes.replace` per id over the body and one `transport.write`;
* a plain asyncio Protocol HTTP/1.1 server (keep-alive, pipelining, chunked responses), one process.

Scenario, chosen from the user text (all text parts of `params.message`):

| text contains   | turn                                                                       |
|-----------------|----------------------------------------------------------------------------|
| `[DELTAS <n>]`  | n text deltas (1..1,000,000), usage, final, INPUT_REQUIRED                 |
| `[HOLD]`        | task, SUBMITTED, WORKING, then nothing but a `: ping` comment every         |
|                 | `--ping-interval` s until CancelTask (-> CANCELED) or `--hold-max` s        |
| anything else   | `--deltas` text deltas (default 20,000)                                    |

Also: `GetTask`, `CancelTask`, `SubscribeToTask` (held task: snapshot then hold; otherwise the
kernel's `-32001 ... is not active`), unary `SendMessage` (the final Task), `GET /health`,
`GET /.well-known/agent-card.json`, `POST /iac-code/session/ensure-restored` (`current`).
A bearer token (`--token` or `IACCODE_A2A_HTTP_TOKEN`, like the kernel) is checked in constant time;
1.0 methods require `A2A-Version: 1.0` (else `-32009`, HTTP 200, like a2a-sdk).

Run: `python bench/replay_upstream.py --host 127.0.0.1 --port N [--deltas 20000] [--token T]`.
It prints `READY <port>` on stdout once listening and stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import os
import re
import signal
import sys
import time
import uuid
from collections import OrderedDict
from typing import Any

TOKEN_ENV = "IACCODE_A2A_HTTP_TOKEN"
WORDS = ("alpha ", "beta ", "gamma ", "delta ")
TIMESTAMP = "2026-11-29T19:15:41.682130Z"
MAX_DELTAS = 1_000_000
MAX_TASKS = 200_000  # task records kept for GetTask/CancelTask (oldest dropped first)
MAX_REQUEST_BYTES = 16 * 1024 * 1024

# Placeholders: replaced per request by ids of exactly the same length.
_PH = {"task": "T", "ctx": "C", "sess": "S", "rid": "R"}

_DELTAS_RE = re.compile(r"\[deltas\s+(\d+)\s*\]")
_HOLD_RE = re.compile(r"\[hold\]")

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"content-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-store\r\n"
    b"x-accel-buffering: no\r\n"
    b"transfer-encoding: chunked\r\n"
    b"\r\n"
)


def placeholder(kind: str, length: int) -> str:
    """`~T~~~~` of `length` characters: never produced by json.dumps of real content here."""
    return ("~" + _PH[kind] + "~" * length)[:length] if length >= 2 else "~"[:length]


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def sse(obj: dict[str, Any], rid_token: str) -> bytes:
    """One SSE record as the kernel frames it: `data: {"result":...,"id":...,"jsonrpc":"2.0"}` CRLF CRLF."""
    result = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return f'data: {{"result":{result},"id":{rid_token},"jsonrpc":"2.0"}}\r\n\r\n'.encode()


def status_update(
    task: str,
    ctx: str,
    sess: str,
    state: str,
    *,
    message: dict[str, Any] | None = None,
    timestamp: bool = False,
    extra_iac: dict[str, Any] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if message is not None:
        status["message"] = message
    if timestamp:
        status["timestamp"] = TIMESTAMP
    iac: dict[str, Any] = dict(extra_iac or {})
    iac["iacCodeSessionId"] = sess
    return {"statusUpdate": {"taskId": task, "contextId": ctx, "status": status, "metadata": {"iac_code": iac}}}


def agent_message(message_id: str, task: str, ctx: str, text: str) -> dict[str, Any]:
    return {"messageId": message_id, "contextId": ctx, "taskId": task, "role": "ROLE_AGENT", "parts": [{"text": text}]}


def task_event(task: str, ctx: str, user_text: str = "bench") -> dict[str, Any]:
    return {
        "task": {
            "id": task,
            "contextId": ctx,
            "status": {"state": "TASK_STATE_SUBMITTED"},
            "history": [
                {
                    "messageId": "bench-user-message",
                    "contextId": ctx,
                    "taskId": task,
                    "role": "ROLE_USER",
                    "parts": [{"text": user_text}],
                    "metadata": {"iac_code": {"cwd": "/workspace/session-1"}},
                }
            ],
        }
    }


def preamble_events(task: str, ctx: str, sess: str) -> list[dict[str, Any]]:
    return [
        task_event(task, ctx),
        status_update(task, ctx, sess, "TASK_STATE_SUBMITTED", timestamp=True),
        status_update(task, ctx, sess, "TASK_STATE_WORKING", timestamp=True),
    ]


def turn_events(deltas: int, task: str, ctx: str, sess: str) -> list[dict[str, Any]]:
    events = preamble_events(task, ctx, sess)
    msg_id = task + "-message"
    texts = []
    for i in range(deltas):
        text = WORDS[i % len(WORDS)]
        texts.append(text)
        events.append(
            status_update(task, ctx, sess, "TASK_STATE_WORKING", message=agent_message(msg_id, task, ctx, text))
        )
    usage = {
        "model": "other",
        "cachedInputTokens": 0.0,
        "outputTokens": float(deltas),
        "inputTokens": 100.0,
        "provider": "openai",
        "totalTokens": float(deltas + 100),
    }
    events.append(status_update(task, ctx, sess, "TASK_STATE_WORKING", extra_iac={"usage": usage}))
    events.append(
        status_update(
            task,
            ctx,
            sess,
            "TASK_STATE_WORKING",
            timestamp=True,
            message=agent_message(task + "-2", task, ctx, "".join(texts)),
            extra_iac={"assistantFinal": {"complete": True}},
        )
    )
    events.append(status_update(task, ctx, sess, "TASK_STATE_INPUT_REQUIRED", timestamp=True))
    return events


class Template:
    """Pre-rendered chunked bytes with placeholders of fixed lengths."""

    def __init__(
        self, events: list[dict[str, Any]], lengths: tuple[int, int, int, int], *, head: bytes, terminate: bool
    ) -> None:
        self.lengths = lengths
        self.ph = {k: placeholder(k, n).encode() for k, n in zip(("task", "ctx", "sess", "rid"), lengths, strict=True)}
        rid_token = placeholder("rid", lengths[3])
        body = b"".join(chunk(sse(e, rid_token)) for e in events)
        self.bytes = head + body + (b"0\r\n\r\n" if terminate else b"")
        self.events = len(events)

    def render(self, task: bytes, ctx: bytes, sess: bytes, rid: bytes) -> bytes:
        out = self.bytes
        for key, value in (("task", task), ("ctx", ctx), ("sess", sess), ("rid", rid)):
            out = out.replace(self.ph[key], value)
        return out


class Renderer:
    def __init__(self) -> None:
        self._cache: dict[tuple[str, int, tuple[int, int, int, int]], Template] = {}

    def get(self, kind: str, deltas: int, lengths: tuple[int, int, int, int]) -> Template:
        key = (kind, deltas, lengths)
        tpl = self._cache.get(key)
        if tpl is None:
            task, ctx, sess, _rid = (
                placeholder(k, n) for k, n in zip(("task", "ctx", "sess", "rid"), lengths, strict=True)
            )
            if kind == "turn":
                tpl = Template(turn_events(deltas, task, ctx, sess), lengths, head=SSE_HEAD, terminate=True)
            else:  # "hold": the preamble only; the connection stays open
                tpl = Template(preamble_events(task, ctx, sess), lengths, head=SSE_HEAD, terminate=False)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = tpl
        return tpl


def json_response(obj: Any, status: str = "200 OK", keep_alive: bool = True) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return (
        b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n"
        % (status.encode(), len(body), b"" if keep_alive else b"connection: close\r\n")
    ) + body


def rpc_error(code: int, message: str, rid: Any, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"error": err, "id": rid, "jsonrpc": "2.0"}


class Upstream:
    def __init__(self, *, token: str | None, deltas: int, ping_interval: float, hold_max: float) -> None:
        self.token = token
        self.deltas = deltas
        self.ping_interval = ping_interval
        self.hold_max = hold_max
        self.renderer = Renderer()
        self.tasks: OrderedDict[str, dict[str, Any]] = OrderedDict()  # id -> {ctx, sess, state}
        self.sessions: dict[str, str] = {}  # contextId -> iacCodeSessionId
        self.held: dict[str, set[Connection]] = {}  # taskId -> connections holding it open
        self.stats = {"requests": 0, "streams": 0, "held_now": 0, "held_max": 0, "cancels": 0}

    # ---- task records ----------------------------------------------------------------------------

    def new_task(self, ctx: str) -> tuple[str, str]:
        task = str(uuid.uuid4())
        sess = self.sessions.get(ctx)
        if sess is None:
            if len(self.sessions) > MAX_TASKS:
                self.sessions.clear()
            sess = self.sessions[ctx] = str(uuid.uuid4())
        self.tasks[task] = {"ctx": ctx, "sess": sess, "state": "TASK_STATE_WORKING"}
        if len(self.tasks) > MAX_TASKS:
            self.tasks.popitem(last=False)
        return task, sess

    def task_json(self, task_id: str) -> dict[str, Any]:
        rec = self.tasks[task_id]
        status: dict[str, Any] = {"state": rec["state"], "timestamp": TIMESTAMP}
        if rec["state"] == "TASK_STATE_CANCELED":
            status["message"] = agent_message(task_id + "-5", task_id, rec["ctx"], "Task canceled.")
        return {
            "id": task_id,
            "contextId": rec["ctx"],
            "status": status,
            "metadata": {"iac_code": {"iacCodeSessionId": rec["sess"]}},
        }

    # ---- dispatch ----------------------------------------------------------------------------------

    def authorised(self, headers: dict[str, str]) -> bool:
        if not self.token:
            return True
        scheme, _, value = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.encode(), self.token.encode())

    def handle(self, conn: Connection, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.stats["requests"] += 1
        keep = headers.get("connection", "").lower() != "close"
        if method == "GET" and path == "/health":
            conn.send(json_response({"status": "ok"}, keep_alive=keep), close=not keep)
            return
        if not self.authorised(headers):
            conn.send(json_response({"error": "unauthorized"}, "401 Unauthorized", keep_alive=keep), close=not keep)
            return
        if method == "GET" and path.startswith("/.well-known/agent-card.json"):
            conn.send(json_response(self.agent_card(conn.base_url()), keep_alive=keep), close=not keep)
            return
        if method != "POST":
            conn.send(json_response({"error": "not found"}, "404 Not Found", keep_alive=keep), close=not keep)
            return
        if path.rstrip("/").endswith("/iac-code/session/ensure-restored"):
            conn.send(json_response({"status": "current"}, keep_alive=keep), close=not keep)
            return
        try:
            req = json.loads(body)
        except ValueError:
            conn.send(json_response(rpc_error(-32700, "Parse error", None), keep_alive=keep), close=not keep)
            return
        rid = req.get("id") if isinstance(req, dict) else None
        rpc = req.get("method") if isinstance(req, dict) else None
        params = req.get("params") if isinstance(req, dict) and isinstance(req.get("params"), dict) else {}
        if headers.get("a2a-version", "").strip() != "1.0":
            version = headers.get("a2a-version", "0.3") or "0.3"
            conn.send(
                json_response(
                    rpc_error(
                        -32009,
                        f"A2A version '{version}' is not supported by this handler. Expected version '1.0'.",
                        rid,
                    ),
                    keep_alive=keep,
                ),
                close=not keep,
            )
            return
        if rpc == "SendStreamingMessage":
            self.stream_turn(conn, rid, params, keep)
        elif rpc == "SendMessage":
            task_id, _ = self.new_task(self.context_of(params))
            self.tasks[task_id]["state"] = "TASK_STATE_INPUT_REQUIRED"
            conn.send(
                json_response(
                    {"result": {"task": self.task_json(task_id)}, "id": rid, "jsonrpc": "2.0"}, keep_alive=keep
                ),
                close=not keep,
            )
        elif rpc in ("GetTask", "CancelTask", "SubscribeToTask"):
            task_id = params.get("id")
            if not isinstance(task_id, str) or task_id not in self.tasks:
                conn.send(
                    json_response(
                        rpc_error(-32001, "Task not found", rid, [{"reason": "TASK_NOT_FOUND"}]), keep_alive=keep
                    ),
                    close=not keep,
                )
                return
            if rpc == "GetTask":
                conn.send(
                    json_response({"result": self.task_json(task_id), "id": rid, "jsonrpc": "2.0"}, keep_alive=keep),
                    close=not keep,
                )
            elif rpc == "CancelTask":
                self.cancel(task_id)
                conn.send(
                    json_response({"result": self.task_json(task_id), "id": rid, "jsonrpc": "2.0"}, keep_alive=keep),
                    close=not keep,
                )
            else:
                self.subscribe(conn, rid, task_id, keep)
        else:
            conn.send(json_response(rpc_error(-32601, "Method not found", rid), keep_alive=keep), close=not keep)

    @staticmethod
    def context_of(params: dict[str, Any]) -> str:
        message = params.get("message")
        ctx = message.get("contextId") if isinstance(message, dict) else None
        return ctx if isinstance(ctx, str) and ctx else str(uuid.uuid4())

    @staticmethod
    def text_of(params: dict[str, Any]) -> str:
        message = params.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            return ""
        return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))

    def stream_turn(self, conn: Connection, rid: Any, params: dict[str, Any], keep: bool) -> None:
        ctx = self.context_of(params)
        task, sess = self.new_task(ctx)
        text = self.text_of(params).lower()
        rid_token = json.dumps(rid, separators=(",", ":"))
        lengths = (len(task), len(ctx.encode()), len(sess), len(rid_token.encode()))
        ids = (task.encode(), ctx.encode(), sess.encode(), rid_token.encode())
        self.stats["streams"] += 1
        if _HOLD_RE.search(text):
            tpl = self.renderer.get("hold", 0, lengths)
            conn.send(tpl.render(*ids))
            conn.hold(task, rid_token)
            self.add_held(task, conn)
            return
        match = _DELTAS_RE.search(text)
        deltas = min(max(int(match.group(1)), 1), MAX_DELTAS) if match else self.deltas
        tpl = self.renderer.get("turn", deltas, lengths)
        self.tasks[task]["state"] = "TASK_STATE_INPUT_REQUIRED"
        conn.send(tpl.render(*ids), close=not keep)

    def subscribe(self, conn: Connection, rid: Any, task_id: str, keep: bool) -> None:
        if task_id not in self.held:
            conn.send(
                json_response(
                    rpc_error(-32001, f"Task {task_id} is not active", rid, [{"reason": "TASK_NOT_FOUND"}]),
                    keep_alive=keep,
                ),
                close=not keep,
            )
            return
        rid_token = json.dumps(rid, separators=(",", ":"))
        snap = self.task_json(task_id)
        conn.send(SSE_HEAD + chunk(sse({"task": snap}, rid_token)))
        conn.hold(task_id, rid_token)
        self.add_held(task_id, conn)

    def cancel(self, task_id: str) -> None:
        self.stats["cancels"] += 1
        rec = self.tasks[task_id]
        if rec["state"] in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"):
            rec["state"] = "TASK_STATE_CANCELED"
        for conn in list(self.held.get(task_id, ())):
            self.unhold(conn)
            payload = status_update(
                task_id,
                rec["ctx"],
                rec["sess"],
                "TASK_STATE_CANCELED",
                timestamp=True,
                message=agent_message(task_id + "-5", task_id, rec["ctx"], "Task canceled."),
            )
            conn.release(chunk(sse(payload, conn.held_rid or "null")) + b"0\r\n\r\n")

    def add_held(self, task: str, conn: Connection) -> None:
        self.held.setdefault(task, set()).add(conn)
        self.stats["held_now"] += 1
        self.stats["held_max"] = max(self.stats["held_max"], self.stats["held_now"])

    def unhold(self, conn: Connection) -> None:
        if conn.held_task is not None:
            conns = self.held.get(conn.held_task)
            if conns is not None and conn in conns:
                conns.discard(conn)
                self.stats["held_now"] -= 1
                if not conns:
                    del self.held[conn.held_task]

    def agent_card(self, url: str) -> dict[str, Any]:
        return {
            "name": "bench-replay",
            "description": "Replays a recorded iac-code turn at full speed (agui-bridge bench).",
            "version": "0.16.0",
            "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }

    async def pinger(self) -> None:
        while True:
            await asyncio.sleep(self.ping_interval)
            frame = chunk(f": ping - {time.strftime('%Y-%m-%d %H:%M:%S')}\r\n\r\n".encode())
            now = time.monotonic()
            for conns in list(self.held.values()):
                for conn in list(conns):
                    if self.hold_max and now - conn.held_since > self.hold_max:
                        self.end_hold(conn)
                    else:
                        conn.write_raw(frame)

    def end_hold(self, conn: Connection) -> None:
        """Safety stop: a held turn ends by itself after --hold-max seconds (finished turn)."""
        task = conn.held_task
        if task is None or task not in self.tasks:
            return
        rec = self.tasks[task]
        rec["state"] = "TASK_STATE_INPUT_REQUIRED"
        self.unhold(conn)
        payload = status_update(task, rec["ctx"], rec["sess"], "TASK_STATE_INPUT_REQUIRED", timestamp=True)
        conn.release(chunk(sse(payload, conn.held_rid or "null")) + b"0\r\n\r\n")


class Connection(asyncio.Protocol):
    def __init__(self, app: Upstream) -> None:
        self.app = app
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.held_task: str | None = None
        self.held_rid: str | None = None
        self.held_since = 0.0
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def base_url(self) -> str:
        host, port = self.transport.get_extra_info("sockname")[:2]  # type: ignore[union-attr]
        return f"http://{host}:{port}/"

    def connection_lost(self, exc: Exception | None) -> None:
        self.app.unhold(self)
        self.transport = None

    def send(self, data: bytes, close: bool = False) -> None:
        if self.transport is not None:
            self.transport.write(data)
            if close:
                self.closing = True
                self.transport.close()

    def write_raw(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def hold(self, task: str, rid_token: str) -> None:
        self.held_task, self.held_rid, self.held_since = task, rid_token, time.monotonic()

    def release(self, tail: bytes) -> None:
        self.held_task = None
        self.write_raw(tail)
        self.data_received(b"")  # a pipelined request may be waiting

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while self.held_task is None and not self.closing:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.send(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n", close=True)
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            try:
                method, path, _version = head[0].split(" ", 2)
            except ValueError:
                self.send(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n", close=True)
                return
            headers: dict[str, str] = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                body_start = end + 4
                decoded = self._dechunk(body_start)
                if decoded is None:
                    return
                body, consumed = decoded
                self.buf = self.buf[consumed:]
            else:
                length = int(headers.get("content-length", "0") or 0)
                if length > MAX_REQUEST_BYTES:
                    self.send(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n", close=True)
                    return
                if len(self.buf) < end + 4 + length:
                    return
                body = self.buf[end + 4 : end + 4 + length]
                self.buf = self.buf[end + 4 + length :]
            self.app.handle(self, method, path, headers, body)

    def _dechunk(self, pos: int) -> tuple[bytes, int] | None:
        out = []
        buf = self.buf
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(buf[pos:line_end].split(b";")[0] or b"0", 16)
            if size == 0:
                trailer_end = buf.find(b"\r\n", line_end + 2)
                if trailer_end < 0:
                    return None
                return b"".join(out), trailer_end + 2
            if len(buf) < line_end + 2 + size + 2:
                return None
            out.append(buf[line_end + 2 : line_end + 2 + size])
            pos = line_end + 2 + size + 2


async def serve(args: argparse.Namespace) -> None:
    app = Upstream(
        token=args.token or os.environ.get(TOKEN_ENV) or None,
        deltas=args.deltas,
        ping_interval=args.ping_interval,
        hold_max=args.hold_max,
    )
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Connection(app), args.host, args.port, backlog=args.backlog, reuse_address=True
    )
    port = server.sockets[0].getsockname()[1]
    # warm the default template for the bridge's id lengths (uuid task, agui-<40 hex> context, uuid rid)
    app.renderer.get("turn", args.deltas, (36, 45, 36, 38))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pinger = asyncio.create_task(app.pinger())
    print(f"READY {port}", flush=True)
    if args.stats_file:

        async def dump_stats() -> None:
            while True:
                await asyncio.sleep(0.5)
                tmp = args.stats_file + ".tmp"
                with open(tmp, "w") as fh:
                    json.dump(app.stats, fh)
                os.replace(tmp, args.stats_file)

        stats_task = asyncio.create_task(dump_stats())
    await stop.wait()
    pinger.cancel()
    if args.stats_file:
        stats_task.cancel()
    server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--deltas", type=int, default=20_000, help="text deltas of the default turn")
    parser.add_argument("--token", default=None, help=f"bearer token (default: ${TOKEN_ENV})")
    parser.add_argument("--ping-interval", type=float, default=15.0, help="`: ping` period on held turns (s)")
    parser.add_argument("--hold-max", type=float, default=600.0, help="a held turn ends by itself after this (s)")
    parser.add_argument("--backlog", type=int, default=8192)
    parser.add_argument("--stats-file", default=None, help="write request/stream counters here every 0.5 s")
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("loopback only")
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
