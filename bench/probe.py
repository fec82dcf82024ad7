"""`GET /health` prober for the idle-stream benchmark, in its own process (bench only).

Every `--interval` seconds: open a new TCP connection, send `GET /health`, read the whole answer,
close; record (monotonic start time, latency s or null, status). A probe that fails or takes longer
than `--timeout` counts as a failure. Stops by itself after `--duration` seconds or on SIGTERM, then
writes JSON to `--out`. Times are CLOCK_MONOTONIC, comparable with the orchestrator's.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time


def probe(port: int, timeout: float) -> tuple[float | None, int]:
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        status = int(data[9:12]) if data.startswith(b"HTTP/1.") else 0
        return time.monotonic() - start, status
    except (OSError, ValueError):
        return None, 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    samples: list[tuple[float, float | None, int]] = []
    end = time.monotonic() + args.duration
    next_at = time.monotonic()
    while not stop and time.monotonic() < end:
        t0 = time.monotonic()
        latency, status = probe(args.port, args.timeout)
        samples.append((t0, latency, status))
        next_at += args.interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_at = time.monotonic()
    with open(args.out, "w") as fh:
        json.dump({"samples": samples}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
