"""CPU per A2A event of reading one long turn from the replay upstream, by reader (bench only).

Why it exists: the kernel sends one SSE record per HTTP chunk, and the bridge wants one batch of events
per network read (docs/design.md#a2a-stream-batches) without touching private attributes of requests or
urllib3. This case compares the readers that could do it, each parsing SSE and decoding every event
exactly as the bridge does, in this process (the upstream is another process):

* `client`: `A2AClient.open_stream(...).batches()`, whatever the client does today;
* `urllib3_read1`: urllib3's public API only: `urlopen(preload_content=False)`, then `read1(8 KiB)` until
  the body ends (http.client's `read1` returns at most one chunk, so one event per call);
* `urllib3_stream`: urllib3's `stream(None)` (`read_chunked`: one chunk per iteration);
* `h11`: h11 parsing each `recv(8 KiB)` of a plain socket, all the `Data` of one recv as one batch;
* `httptools`: the same with httptools (llhttp, C), its `on_body` pieces of one recv as one batch.

Prints one JSON line per reader: CPU per event (median of reps), events, batches.

With `--short-turns N`, also the client's CPU per streaming call of a 0-delta turn (open, read, close),
N calls on one client: what a call costs besides its events.

Usage: python bench/kernel_read.py [--deltas 20000] [--reps 5] [--readers client,urllib3_read1,h11] [--short-turns 300]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h11
import httptools
import urllib3

from agui_bridge.a2a.signals import A2AEvent, decode_message
from agui_bridge.kernel.client import A2AClient
from agui_bridge.protocol.sse_parser import SseParser

BENCH_DIR = Path(__file__).resolve().parent
READ_SIZE = 8192


def params(deltas: int) -> dict[str, Any]:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": f"[DELTAS {deltas}]"}],
        "contextId": f"bench-{uuid.uuid4().hex}",
    }
    return {"message": message, "configuration": {"acceptedOutputModes": ["text/plain"]}}


def envelope(deltas: int) -> bytes:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "SendStreamingMessage", "params": params(deltas)}
    return json.dumps(body).encode()


HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json", "Accept-Encoding": "identity"}


def decode(parser: SseParser, reads: Iterator[bytes]) -> Iterator[list[A2AEvent]]:
    for data in reads:
        messages = parser.feed(data)
        if messages:
            yield [decode_message(m) for m in messages]


def read_client(port: int, deltas: int) -> Iterator[list[A2AEvent]]:
    client = A2AClient(f"http://127.0.0.1:{port}/", None)
    stream = client.open_stream("SendStreamingMessage", params(deltas))
    try:
        yield from stream.batches()
    finally:
        stream.close()
        client.close()


def read_urllib3(port: int, deltas: int, *, read1: bool) -> Iterator[list[A2AEvent]]:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1)
    raw = pool.urlopen(
        "POST", "/", body=envelope(deltas), headers=HEADERS, retries=False, preload_content=False,
        decode_content=False,
    )  # fmt: skip

    def reads() -> Iterator[bytes]:
        if not read1:
            yield from raw.stream(None, decode_content=False)
            return
        while True:
            data = raw.read1(READ_SIZE)
            if not data:
                return
            yield data

    try:
        yield from decode(SseParser(), reads())
    finally:
        raw.release_conn()
        pool.close()


def read_h11(port: int, deltas: int) -> Iterator[list[A2AEvent]]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn = h11.Connection(h11.CLIENT)
    body = envelope(deltas)
    head = [("Host", f"127.0.0.1:{port}"), ("Content-Length", str(len(body))), *HEADERS.items()]
    sock.sendall(conn.send(h11.Request(method="POST", target="/", headers=head)) + conn.send(h11.Data(data=body)))
    sock.sendall(conn.send(h11.EndOfMessage()))

    def reads() -> Iterator[bytes]:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(READ_SIZE))
                continue
            if isinstance(event, h11.Response):
                continue
            if isinstance(event, h11.Data):
                parts = [bytes(event.data)]
                while True:
                    more = conn.next_event()
                    if isinstance(more, h11.Data):
                        parts.append(bytes(more.data))
                    else:
                        break
                yield b"".join(parts)
                if more is h11.NEED_DATA:
                    continue
                event = more
            if isinstance(event, h11.EndOfMessage):
                return

    try:
        yield from decode(SseParser(), reads())
    finally:
        sock.close()


class _Body:
    """httptools' callbacks: the body pieces of the current feed, and whether the message ended."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done = False

    def on_body(self, data: bytes) -> None:
        self.parts.append(data)

    def on_message_complete(self) -> None:
        self.done = True


def read_httptools(port: int, deltas: int) -> Iterator[list[A2AEvent]]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    body = envelope(deltas)
    head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    sock.sendall(
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body
    )
    sink = _Body()
    parser = httptools.HttpResponseParser(sink)

    def reads() -> Iterator[bytes]:
        while not sink.done:
            data = sock.recv(READ_SIZE)
            if not data:
                raise ConnectionError("ended")
            parser.feed_data(data)
            if sink.parts:
                parts = sink.parts
                sink.parts = []
                yield parts[0] if len(parts) == 1 else b"".join(parts)

    try:
        yield from decode(SseParser(), reads())
    finally:
        sock.close()


READERS: dict[str, Callable[[int, int], Iterator[list[A2AEvent]]]] = {
    "client": read_client,
    "urllib3_read1": lambda port, deltas: read_urllib3(port, deltas, read1=True),
    "urllib3_stream": lambda port, deltas: read_urllib3(port, deltas, read1=False),
    "h11": read_h11,
    "httptools": read_httptools,
}


def measure(reader: Callable[[int, int], Iterator[list[A2AEvent]]], port: int, deltas: int) -> dict[str, float]:
    cpu0 = time.process_time()
    events = batches = 0
    for batch in reader(port, deltas):
        batches += 1
        events += len(batch)
    cpu = time.process_time() - cpu0
    return {"cpu_us_per_event": cpu / events * 1e6, "events": events, "batches": batches}


def short_turns(port: int, count: int) -> dict[str, float]:
    """CPU per streaming call of a 0-delta turn (open, read to the end, close) on one kept-alive client."""
    client = A2AClient(f"http://127.0.0.1:{port}/", None)
    try:
        cpu0 = time.process_time()
        for _ in range(count):
            stream = client.open_stream("SendStreamingMessage", params(0))
            for _batch in stream.batches():
                pass
            stream.close()
        return {"cpu_us_per_call": round((time.process_time() - cpu0) / count * 1e6, 1), "calls": count}
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--short-turns", type=int, default=0, help="also: CPU per call of N 0-delta turns (client)")
    args = parser.parse_args()
    upstream = subprocess.Popen(
        [sys.executable, str(BENCH_DIR / "replay_upstream.py"), "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert upstream.stdout is not None
        line = upstream.stdout.readline()
        port = int(line.split()[1])
        names = args.readers.split(",")
        results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for rep in range(args.reps + 1):  # rep 0 warms up; readers alternate within a rep
            for name in names:
                result = measure(READERS[name], port, args.deltas)
                if rep:
                    results[name].append(result)
        for name in names:
            reps = results[name]
            print(json.dumps({
                "reader": name, "cpu_us_per_event": round(statistics.median(r["cpu_us_per_event"] for r in reps), 2),
                "min": round(min(r["cpu_us_per_event"] for r in reps), 2),
                "max": round(max(r["cpu_us_per_event"] for r in reps), 2),
                "events": reps[0]["events"], "batches": reps[0]["batches"],
            }))  # fmt: skip
        if args.short_turns:
            short_turns(port, 20)  # warm-up
            print(json.dumps({"reader": "client", "short_turns": short_turns(port, args.short_turns)}))
    finally:
        os.kill(upstream.pid, signal.SIGTERM)
        upstream.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
