"""Hostile reattach benchmark: short, for a shared machine. Run by hand, never by the test suite.

    bash bench/run --reattach-hostile [--workers 1] [--duration 15] [--out bench/results]

With a 64 MiB run record on disk (written directly in the record format) and `agui-bridge serve`
(gevent workers, `--client-write-timeout 5`), it runs 20 concurrent refusals at a time for `--duration`
seconds (wrong rosInvocationId, malformed cursor, cursor past the end: 416) while 10 reattach clients
connect and never read, and reports:

* `/health` latency (p50/p99/max) sampled every 50 ms throughout: target p99 < 100 ms;
* workers killed (gunicorn's WORKER TIMEOUT): target 0;
* worker RSS growth (peak over the run, summed over workers): target < 64 MiB;
* a wrong rosInvocationId against an unknown run, measured alone beforehand (medians of 40 each):
  target difference < 5 ms;
* how many of the clients that never read were dropped by the write deadline.

Writes `<out>/<date>-reattach-hostile.json` and `.md`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reattach import TOKEN, bridge, pct  # noqa: E402

from agui_bridge.demo.testing import running_demo_agent  # noqa: E402
from agui_bridge.protocol.sse import encode_numbered  # noqa: E402
from agui_bridge.reattach.format import RecordHead, ensure_replay_dir, record_paths, ros_digest  # noqa: E402

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "bench-hostile"
THREAD, RUN = "hostile-thread", "hostile-run"
RECORD_BYTES = 64 << 20
WRITE_TIMEOUT_S = 5
CONCURRENT_REFUSALS = 20
NON_READING_CLIENTS = 10
TARGETS = {"health_p99_ms": 100.0, "workers_killed": 0, "rss_growth_mib": 64.0, "timing_difference_ms": 5.0}


def write_record(state_dir: Path) -> int:
    """A finished 64 MiB record of 4 KiB text frames; returns its last event id."""
    ensure_replay_dir(state_dir)
    path = record_paths(state_dir, THREAD, RUN)[0]
    head = RecordHead(THREAD, RUN, ros_digest(ROS), "bench:1:1", 1)
    position, written = 0, 0
    with open(path, "wb") as handle:
        handle.write(head.encode())
        while written < RECORD_BYTES:
            batch = []
            for _ in range(256):
                position += 1
                event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * 4000}
                batch.append(encode_numbered(position, event))
            data = b"".join(batch)
            handle.write(data)
            written += len(data)
        position += 1
        handle.write(encode_numbered(position, {"type": "RUN_FINISHED", "threadId": THREAD, "runId": RUN}))
    path.chmod(0o600)
    return position


def worker_pids(port: int) -> list[int]:
    """The gunicorn workers serving `port`: children of the process listening on it, demo excluded."""
    out = subprocess.run(
        ["pgrep", "-f", "--", f"--port {port}"], capture_output=True, text=True, check=False
    ).stdout.split()
    pids: list[int] = []
    for parent in out:
        children = subprocess.run(["pgrep", "-P", parent], capture_output=True, text=True, check=False).stdout.split()
        pids += [int(pid) for pid in children]
    return sorted(pids)


def rss_bytes(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def refusal(url: str, kind: str, last: int) -> tuple[int, float]:
    params = {"rosInvocationId": ROS}
    thread = THREAD
    if kind == "wrong-ros":
        params["rosInvocationId"] = "somebody-else"
    elif kind == "unknown-run":
        thread = "no-such-thread"
    elif kind == "bad-cursor":
        params["after"] = "not-a-number"
    elif kind == "past-the-end":
        params["after"] = str(last + 1)
    began = time.perf_counter()
    status = requests.get(url + EVENTS.format(thread, RUN), params=params, timeout=120).status_code
    return status, time.perf_counter() - began


def timing_difference(url: str, last: int, rounds: int = 40) -> dict[str, float]:
    """Alternating wrong-rosInvocationId and unknown-run refusals on one quiet server: medians."""
    times: dict[str, list[float]] = {"wrong-ros": [], "unknown-run": []}
    for _ in range(rounds):
        for kind in times:
            times[kind].append(refusal(url, kind, last)[1] * 1000)
    wrong, unknown = statistics.median(times["wrong-ros"]), statistics.median(times["unknown-run"])
    return {"wrong_ros_p50_ms": round(wrong, 2), "unknown_run_p50_ms": round(unknown, 2),
            "difference_ms": round(abs(wrong - unknown), 2)}  # fmt: skip


@contextlib.contextmanager
def clients_that_never_read(port: int, count: int) -> Iterator[list[socket.socket]]:
    request = f"GET {EVENTS.format(THREAD, RUN)}?rosInvocationId={ROS} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(request.encode())
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def dropped(sock: socket.socket) -> bool:
    """Did the server close this connection? Drain what is buffered; EOF within it means yes."""
    sock.settimeout(2.0)
    received = 0
    with contextlib.suppress(OSError):
        while received < 16 << 20:
            data = sock.recv(1 << 16)
            if not data:
                return True
            received += len(data)
    return False


def hostile(url: str, port: int, last: int, duration_s: float, readers_dir: Path) -> dict[str, Any]:
    pids = worker_pids(port)
    baseline = {pid: rss_bytes(pid) for pid in pids}
    peak = dict(baseline)
    health_ms: list[float] = []
    health_failures = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal health_failures
        while not done.is_set():
            began = time.perf_counter()
            try:
                ok = requests.get(url + "/health", timeout=30).status_code == 200
            except requests.RequestException:
                ok = False
            health_ms.append((time.perf_counter() - began) * 1000)
            health_failures += 0 if ok else 1
            for pid in pids:
                peak[pid] = max(peak[pid], rss_bytes(pid))
            done.wait(0.05)

    kinds = ["wrong-ros", "bad-cursor", "past-the-end"]
    statuses: Counter[str] = Counter()
    with ThreadPoolExecutor(max_workers=CONCURRENT_REFUSALS + 1) as pool:
        watcher = pool.submit(watch)
        with clients_that_never_read(port, NON_READING_CLIENTS) as sockets:
            deadline = time.monotonic() + duration_s
            round_number = 0
            while time.monotonic() < deadline:
                batch = [kinds[(round_number + i) % 3] for i in range(CONCURRENT_REFUSALS)]
                for kind, (status, _) in zip(batch, pool.map(lambda k: refusal(url, k, last), batch), strict=True):
                    statuses[f"{kind}:{status}"] += 1
                round_number += 1
            # the write deadline has passed for every client that never read by now (duration >= 5 s + margin)
            settle = time.monotonic() + WRITE_TIMEOUT_S * 4
            while time.monotonic() < settle and readers_dir.exists() and any(readers_dir.iterdir()):
                time.sleep(0.2)
            followers_left = len(list(readers_dir.iterdir())) if readers_dir.exists() else 0
            closed = sum(dropped(sock) for sock in sockets)
        done.set()
        watcher.result()
    after = worker_pids(port)
    growth = sum(peak[pid] - baseline[pid] for pid in pids)
    return {
        "health": {
            "n": len(health_ms),
            "p50_ms": round(pct(health_ms, 0.5), 2),
            "p99_ms": round(pct(health_ms, 0.99), 2),
            "max_ms": round(max(health_ms), 2),
            "failures": health_failures,
        },
        "workers_before": pids,
        "workers_after": after,
        "workers_killed": len(set(pids) - set(after)),
        "rss_baseline_mib": round(sum(baseline.values()) / (1 << 20), 1),
        "rss_growth_mib": round(growth / (1 << 20), 1),
        "refusals": dict(sorted(statuses.items())),
        "non_reading_clients": NON_READING_CLIENTS,
        "non_reading_dropped_by_server": closed,
        "followers_left_after_deadline": followers_left,
    }


def report_markdown(result: dict[str, Any]) -> str:
    hostile_part, timing, met = result["hostile"], result["timing"], result["targets_met"]
    lines = [
        f"# Hostile reattach bench ({result['date']})",
        "",
        f"64 MiB record on disk, {result['workers']} gevent worker(s), {CONCURRENT_REFUSALS} concurrent refusals for "
        f"{result['duration_s']} s, {NON_READING_CLIENTS} reattach clients that never read, "
        f"`--client-write-timeout {WRITE_TIMEOUT_S}`.",
        "",
        "| measure | value | target | met |",
        "|---|---|---|---|",
        f"| /health p99 | {hostile_part['health']['p99_ms']} ms (p50 {hostile_part['health']['p50_ms']}, max "
        f"{hostile_part['health']['max_ms']}, n {hostile_part['health']['n']}) | < 100 ms | {met['health_p99_ms']} |",
        f"| workers killed | {hostile_part['workers_killed']} | 0 | {met['workers_killed']} |",
        f"| worker RSS growth | {hostile_part['rss_growth_mib']} MiB (baseline {hostile_part['rss_baseline_mib']} MiB)"
        f" | < 64 MiB | {met['rss_growth_mib']} |",
        f"| wrong rosInvocationId vs unknown run | {timing['wrong_ros_p50_ms']} vs {timing['unknown_run_p50_ms']} ms "
        f"(difference {timing['difference_ms']} ms) | < 5 ms | {met['timing_difference_ms']} |",
        f"| clients that never read, dropped by the server | {hostile_part['non_reading_dropped_by_server']} of "
        f"{NON_READING_CLIENTS} | all | |",
        "",
        f"Refusals by kind and status: `{json.dumps(hostile_part['refusals'])}`",
        "",
        f"Note: {result['note']}",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="agui-bench-reattach-hostile-") as tmp, running_demo_agent(TOKEN) as a2a:
        root = Path(tmp)
        with bridge(a2a, root, args.workers, reattach_window=30, client_write_timeout=WRITE_TIMEOUT_S) as url:
            port = int(url.rsplit(":", 1)[1])
            state = root / f"state-{port}"
            last = write_record(state)
            readers_dir = record_paths(state, THREAD, RUN)[2]
            timing = timing_difference(url, last)
            hostile_part = hostile(url, port, last, max(args.duration, WRITE_TIMEOUT_S + 2), readers_dir)
    met = {
        "health_p99_ms": hostile_part["health"]["p99_ms"] < TARGETS["health_p99_ms"],
        "workers_killed": hostile_part["workers_killed"] == TARGETS["workers_killed"],
        "rss_growth_mib": hostile_part["rss_growth_mib"] < TARGETS["rss_growth_mib"],
        "timing_difference_ms": timing["difference_ms"] < TARGETS["timing_difference_ms"],
    }
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "workers": args.workers,
        "duration_s": args.duration,
        "timing": timing,
        "hostile": hostile_part,
        "targets": TARGETS,
        "targets_met": met,
        # Measured, not assumed: the 1-minute load average before and after (the machine has os.cpu_count() CPUs).
        "note": (f"{args.note}; " if args.note else "")
        + f"{os.cpu_count()} CPUs, load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{datetime.date.today().isoformat()}-reattach-hostile"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    stem.with_suffix(".md").write_text(report_markdown(result))
    print(report_markdown(result))


if __name__ == "__main__":
    main()
