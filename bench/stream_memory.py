"""Where a held stream's memory goes: RSS per stream at two stream counts, and tracemalloc's allocation sites.

Run by hand (bench/README.md): `.venv/bin/python bench/stream_memory.py --n 300,900 --trace 300 [--reps 3]`.

Each case starts a fresh `agui-bridge serve --workers 1` on the replay upstream (`--heartbeat-interval 2`),
warms it up, then opens N `[HOLD]` turns at once (as the `idle` section does) and waits until every one has
RUN_STARTED and the upstream holds every turn, and one heartbeat interval more. RSS per stream is (worker
RSS held, max of three readings - worker RSS before) / N, also split by kind of mapping (libc's heap, the
anonymous rest) and read again after `malloc_trim(0)` in the worker (what libc's free lists held); the slope
between two N of one repetition cancels what the first streams cost once (pools, arenas, dict growth).

`--trace N`: a case whose worker starts tracemalloc (`--trace-depth` frames) just before the burst and dumps
a snapshot while the N streams are held, through signal handlers a `sitecustomize` of this script installs
in the gunicorn master (inherited by its worker: gunicorn resets none of the real-time signals). What is
still allocated then was allocated for the held streams (and a little noise); it is printed per stream,
grouped by allocation site (the innermost frame), each with the innermost frame of `agui_bridge` that led
to it. tracemalloc sees what goes through Python's allocators (objects, buffers, greenlets' saved stacks,
httptools' parser state); RSS also counts libc malloc and page granularity.

`--checkouts name=/path,...` measures several checkouts' `agui_bridge` (each copied once to the scratch
directory, as bench/run does), the cases alternating between them so a shared machine's drift hits all
alike. `--greenlet-floor`: the RSS of one parked gevent greenlet, by how deep it once went (what each of a
stream's two greenlets costs at least). Prints a JSON summary to stdout (`--json FILE` writes it too);
progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import harness as h
import loadgen as lg

#: Signals the worker's tracing hooks answer: start tracing, dump a snapshot.
SIG_START = signal.SIGRTMIN + 1
SIG_DUMP = signal.SIGRTMIN + 2
SIG_TRIM = signal.SIGRTMIN + 3

#: Installed as `sitecustomize` in the traced bridge's processes (the master installs the handlers at
#: start; its forked worker inherits them).
SITECUSTOMIZE = """
import os, signal

_out = os.environ.get("STREAM_MEMORY_SNAPSHOT")
if os.environ.get("STREAM_MEMORY_TRIM"):
    def _trim(signum, frame):
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)

    signal.signal(signal.SIGRTMIN + 3, _trim)
if _out:
    import gc, tracemalloc

    def _start(signum, frame):
        gc.collect()
        tracemalloc.start(int(os.environ.get("STREAM_MEMORY_DEPTH", "12")))

    def _dump(signum, frame):
        import json
        before, peak = tracemalloc.get_traced_memory()
        unreachable = gc.collect()
        with open(_out + ".gc", "w") as fh:
            json.dump({"traced_before_collect": before, "traced_after_collect": tracemalloc.get_traced_memory()[0],
                       "traced_peak": peak, "unreachable_objects": unreachable}, fh)
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        snapshot.dump(_out + ".part")
        os.replace(_out + ".part", _out)

    def _trim(signum, frame):
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)

    signal.signal(signal.SIGRTMIN + 1, _start)
    signal.signal(signal.SIGRTMIN + 2, _dump)
"""

HEARTBEAT_S = 2.0
#: `--keep-snapshots DIR`: where the tracemalloc snapshots are copied (for a closer look with `tracemalloc`).
KEEP_SNAPSHOTS = ""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] stream_memory: {msg}", file=sys.stderr, flush=True)


def rss_by_mapping(pid: int) -> dict[str, int]:
    """Resident KiB by kind of mapping: `heap` (libc's brk heap: malloc, which has blocks over 512 bytes such as
    the greenlets' saved C stacks), `anon` (anonymous mappings: pymalloc's arenas, the Python frame stack of
    each greenlet, libc's mmap'd blocks, thread stacks), `files` (code and data of mapped files)."""
    out = {"heap": 0, "anon": 0, "files": 0}
    kind = "files"
    with open(f"/proc/{pid}/smaps") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                name = head[5] if len(head) > 5 else ""
                kind = "heap" if name == "[heap]" else ("files" if name and not name.startswith("[") else "anon")
            elif head[0] == "Rss:":
                out[kind] += int(head[1])
    return out


def worker_threads(pid: int) -> int:
    """The worker's OS threads (the hub's, gevent's thread pool, the state writer, ...): each has its own
    stack and, once it allocates, its own libc arena."""
    with open(f"/proc/{pid}/status") as fh:
        return int(next(line.split()[1] for line in fh if line.startswith("Threads:")))


GREENLET_FLOOR = """
import sys
import gevent, gevent.queue

def rss():
    with open("/proc/self/status") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0])

def deep(n):
    return deep(n - 1) if n else 0

def parked(depth, queue):
    deep(depth)  # how deep it once went: the pages of its frame stack stay resident
    queue.get(timeout=60)

depth = int(sys.argv[1])
queue = gevent.queue.SimpleQueue()
before = rss()
greenlets = [gevent.spawn(parked, depth, queue) for _ in range(2000)]
gevent.sleep(0.2)
print(round((rss() - before) / 2000, 2))
for _ in greenlets:
    queue.put(None)
gevent.joinall(greenlets)
"""


def greenlet_floor() -> dict[str, float]:
    """RSS KiB of one parked gevent greenlet waiting on a queue with a timeout, by how many Python frames deep
    it once went (2,000 greenlets in a fresh interpreter per depth): the floor of each of a stream's two."""
    import subprocess

    out = {}
    for depth in (0, 30, 60, 120):
        command = [sys.executable, "-c", GREENLET_FLOOR, str(depth)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
        out[f"frames_deep_{depth}"] = float(run.stdout.strip())
    return out


def snapshot_checkout(root: Path, into: Path) -> Path:
    """A copy of `root`'s agui_bridge (edits made meanwhile do not mix versions)."""
    into.mkdir(parents=True)
    shutil.copytree(
        root / "agui_bridge",
        into / "agui_bridge",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules"),
    )
    for name in ("setup.cfg", "wsgi.py"):
        if (root / name).exists():
            shutil.copy2(root / name, into / name)
    return into


async def hold(
    port: int, requests: list[bytes], limit_s: float, on_held: Any, upstream_held: Any
) -> list[lg.StreamRecord]:
    """Open every stream at once, wait until all have RUN_STARTED and the upstream holds every turn (or
    `limit_s`), then one heartbeat interval more; call `on_held`, close all."""
    recs = [lg.StreamRecord() for _ in requests]
    tasks = [asyncio.create_task(lg.sse_stream(port, req, rec)) for req, rec in zip(requests, recs, strict=True)]
    deadline = lg.now() + limit_s
    while lg.now() < deadline:
        if all(r.t_run_started or r.t_end or r.error for r in recs) and upstream_held() >= len(recs):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(HEARTBEAT_S + 0.5)  # every stream parked, at least one heartbeat written
    await on_held()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return recs


def one_case(
    replay: h.Replay, tmp: Path, token: str, checkout: Path, n: int, *, trace: bool, depth: int, name: str
) -> dict[str, Any]:
    logs = tmp / "logs"
    cwd_root = tmp / "workspaces"
    ws = cwd_root / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    state_dir = tmp / f"state-{name}"
    snap_path = tmp / f"{name}.snapshot"
    pythonpath = str(checkout)
    extra: dict[str, str] = {}
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pythonpath = f"{site}{os.pathsep}{checkout}"
    extra = {"STREAM_MEMORY_TRIM": "1"}
    if trace:
        extra.update({"STREAM_MEMORY_SNAPSHOT": str(snap_path), "STREAM_MEMORY_DEPTH": str(depth)})
    h.REPO_ROOT = checkout
    bridge = h.Bridge(
        logs, name, a2a_url=replay.url, a2a_token=token, state_dir=state_dir, cwd_root=cwd_root,
        heartbeat_s=HEARTBEAT_S, worker_connections=n + 200, max_active_runs=n + 100,
        extra_env={"PYTHONPATH": pythonpath, **extra},
    )  # fmt: skip
    result: dict[str, Any] = {"name": name, "streams": n, "trace": trace}
    try:
        for _ in range(3):
            rec = asyncio.run(lg.sse_stream(bridge.port, lg.agui_request(bridge.port, "[DELTAS 10] warm-up", str(ws))))
            if rec.terminal != "RUN_FINISHED":
                raise RuntimeError(f"warm-up failed: {rec.error} {rec.body[:300]!r}")
        time.sleep(1.0)
        pid = bridge.pid
        requests = [lg.agui_request(bridge.port, "[HOLD] memory", str(ws)) for _ in range(n)]
        if trace:
            os.kill(pid, SIG_START)
            time.sleep(0.5)
        held0 = replay.stats().get("held_now", 0)
        rss0 = h.rss_kib(pid)
        maps0 = rss_by_mapping(pid)
        held: dict[str, Any] = {}

        async def on_held() -> None:
            readings = []
            for _ in range(3):
                readings.append(h.rss_kib(pid))
                await asyncio.sleep(0.3)
            held["rss"] = max(readings)
            held["upstream"] = replay.stats().get("held_now", 0) - held0
            held["maps"] = rss_by_mapping(pid)
            held["threads"] = worker_threads(pid)
            if not trace:  # what libc's free lists hold that malloc_trim gives back (fragmentation of its heap)
                os.kill(pid, SIG_TRIM)
                await asyncio.sleep(1.0)
                held["trimmed"] = h.rss_kib(pid)
            if trace:
                os.kill(pid, SIG_DUMP)
                deadline = time.monotonic() + 120
                while not snap_path.exists() and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)

        recs = asyncio.run(
            hold(bridge.port, requests, 40.0, on_held, lambda: replay.stats().get("held_now", 0) - held0)
        )
        started = sum(1 for r in recs if r.t_run_started is not None)
        result.update(
            {
                "started": started,
                "upstream_turns_held": held["upstream"],
                "errors": sorted({(r.error or "")[:80] for r in recs if r.t_run_started is None}),
                "rss_before_kib": rss0,
                "rss_held_kib": held["rss"],
                "rss_per_stream_kib": round((held["rss"] - rss0) / max(started, 1), 2),
                "worker_threads_held": held["threads"],
                "rss_per_stream_kib_after_malloc_trim": (
                    round((held["trimmed"] - rss0) / max(started, 1), 2) if "trimmed" in held else None
                ),
                "rss_per_stream_kib_by_mapping": {
                    k: round((held["maps"][k] - maps0[k]) / max(started, 1), 2) for k in maps0
                },
            }
        )
        if trace:
            result["tracemalloc"] = summarise(snap_path, started)
            collected = json.loads(Path(f"{snap_path}.gc").read_text())
            result["tracemalloc"]["cyclic_garbage_per_stream_bytes"] = round(
                (collected["traced_before_collect"] - collected["traced_after_collect"]) / max(started, 1)
            )
            # the most traced at any time since tracing started (the burst's admissions in flight at once)
            result["tracemalloc"]["peak_per_stream_bytes"] = round(collected["traced_peak"] / max(started, 1))
            if KEEP_SNAPSHOTS:
                shutil.copy2(snap_path, Path(KEEP_SNAPSHOTS) / snap_path.name)
            snap_path.unlink(missing_ok=True)
    finally:
        bridge.stop()
    return result


def _is_bridge(frame: tracemalloc.Frame) -> bool:
    return "/agui_bridge/" in frame.filename


def _short(frame: tracemalloc.Frame) -> str:
    path = frame.filename
    for marker in ("/site-packages/", "/agui_bridge/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "/agui_bridge/":
                path = "agui_bridge/" + path
            break
    return f"{path}:{frame.lineno}"


def summarise(path: Path, streams: int, top: int = 30) -> dict[str, Any]:
    """Bytes and blocks per stream by allocation site, each with the `agui_bridge` frame that led there."""
    snapshot = tracemalloc.Snapshot.load(str(path)).filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*")]
    )
    sites: dict[tuple[str, str], list[int]] = {}
    total = 0
    for trace in snapshot.traces:
        frames = list(trace.traceback)  # the oldest call first, the allocating frame last
        site = _short(frames[-1])
        caller = next((_short(f) for f in reversed(frames) if _is_bridge(f)), "-")
        acc = sites.setdefault((site, caller), [0, 0])
        acc[0] += trace.size
        acc[1] += 1
        total += trace.size
    rows = sorted(sites.items(), key=lambda kv: -kv[1][0])
    return {
        "total_per_stream_bytes": round(total / max(streams, 1)),
        "sites": [
            {
                "site": site,
                "via": caller,
                "bytes_per_stream": round(size / streams, 1),
                "blocks_per_stream": round(count / streams, 2),
            }
            for (site, caller), (size, count) in rows[:top]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="300,900", help="stream counts for RSS (comma-separated)")
    parser.add_argument("--trace", type=int, default=0, help="also a tracemalloc case with this many streams")
    parser.add_argument("--trace-depth", type=int, default=12)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--checkouts", default=f"this={h.REPO_ROOT}", help="name=/path,... (alternated)")
    parser.add_argument("--json", default="")
    parser.add_argument("--greenlet-floor", action="store_true", help="also: RSS of one parked greenlet")
    parser.add_argument("--keep-snapshots", default="", help="copy the tracemalloc snapshots into this directory")
    args = parser.parse_args()
    global KEEP_SNAPSHOTS
    KEEP_SNAPSHOTS = args.keep_snapshots
    tmp = Path(tempfile.mkdtemp(prefix="agui-streammem-"))
    (tmp / "logs").mkdir()
    token = secrets.token_hex(16)
    checkouts = {}
    for spec in args.checkouts.split(","):
        name, _, path = spec.partition("=")
        checkouts[name] = snapshot_checkout(Path(path).resolve(), tmp / "src" / name)
    sizes = [int(x) for x in args.n.split(",") if x.strip()]
    replay = h.Replay(tmp / "logs", token, deltas=10, hold_max=300.0)
    results: list[dict[str, Any]] = []
    try:
        for rep in range(args.reps):
            for n, trace in [(n, False) for n in sizes] + ([(args.trace, True)] if args.trace else []):
                for name, checkout in checkouts.items():
                    case = f"{name}-{n}-{'trace' if trace else 'rss'}-{rep + 1}"
                    log(f"{case}: holding {n} streams")
                    out = one_case(replay, tmp, token, checkout, n, trace=trace, depth=args.trace_depth, name=case)
                    out["checkout"] = name
                    log(
                        f"{case}: started {out['started']}/{n} (upstream holds {out['upstream_turns_held']}),"
                        f" RSS {out['rss_before_kib']} -> {out['rss_held_kib']} KiB,"
                        f" {out['rss_per_stream_kib']} KiB/stream"
                        + (f", traced {out['tracemalloc']['total_per_stream_bytes']} B/stream" if trace else "")
                    )
                    results.append(out)
    finally:
        replay.stop()
    slopes: dict[str, Any] = {}
    if len(sizes) >= 2:
        for name in checkouts:
            per_n: dict[int, list[int]] = {}
            for r in results:
                if r["checkout"] == name and not r["trace"]:
                    per_n.setdefault(r["streams"], []).append(r["rss_held_kib"] - r["rss_before_kib"])
            lo, hi = min(per_n), max(per_n)
            d_lo = sorted(per_n[lo])[len(per_n[lo]) // 2]
            d_hi = sorted(per_n[hi])[len(per_n[hi]) // 2]
            slopes[name] = {"from": lo, "to": hi, "rss_kib_per_stream": round((d_hi - d_lo) / (hi - lo), 2)}
    summary: dict[str, Any] = {"heartbeat_s": HEARTBEAT_S, "cases": results, "slope": slopes, "loadavg": h.loadavg()}
    if args.greenlet_floor:
        summary["greenlet_floor_kib"] = greenlet_floor()
    text = json.dumps(summary, indent=1)
    if args.json:
        Path(args.json).write_text(text)
    print(text)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
