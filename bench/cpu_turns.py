"""Worker CPU per 10-delta turn, A/B: versions of `agui_bridge` alternated on one replay upstream.

Run by hand (not part of `bench/run`), with bench/.venv:

    bench/.venv/bin/python bench/cpu_turns.py --version base=/tmp/base --version new=. --rounds 4 --turns 300

Each `--version NAME=DIR` is a directory holding `agui_bridge/` (a checkout or a `git archive` of one). Each
round starts one bridge per version in turn (`agui-bridge serve --workers 1`, gunicorn + gevent, fresh state
directory), warms it, then runs `--turns` sequential 10-delta turns (new connection and new thread per turn)
and records the worker's utime + stime per turn (`/proc`), which on a shared machine is far steadier than the
wall times (also printed). `--py-spy DIR` records a raw on-CPU profile of each worker while it is measured.
Prints one JSON line per measurement and a summary (median CPU ms per turn per version).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import harness as h
import loadgen as lg


def thread_cpu(pid: int) -> dict[str, float]:
    """utime + stime per thread name (seconds): the hub, the state writer's lanes, the syncer, helpers."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = "hub" if task.name == str(pid) else "other threads"  # OS thread names are not set
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def measure(
    name: str,
    root: Path,
    replay: h.Replay,
    work: Path,
    turns: int,
    py_spy: Path | None,
    rnd: int,
    strace: Path | None = None,
) -> dict[str, Any]:
    ws = work / "ws"
    ws.mkdir(exist_ok=True)
    bridge = h.Bridge(
        work,
        f"{name}-{rnd}",
        a2a_url=replay.url,
        a2a_token=replay.token,
        state_dir=work / f"state-{name}-{rnd}",
        cwd_root=ws,
        extra_env={"PYTHONPATH": str(root)},
    )
    try:
        for _ in range(30):
            asyncio.run(lg.sse_stream(bridge.port, lg.agui_request(bridge.port, "[DELTAS 10] warm", str(ws))))
        spy = None
        if py_spy is not None:
            py_spy.mkdir(parents=True, exist_ok=True)
            out = py_spy / f"{name}-{rnd}.txt"
            spy = subprocess.Popen(
                [str(h.BENCH_DIR / ".venv/bin/py-spy"), "record", "--pid", str(bridge.pid), "--rate", "1000",
                 "--format", "raw", "--nonblocking", "--threads", "--output", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        if strace is not None:
            strace.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen(
                ["strace", "-f", "-c", "-o", str(strace / f"{name}-{rnd}.txt"), "-p", str(bridge.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        cpu0 = h.cpu_seconds(bridge.pid)
        threads0 = thread_cpu(bridge.pid)
        recs = asyncio.run(
            lg.concurrent_turns(bridge.port, lambda: lg.agui_request(bridge.port, "[DELTAS 10] t", str(ws)), 1, turns)
        )
        time.sleep(0.15)
        cpu_ms = (h.cpu_seconds(bridge.pid) - cpu0) * 1000 / max(1, len(recs))
        threads1 = thread_cpu(bridge.pid)
        per_thread = {k: round((v - threads0.get(k, 0.0)) * 1000 / max(1, len(recs)), 3) for k, v in threads1.items()}
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        ok = [r for r in recs if r.terminal == "RUN_FINISHED" and r.t_end is not None]
        started_ms = [((r.t_run_started or 0) - r.t_start) * 1000 for r in ok]
        return {
            "version": name,
            "round": rnd,
            "turns_ok": len(ok),
            "cpu_ms_per_turn": round(cpu_ms, 3),
            "turn_p50_ms": round(statistics.median([(r.t_end - r.t_start) * 1000 for r in ok]), 3),  # type: ignore[operator]
            "run_started_p50_ms": round(statistics.median(started_ms), 3),
            "thread_cpu_ms_per_turn": {k: v for k, v in per_thread.items() if v > 0},
            "load": h.loadavg()[0],
        }
    finally:
        bridge.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", action="append", required=True, help="NAME=DIR (DIR holds agui_bridge/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--py-spy", type=Path, default=None)
    ap.add_argument("--strace", type=Path, default=None, help="DIR: strace -c the worker (CPU figures are then void)")
    args = ap.parse_args()
    versions = h.parse_versions(args.version)
    work = Path(tempfile.mkdtemp(prefix="agui-cpu-turns-"))
    replay = h.Replay(work, secrets.token_hex(16), deltas=10)
    results: dict[str, list[float]] = {n: [] for n, _ in versions}
    try:
        for rnd in range(args.rounds):
            for name, root in h.alternated(versions, rnd):
                row = measure(name, root, replay, work, args.turns, args.py_spy, rnd, args.strace)
                print(json.dumps(row), flush=True)
                results[name].append(row["cpu_ms_per_turn"])
    finally:
        replay.stop()
    print(json.dumps({n: {"median_cpu_ms": round(statistics.median(v), 3), "all": v} for n, v in results.items()}))


if __name__ == "__main__":
    main()
