"""Reattach cannot stall a gunicorn gevent worker or fill its memory (docs/design.md#reattach).

One worker, a 64 MiB record on disk (written directly in the record format), 20 concurrent refusals
(wrong rosInvocationId, malformed cursor, cursor past the end) and 10 reattach clients that never read:
`/health` keeps answering, the worker is never killed, its RSS stays bounded, and the clients that never
read are dropped after `--client-write-timeout`. Only generous liveness deadlines; speed is in bench/.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from agui_bridge.reattach.format import record_paths
from tests.support.harness import BridgeServer, bridge_server
from tests.support.synthetic_record import write_synthetic_record

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "invocation-1"
THREAD, RUN = "big-thread", "big-run"
RECORD_BYTES = 64 << 20
WRITE_TIMEOUT_S = 2
#: Liveness only: a worker stalled for seconds misses none of these, a worker stalled for good misses all.
HEALTH_DEADLINE_S = 10.0
RSS_GROWTH_BOUND = 64 << 20


def worker_pids(server: BridgeServer) -> list[int]:
    pids = []
    for pid in server.child_pids():
        with contextlib.suppress(OSError):
            if b"agui_bridge.demo" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
    return pids


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def refusal(server: BridgeServer, kind: str, last: int) -> int:
    url = server.url.rstrip("/") + EVENTS.format(THREAD, RUN)
    params = {"rosInvocationId": ROS}
    if kind == "wrong-ros":
        params["rosInvocationId"] = "somebody-else"
    elif kind == "bad-cursor":
        params["after"] = "not-a-number"
    else:
        params["after"] = str(last + 1)
    return requests.get(url, params=params, timeout=120).status_code


def status_line(sock: socket.socket) -> bytes:
    """The response's first line only: the rest stays unread, filling the socket's buffers."""
    sock.settimeout(HEALTH_DEADLINE_S)
    received = b""
    while b"\r\n" not in received and len(received) < 256:
        chunk = sock.recv(256 - len(received))
        if not chunk:
            break
        received += chunk
    return received.split(b"\r\n", 1)[0]


@contextlib.contextmanager
def clients_that_never_read(server: BridgeServer, count: int) -> Iterator[list[socket.socket]]:
    path = EVENTS.format(THREAD, RUN) + f"?rosInvocationId={ROS}"
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            sockets.append(sock)
        for sock in sockets:
            assert status_line(sock) == b"HTTP/1.1 200 OK", "a client that never reads was not attached"
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def test_refusals_and_clients_that_never_read_leave_the_worker_answering_with_bounded_memory(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    state = tmp_path / "state"
    last = write_synthetic_record(state, THREAD, RUN, ROS, size_bytes=RECORD_BYTES)
    readers_dir = record_paths(state, THREAD, RUN)[2]
    with bridge_server(
        demo_url, demo_token, state, tmp_path, workers=1, client_write_timeout=WRITE_TIMEOUT_S, reattach_window=5
    ) as server:
        (worker,) = worker_pids(server)
        requests.get(server.url + "health", timeout=HEALTH_DEADLINE_S)
        baseline = rss_bytes(worker)
        peak = baseline
        health_codes: list[int] = []
        done = threading.Event()

        def watch_health() -> None:
            nonlocal peak
            while not done.is_set():
                health_codes.append(requests.get(server.url + "health", timeout=HEALTH_DEADLINE_S).status_code)
                peak = max(peak, rss_bytes(worker))
                done.wait(0.05)

        kinds = ["wrong-ros", "bad-cursor", "past-the-end"] * 7
        with ThreadPoolExecutor(max_workers=21) as pool:
            health = pool.submit(watch_health)
            with clients_that_never_read(server, 10):
                attached = list(readers_dir.iterdir()) if readers_dir.exists() else []  # made before any byte
                refusals = list(pool.map(lambda kind: refusal(server, kind, last), kinds[:20]))
                deadline = time.monotonic() + WRITE_TIMEOUT_S * 10 + 30
                while time.monotonic() < deadline and readers_dir.exists() and any(readers_dir.iterdir()):
                    time.sleep(0.2)
                followers_left = list(readers_dir.iterdir()) if readers_dir.exists() else []
            done.set()
            health.result()
        assert len(attached) == 10, f"{len(attached)} of the 10 clients that never read were following"
        assert sorted(set(refusals)) == [400, 404, 416], refusals
        assert followers_left == [], "clients that never read were not dropped after the write deadline"
        assert health_codes and set(health_codes) == {200}
        assert worker_pids(server) == [worker], "the worker was killed"
        assert peak - baseline < RSS_GROWTH_BOUND, f"worker RSS grew by {(peak - baseline) >> 20} MiB"
