"""Hostile-input case (docs/design.md#decision-bounded-state): does a client posting maximal bodies starve the worker?

One gunicorn+gevent worker (so nothing hides behind another worker) on the replay upstream. While a
hostile client posts maximal bodies in a loop, a second client holds one `[HOLD]` stream and
measures its heartbeat lateness (gap between `: heartbeat` frames minus the interval), and a prober
measures `GET /health` latency (a new connection every 100 ms). A quiet phase first gives the
baseline on the same server.

The hostile bodies rotate through, all at the 12 MiB body limit unless said otherwise:

* `messages`: ~300k tiny messages (refused by the message cap; took 17.7 s of hub CPU before)
* `deep`: ~6M nested `[` (refused as nesting, never a RecursionError)
* `values`: a `state` of ~6M zeros (refused by the value cap after decoding)
* `allowed`: the largest body that passes every cap (1,000 messages, 2,000 parts, ~80k values in
  `state`, padded to ~12 MiB): validated, admitted and streamed to the end, a new thread each time.

Targets: heartbeat lateness p99 < 1 s and /health p99 < 100 ms under the hostile load.

    bash bench/run --hostile [--duration 30] [--heartbeat 0.5] [--date YYYY-MM-DD]

writes bench/results/<date>-hostile.json and .md. Run by hand, never part of the tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import harness as h

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the SSE reader of this checkout

from agui_bridge.protocol.sse_parser import SseComment, iter_records

MAX_BODY = 12 * 1024 * 1024
TARGET_HEARTBEAT_LATE_S = 1.0
TARGET_HEALTH_S = 0.100


# ---- bodies ------------------------------------------------------------------------------------------


def _iac(cwd: str) -> dict[str, Any]:
    return {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-hostile", "cwd": cwd}}


def body_messages() -> bytes:
    one = b'{"id":"m","role":"user","content":"x"},'
    count = (MAX_BODY - 4096) // len(one)
    return b'{"threadId":"t","runId":"r","messages":[' + one * (count - 1) + one[:-1] + b"]}"


def body_deep() -> bytes:
    depth = (MAX_BODY - 64) // 2
    return b'{"state":' + b"[" * depth + b"]" * depth + b"}"


def body_values() -> bytes:
    count = (MAX_BODY - 64) // 2
    return b'{"state":[' + b"0," * (count - 1) + b"0]}"


def body_allowed(cwd: str) -> bytes:
    """The largest body every cap admits (agui_bridge.config.limits), with a fresh thread and run id."""
    sys.path.insert(0, str(h.REPO_ROOT))
    from agui_bridge.config import limits

    messages: list[dict[str, Any]] = []
    for index in range(limits.MAX_MESSAGES - 1):
        if index % 2 == 0:
            parts = [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]
            messages.append({"id": f"m{index}", "role": "user", "content": parts})
        else:
            messages.append({"id": f"m{index}", "role": "assistant", "content": "z"})
    messages.append({"id": "last", "role": "user", "content": "[DELTAS 5]"})
    body: dict[str, Any] = {
        "threadId": f"hostile-{uuid.uuid4().hex}",
        "runId": f"run-{uuid.uuid4().hex}",
        "state": {"v": [0] * (limits.MAX_JSON_VALUES - 20_000)},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": _iac(cwd),
    }
    size = len(json.dumps(body).encode())
    body["state"]["pad"] = "p" * max(MAX_BODY - size - 64 * 1024, 0)
    return json.dumps(body).encode()


# ---- clients -----------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.phase = "quiet"
        self.heartbeat_late: dict[str, list[float]] = {"quiet": [], "hostile": []}
        self.health_s: dict[str, list[float]] = {"quiet": [], "hostile": []}
        self.health_errors: dict[str, int] = {"quiet": 0, "hostile": 0}
        self.hostile: dict[str, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.stream_error: str | None = None

    def add(self, series: dict[str, list[float]], value: float) -> None:
        with self.lock:
            series[self.phase].append(value)


def hold_stream(url: str, cwd: str, heartbeat_s: float, rec: Recorder) -> None:
    """One held run; records (gap between heartbeats - interval) per heartbeat."""
    import requests

    body = {
        "threadId": f"holder-{uuid.uuid4().hex}",
        "runId": f"run-{uuid.uuid4().hex}",
        "state": {},
        "messages": [{"id": "m-1", "role": "user", "content": "[HOLD]"}],
        "tools": [],
        "context": [],
        "forwardedProps": _iac(cwd),
    }
    try:
        with requests.post(url, json=body, stream=True, timeout=(5, 120)) as response:
            last: float | None = None
            for item in iter_records(response.iter_content(chunk_size=None)):
                if rec.stop.is_set():
                    return
                if isinstance(item, SseComment) and item.text == b"heartbeat":
                    now = time.monotonic()
                    if last is not None:
                        rec.add(rec.heartbeat_late, max(0.0, now - last - heartbeat_s))
                    last = now
    except Exception as exc:  # the bench reports it instead of dying
        rec.stream_error = repr(exc)[:300]


def probe_health(url: str, rec: Recorder) -> None:
    while not rec.stop.is_set():
        started = time.perf_counter()
        try:
            status, _ = h.http_get(url + "health", timeout=5.0)
            if status == 200:
                rec.add(rec.health_s, time.perf_counter() - started)
            else:
                with rec.lock:
                    rec.health_errors[rec.phase] += 1
        except OSError:
            with rec.lock:
                rec.health_errors[rec.phase] += 1
        rec.stop.wait(max(0.0, 0.1 - (time.perf_counter() - started)))


BODIES = ("messages", "deep", "values", "allowed")


def hostile_loop(url: str, cwd: str, rec: Recorder, start: threading.Event, names: list[str]) -> None:
    fixed = {"messages": body_messages(), "deep": body_deep(), "values": body_values()}
    start.wait()
    index = 0
    while not rec.stop.is_set():
        name = names[index % len(names)]
        index += 1
        payload = fixed[name] if name != "allowed" else body_allowed(cwd)
        request = urllib.request.Request(url, data=payload, method="POST", headers={"Content-Type": "application/json"})
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            exc.read()
            status = exc.code
        except OSError as exc:
            status = f"error {type(exc).__name__}"  # type: ignore[assignment]
        elapsed = time.perf_counter() - started
        with rec.lock:
            entry = rec.hostile.setdefault(name, {"bytes": len(payload), "statuses": {}, "seconds": []})
            entry["statuses"][str(status)] = entry["statuses"].get(str(status), 0) + 1
            entry["seconds"].append(elapsed)


# ---- run ---------------------------------------------------------------------------------------------


def _summary(values: list[float], scale: float = 1.0) -> dict[str, Any]:
    return h.summary(values, scale=scale, digits=4)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with h.bridge_on_upstream(
        "hostile",
        lambda log_dir, token: h.Replay(log_dir, token, deltas=5, ping_interval=15.0),
        keep_tmp=args.keep_tmp,
        heartbeat_s=args.heartbeat,
    ) as started:
        bridge, workspace = started.bridge, started.workspace
        rec = Recorder()
        start_hostile = threading.Event()
        threads = [
            threading.Thread(target=hold_stream, args=(bridge.url, str(workspace), args.heartbeat, rec), daemon=True),
            threading.Thread(target=probe_health, args=(bridge.url, rec), daemon=True),
            threading.Thread(
                target=hostile_loop,
                args=(bridge.url, str(workspace), rec, start_hostile, args.bodies.split(",")),
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        h.log(f"hostile: quiet phase {args.quiet} s")
        time.sleep(args.quiet)
        cpu_before = h.cpu_seconds(bridge.pid)
        with rec.lock:
            rec.phase = "hostile"
        start_hostile.set()
        h.log(f"hostile: hostile phase {args.duration} s")
        time.sleep(args.duration)
        cpu_hostile = h.cpu_seconds(bridge.pid) - cpu_before
        rec.stop.set()
        for thread in threads:
            thread.join(150)
        late = {phase: _summary(values) for phase, values in rec.heartbeat_late.items()}
        health = {phase: _summary(values, scale=1000.0) for phase, values in rec.health_s.items()}
        hostile = {
            name: {
                "bytes": entry["bytes"],
                "statuses": entry["statuses"],
                "response_s": _summary(entry["seconds"]),
            }
            for name, entry in sorted(rec.hostile.items())
        }
        late_p99 = late["hostile"].get("p99")
        health_p99_ms = health["hostile"].get("p99")
        return {
            "meta": {
                "date": args.date,
                "command": f"bash bench/run --hostile --duration {args.duration} --heartbeat {args.heartbeat}"
                + ("" if args.bodies == ",".join(BODIES) else f" --bodies {args.bodies}")
                + (f" --hub-watchdog-ms {args.hub_watchdog_ms:g}" if args.hub_watchdog_ms > 0 else ""),
                "cpus": os.cpu_count(),
                "loadavg": h.loadavg(),
                "workers": 1,
                "heartbeat_s": args.heartbeat,
                "quiet_s": args.quiet,
                "hostile_s": args.duration,
                "worker_cpu_s_during_hostile": round(cpu_hostile, 2),
                "stream_error": rec.stream_error,
                "source": h.source_digest(),
            },
            "heartbeat_late_s": late,
            "health_ms": health,
            "health_errors": rec.health_errors,
            "hostile_requests": hostile,
            "targets": {
                "heartbeat_late_p99_s": {
                    "target": f"< {TARGET_HEARTBEAT_LATE_S}",
                    "value": late_p99,
                    "met": late_p99 is not None and late_p99 < TARGET_HEARTBEAT_LATE_S,
                },
                "health_p99_ms": {
                    "target": f"< {TARGET_HEALTH_S * 1000:.0f}",
                    "value": health_p99_ms,
                    "met": health_p99_ms is not None and health_p99_ms < TARGET_HEALTH_S * 1000,
                },
            },
        }


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        f"# Hostile input, {meta['date']}",
        "",
        f"`{meta['command']}`: one gunicorn+gevent worker on the replay upstream, heartbeat "
        f"{meta['heartbeat_s']} s; {meta['quiet_s']} s quiet, then {meta['hostile_s']} s while one client posts "
        f"maximal bodies in a loop. CPUs {meta['cpus']}, load average {meta['loadavg']}; worker CPU during the "
        f"hostile phase {meta['worker_cpu_s_during_hostile']} s.",
        "",
        "| target | goal | value | met |",
        "|---|---|---|---|",
    ]
    for name, target in result["targets"].items():
        lines.append(f"| {name} | {target['target']} | {target['value']} | {'met' if target['met'] else 'NOT met'} |")
    header = "| phase | heartbeat late p50 s | p99 s | max s | n | /health p50 ms | p99 ms | max ms | n | errors |"
    lines += ["", header]
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for phase in ("quiet", "hostile"):
        late, health = result["heartbeat_late_s"][phase], result["health_ms"][phase]
        lines.append(
            f"| {phase} | {late.get('median')} | {late.get('p99')} | {late.get('max')} | {late.get('n')} | "
            f"{health.get('median')} | {health.get('p99')} | {health.get('max')} | {health.get('n')} | "
            f"{result['health_errors'][phase]} |"
        )
    lines += ["", "| hostile body | bytes | statuses | response p50 s | p99 s | n |", "|---|---|---|---|---|---|"]
    for name, entry in result["hostile_requests"].items():
        response = entry["response_s"]
        lines.append(
            f"| {name} | {entry['bytes']} | {entry['statuses']} | {response.get('median')} | {response.get('p99')} | "
            f"{response.get('n')} |"
        )
    if meta["stream_error"]:
        lines += ["", f"The held stream failed: `{meta['stream_error']}`"]
    watchdog = result.get("hub_watchdog") or {}
    lines += h.hub_findings_markdown(watchdog.get("threshold_ms", 0), watchdog.get("findings", []))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of hostile load")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds of baseline before it")
    parser.add_argument("--heartbeat", type=float, default=0.5, help="bridge heartbeat interval (s)")
    parser.add_argument("--date", default=dt.date.today().isoformat())
    parser.add_argument("--out", default=str(h.BENCH_DIR / "results"))
    parser.add_argument("--keep-tmp", action="store_true")
    parser.add_argument("--bodies", default=",".join(BODIES), help=f"comma-separated subset of {', '.join(BODIES)}")
    parser.add_argument(
        "--hub-watchdog-ms", type=float, default=0.0,
        help="run the bridge with the hub watchdog; its reports are findings in the results (0: off)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    h.HUB_WATCHDOG_MS = args.hub_watchdog_ms
    if not h.BENCH_PY.exists():  # run directly with a Python that has the project's requirements
        h.BENCH_PY = Path(sys.executable)
    result = measure(args)
    if args.hub_watchdog_ms > 0:
        result["hub_watchdog"] = {"threshold_ms": args.hub_watchdog_ms, "findings": h.HUB_FINDINGS}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.date}-hostile.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{args.date}-hostile.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if all(t["met"] for t in result["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
