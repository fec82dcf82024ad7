"""Worker CPU and RUN_STARTED of a burst of `[HOLD]` streams opened at once, A/B (run by hand).

    bench/.venv/bin/python bench/burst_cpu.py --version base=/tmp/base --version new=. --streams 1000 --rounds 3

Each `--version NAME=DIR` is a directory holding `agui_bridge/`. Per round and version: a fresh bridge
(`--workers 1`, gunicorn + gevent, worker_connections and max-active-runs above the burst), `--streams`
connections opened at once, each posting a `[HOLD]` turn; measured from the first POST until every stream
has its RUN_STARTED (or 60 s): the worker's utime + stime per stream (`/proc`, steadier than wall times on a
shared machine), RUN_STARTED p50 / p99 from the burst, and when the last one came. The streams are then
dropped and the bridge stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import harness as h
import loadgen as lg


async def burst(port: int, ws: str, n: int, deadline_s: float) -> list[lg.StreamRecord]:
    recs = [lg.StreamRecord() for _ in range(n)]
    tasks = [
        asyncio.create_task(lg.sse_stream(port, lg.agui_request(port, "[HOLD] burst", ws), rec, hb_interval=2.0))
        for rec in recs
    ]
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and any(r.t_run_started is None and r.error is None for r in recs):
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return recs


def measure(name: str, root: Path, replay: h.Replay, work: Path, n: int, rnd: int) -> dict[str, Any]:
    ws = work / "ws"
    ws.mkdir(exist_ok=True)
    bridge = h.Bridge(
        work,
        f"{name}-{rnd}",
        a2a_url=replay.url,
        a2a_token=replay.token,
        state_dir=work / f"state-{name}-{rnd}",
        cwd_root=ws,
        heartbeat_s=2.0,
        worker_connections=n + 200,
        max_active_runs=n + 100,
        extra_env={"PYTHONPATH": str(root)},
    )
    try:
        for _ in range(3):
            asyncio.run(lg.sse_stream(bridge.port, lg.agui_request(bridge.port, "[DELTAS 10] warm", str(ws))))
        cpu0 = h.cpu_seconds(bridge.pid)
        recs = asyncio.run(burst(bridge.port, str(ws), n, 60.0))
        cpu_s = h.cpu_seconds(bridge.pid) - cpu0
        started = [r.t_run_started - r.t_start for r in recs if r.t_run_started is not None]
        t0 = min(r.t_start for r in recs)
        return {
            "version": name,
            "round": rnd,
            "streams": n,
            "started": len(started),
            "worker_cpu_ms_per_stream": round(cpu_s * 1000 / n, 3),
            "run_started_p50_s": round(statistics.median(started), 3) if started else None,
            "run_started_p99_s": round(h.percentile(started, 99) or 0, 3) if started else None,
            "last_started_s": round(max(r.t_run_started for r in recs if r.t_run_started) - t0, 3) if started else None,
            "errors": sorted({r.error for r in recs if r.error and r.t_run_started is None})[:3],
            "load": h.loadavg()[0],
        }
    finally:
        bridge.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", action="append", required=True, help="NAME=DIR (DIR holds agui_bridge/)")
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    versions = h.parse_versions(args.version)
    work = Path(tempfile.mkdtemp(prefix="agui-burst-cpu-"))
    replay = h.Replay(work, secrets.token_hex(16), deltas=10, ping_interval=15.0, hold_max=120.0)
    cpu: dict[str, list[float]] = {name: [] for name, _ in versions}
    try:
        for rnd in range(args.rounds):
            for name, root in h.alternated(versions, rnd):
                row = measure(name, root, replay, work, args.streams, rnd)
                print(json.dumps(row), flush=True)
                cpu[name].append(row["worker_cpu_ms_per_stream"])
    finally:
        replay.stop()
    print(json.dumps({name: {"median_cpu_ms_per_stream": statistics.median(v), "all": v} for name, v in cpu.items()}))


if __name__ == "__main__":
    main()
