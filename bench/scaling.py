"""Two workers vs one: aggregate events/s of N concurrent long turns from the replay upstream.

Both bridges (`agui-bridge serve --workers 1` and `--workers 2`) run side by side and their repetitions
alternate (1, 2, 1, 2, ...), so drift in the load of a shared machine hits both alike. Each repetition
opens `streams` turns of `deltas` text deltas at once from this process's event loop; the aggregate
rate is all events received / (first POST sent -> last RUN_FINISHED received). CPU of every gunicorn
worker, the replay upstream and this client is recorded per repetition: on two cores those three
compete for the same CPUs, which is what bounds the ratio.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import harness as h
import loadgen as lg

#: The scaling target: two workers on two cores give at least this multiple of one worker's events/s.
GOAL = 1.7


def _machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat (all CPUs)."""
    with open("/proc/stat") as fh:
        fields = [float(x) for x in fh.readline().split()[1:]]
    tick = float(os.sysconf("SC_CLK_TCK"))
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def _median(values: list[float]) -> float | None:
    return h.percentile(values, 50) if values else None


async def _burst(port: int, requests: list[bytes]) -> list[lg.StreamRecord]:
    return list(await asyncio.gather(*(lg.sse_stream(port, req) for req in requests)))


def one_rep(bench: Any, bridge: h.Bridge, upstream_pid: int, streams: int, deltas: int) -> dict[str, Any]:
    """One burst of `streams` concurrent `deltas`-delta turns against `bridge`: aggregate rate and CPU split."""
    text = f"[DELTAS {deltas}] scaling"
    requests = [bench.agui_req(bridge.port, text) for _ in range(streams)]
    w0 = [h.cpu_seconds(pid) for pid in bridge.workers]
    u0, c0 = h.cpu_seconds(upstream_pid), time.process_time()
    m0 = _machine_cpu()
    recs = asyncio.run(_burst(bridge.port, requests))
    time.sleep(0.15)  # the runs' clean-up is part of their cost
    w1 = [h.cpu_seconds(pid) for pid in bridge.workers]
    u1, c1 = h.cpu_seconds(upstream_pid), time.process_time()
    m1 = _machine_cpu()
    bad = [r for r in recs if r.terminal != "RUN_FINISHED" or r.events < deltas or r.t_end is None]
    out: dict[str, Any] = {
        "streams": streams,
        "errors": [f"{r.terminal} {r.error} events={r.events} {r.body[:200]!r}" for r in bad],
        "worker_cpu_s": [round(b - a, 3) for a, b in zip(w0, w1, strict=True)],
        "upstream_cpu_s": round(u1 - u0, 3),
        "client_cpu_s": round(c1 - c0, 3),
    }
    if bad:
        return out
    events = sum(r.events for r in recs)
    elapsed = max(r.t_end or 0.0 for r in recs) - min(r.t_start for r in recs)
    out.update(
        {
            "events": events,
            "elapsed_s": round(elapsed, 3),
            "events_per_s": round(events / elapsed),
            "per_stream_events_per_s_p50": round(
                _median([r.events / ((r.t_end or 0.0) - r.t_start) for r in recs]) or 0.0
            ),
            # 1.0 = one full core busy for the whole burst
            "worker_cores": [round((b - a) / elapsed, 2) for a, b in zip(w0, w1, strict=True)],
            "upstream_cores": round((u1 - u0) / elapsed, 2),
            "client_cores": round((c1 - c0) / elapsed, 2),
            # every process of the machine, this bench's included: what the other work on it took
            "machine_busy_cores": round((m1[0] - m0[0]) / (elapsed + 0.15), 2),
            "server_cpu_us_per_event": round((sum(w1) - sum(w0)) / events * 1e6, 1),
        }
    )
    return out


def _summarise(reps: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in reps if "events_per_s" in r]
    return {
        "events_per_s": _metric([r["events_per_s"] for r in ok], 0),
        "server_cpu_us_per_event": _metric([r["server_cpu_us_per_event"] for r in ok], 1),
        "worker_cores_total": _metric([sum(r["worker_cores"]) for r in ok], 2),
        "upstream_cores": _metric([r["upstream_cores"] for r in ok], 2),
        "client_cores": _metric([r["client_cores"] for r in ok], 2),
        "machine_busy_cores": _metric([r["machine_busy_cores"] for r in ok], 2),
        "failed_reps": len(reps) - len(ok),
        "reps": reps,
    }


def _metric(values: list[float], digits: int) -> dict[str, Any]:
    """The bench's shape for a metric over repetitions: median, p99 and every value."""

    def r(v: float | None) -> float | None:
        return None if v is None else (round(v) if digits == 0 else round(v, digits))

    return {"median": r(_median(values)), "p99": r(h.percentile(values, 99)), "values": [r(v) for v in values]}


def section_scaling(bench: Any, replay: h.Replay) -> dict[str, Any]:
    """Start a one-worker and a two-worker bridge, warm both, alternate their bursts, compare the medians."""
    cfg = bench.cfg
    streams, deltas, reps = cfg["scale_streams"], cfg["scale_deltas"], cfg["scale_reps"]
    out: dict[str, Any] = {
        "streams": streams,
        "deltas": deltas,
        "reps": reps,
        "cpus": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_start": h.loadavg(),
        "note": "Shared 2-core machine (other engineers' work running); the client and the replay upstream "
        "run on the same two cores as the bridge workers",
    }
    bridges: dict[int, h.Bridge] = {}
    for workers in (1, 2):
        name = f"bridge-scaling-{workers}w"
        bridges[workers] = bench.track(
            h.Bridge(
                bench.logs,
                name,
                a2a_url=replay.url,
                a2a_token=bench.token,
                state_dir=bench.state_dir(name),
                cwd_root=bench.cwd_root,
                workers=workers,
            )
        )
        out[f"workers_{workers}_command"] = bridges[workers].command
    try:
        for workers, bridge in bridges.items():
            bench.warm(bridge.port)
            # a concurrent warm-up burst, so every worker of the two has served a turn before measuring
            asyncio.run(_burst(bridge.port, [bench.agui_req(bridge.port, "[DELTAS 500] warm-up")] * (2 * workers)))
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for i in range(reps):
            for workers, bridge in bridges.items():
                h.log(f"scaling: rep {i + 1}/{reps}, {workers} worker(s), {streams} x {deltas} deltas at once")
                runs[workers].append(one_rep(bench, bridge, replay.pid, streams, deltas))
    finally:
        for bridge in bridges.values():
            bench.stop(bridge)
    out["workers_1"], out["workers_2"] = _summarise(runs[1]), _summarise(runs[2])
    out["ratio_events_per_s"] = h.ratio(
        out["workers_2"]["events_per_s"]["median"], out["workers_1"]["events_per_s"]["median"]
    )
    out["loadavg_end"] = h.loadavg()
    return out


def target(res: dict[str, Any]) -> tuple[float | None, bool | None, str]:
    """(ratio, met, note) of the two-worker target from a results dict; (None, None, why) if not measured."""
    sc = res.get("scaling")
    if not isinstance(sc, dict):
        return None, None, "not measured in this run (section scaling)"
    x = sc.get("ratio_events_per_s")
    busy = (sc.get("workers_2") or {}).get("machine_busy_cores", {}).get("median")
    note = (
        f"{sc['streams']} x {sc['deltas']:,}-delta turns at once, median of {sc['reps']}; shared machine, "
        f"{busy} of {sc['cpus']} cores busy machine-wide during the two-worker bursts"
    )
    return x, None if x is None else x >= GOAL, note


def markdown(sc: dict[str, Any]) -> list[str]:
    """The results section: one row per worker count, then the ratio."""

    def m(metric: dict[str, Any]) -> str:
        med, p99 = metric.get("median"), metric.get("p99")
        return "n/a" if med is None else (f"{med:,}" if med == p99 else f"{med:,} ({p99:,})")

    lines = [
        "",
        "## Two workers vs one (`scaling`)",
        "",
        f"Measured at {sc.get('measured_at', 'n/a')}: "
        f"{sc['streams']} concurrent turns of {sc['deltas']:,} deltas from the replay upstream, {sc['reps']} "
        f"repetition(s) per worker count, alternating; {sc['cpus']} CPUs, load average {sc['loadavg_start']} at "
        f"start and {sc['loadavg_end']} at end. {sc['note']}. Aggregate events/s = all events / (first POST "
        "-> last RUN_FINISHED); cores = CPU seconds / burst duration.",
        "",
        "| bridge | aggregate events/s | server CPU us/event | worker cores (sum) | upstream cores | "
        "client cores | machine busy cores (all processes) | failed reps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workers in (1, 2):
        s = sc[f"workers_{workers}"]
        lines.append(
            f"| `--workers {workers}` | {m(s['events_per_s'])} | {m(s['server_cpu_us_per_event'])} | "
            f"{m(s['worker_cores_total'])} | {m(s['upstream_cores'])} | {m(s['client_cores'])} | "
            f"{m(s['machine_busy_cores'])} | {s['failed_reps']} |"
        )
    per_worker = [r.get("worker_cores") for r in sc["workers_2"]["reps"]]
    lines += [
        "",
        f"Two workers / one worker: **{sc['ratio_events_per_s']}x** (goal >= {GOAL}x). "
        f"Per-worker cores of the two-worker bridge, per repetition: {per_worker}.",
    ]
    return lines
