"""A cheap asyncio load client for AG-UI (and raw A2A) SSE streams over HTTP/1.1 (bench only).

Raw sockets through asyncio streams (uvloop when installed), no HTTP library: a request is a
pre-built byte string, the response is de-chunked and read by the repository's one SSE reader
(`agui_bridge.protocol.sse_parser`, of this checkout) one network read at a time, and a record is only
looked at as far as needed (comment vs data, the `"type":"..."` near its start, or the A2A task state).
Times are `time.monotonic()` (CLOCK_MONOTONIC, comparable across processes).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the reader of this checkout, not the measured one

from agui_bridge.protocol.sse_parser import SseComment, SseItem, SseParser

now = time.monotonic

AGUI_TERMINALS = (b"RUN_FINISHED", b"RUN_ERROR")
A2A_ENDING = (b"INPUT_REQUIRED", b"COMPLETED", b"FAILED", b"CANCELED", b"REJECTED", b"AUTH_REQUIRED")


def agui_body(thread_id: str, run_id: str, text: str, cwd: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": [{"id": f"message-{run_id}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "bench-invocation", "cwd": cwd}},
    }


def agui_request(port: int, text: str, cwd: str, *, thread_id: str | None = None, run_id: str | None = None) -> bytes:
    body = json.dumps(agui_body(thread_id or str(uuid.uuid4()), run_id or str(uuid.uuid4()), text, cwd)).encode()
    return (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (port, len(body))
    ) + body


def a2a_request(port: int, token: str | None, text: str, *, context_id: str | None = None) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": "SendStreamingMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                    "contextId": context_id or f"bench-{uuid.uuid4().hex}",
                    "metadata": {"iac_code": {"cwd": "/workspace/session-1"}},
                },
                "configuration": {"acceptedOutputModes": ["text/plain"]},
            },
        }
    ).encode()
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    return (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
        b"%sAccept: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (port, auth, len(body))
    ) + body


@dataclass
class StreamRecord:
    t_start: float = 0.0
    t_headers: float | None = None
    t_first: float | None = None  # first data frame
    t_run_started: float | None = None
    t_end: float | None = None  # terminal frame (or A2A ending state)
    t_last: float = 0.0
    status: int | None = None
    events: int = 0
    heartbeats: int = 0
    hb: list[tuple[float, float]] = field(default_factory=list)  # (arrival, gap before it - interval)
    terminal: str | None = None
    error: str | None = None
    body: bytes = b""
    bytes_in: int = 0


def _dechunk(buf: bytes) -> tuple[bytes, bytes, bool]:
    out: list[bytes] = []
    pos = 0
    size_buf = len(buf)
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            break
        size = int(buf[pos:line_end].split(b";", 1)[0] or b"0", 16)
        if size == 0:
            return b"".join(out), b"", True
        end = line_end + 2 + size
        if end + 2 > size_buf:
            break
        out.append(buf[line_end + 2 : end])
        pos = end + 2
    return b"".join(out), buf[pos:], False


async def sse_stream(
    port: int,
    request: bytes,
    rec: StreamRecord | None = None,
    *,
    a2a: bool = False,
    hb_interval: float = 0.0,
    host: str = "127.0.0.1",
) -> StreamRecord:
    """POST `request`, read the SSE response until its terminal frame (or EOF / cancellation)."""
    rec = rec or StreamRecord()
    rec.t_start = now()
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    except OSError as exc:
        rec.error = f"connect: {exc.__class__.__name__}: {exc}"
        return rec
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        rec.t_headers = now()
        rec.status = int(head[9:12])
        lower = head.lower()
        if rec.status != 200 or b"text/event-stream" not in lower:
            length = 0
            for line in lower.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            rec.body = await reader.readexactly(length) if length else b""
            rec.error = f"HTTP {rec.status}"
            rec.t_end = now()
            return rec
        chunked = b"transfer-encoding: chunked" in lower
        parser = SseParser()
        raw = b""
        while True:
            chunk = await reader.read(262144)
            if not chunk:
                if rec.terminal is None and rec.error is None:
                    rec.error = "eof before terminal"
                break
            t = now()
            rec.bytes_in += len(chunk)
            done = False
            if chunked:
                payload, raw, done = _dechunk(raw + chunk if raw else chunk)
            else:
                payload = chunk
            for item in parser.feed_records(payload):
                if _record(rec, item, t, a2a, hb_interval):
                    return rec
            if done:
                if rec.terminal is None:
                    rec.error = rec.error or "stream ended before terminal"
                break
    except asyncio.CancelledError:
        raise
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        rec.error = f"{exc.__class__.__name__}: {exc}"[:200]
    finally:
        writer.close()
    rec.t_end = rec.t_end or now()
    return rec


def _record(rec: StreamRecord, item: SseItem, t: float, a2a: bool, hb_interval: float) -> bool:
    """Account one SSE record or comment; True when the stream reached its terminal record."""
    if isinstance(item, SseComment):
        rec.heartbeats += 1
        if hb_interval and rec.t_last:
            rec.hb.append((t, t - rec.t_last - hb_interval))
        rec.t_last = t
        return False
    data = item.data
    rec.events += 1
    rec.t_last = t
    if rec.t_first is None:
        rec.t_first = t
    if a2a:
        i = data.find(b'"state":"TASK_STATE_')
        if i >= 0:
            state = data[i + 20 : data.find(b'"', i + 20)]
            if state in A2A_ENDING:
                rec.terminal = state.decode()
                rec.t_end = t
                return True
        return False
    i = data.find(b'"type":"', 0, 64)
    if i < 0:
        return False
    kind = data[i + 8 : data.find(b'"', i + 8)]
    if kind == b"RUN_STARTED":
        rec.t_run_started = t
    elif kind in AGUI_TERMINALS:
        rec.terminal = kind.decode()
        rec.t_end = t
        if kind == b"RUN_ERROR":
            rec.body = data[:400]
        return True
    return False


async def sequential_turns(
    port: int, make_request: Callable[[], bytes], turns: int, *, a2a: bool = False
) -> list[StreamRecord]:
    return [await sse_stream(port, make_request(), a2a=a2a) for _ in range(turns)]


async def concurrent_turns(
    port: int, make_request: Callable[[], bytes], clients: int, turns: int, *, a2a: bool = False
) -> list[StreamRecord]:
    results = await asyncio.gather(*(sequential_turns(port, make_request, turns, a2a=a2a) for _ in range(clients)))
    return [rec for recs in results for rec in recs]


def install_uvloop() -> str:
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return "asyncio"
    uvloop.install()
    return "uvloop"
