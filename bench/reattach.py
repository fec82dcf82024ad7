"""Reattach benchmark: short, for a shared machine. Run by hand, never by the test suite.

    .venv/bin/python bench/reattach.py [--workers 4] [--out bench/results]

Against the demo agent and `agui-bridge serve` with 4 gevent workers it measures:

* reattach latency: from sending `GET .../events` to the first replayed event, for finished runs and
  for live runs (p50/p99);
* follower lag: how long after the run's own client sees an event a follower (a reattach on a new
  connection, so usually another worker) sees it; p99 target < 100 ms;
* throughput with recording on vs off: `[LONG n]` runs streamed concurrently, events per second
  (recording on must stay within 10 % of off).

Writes `<out>/<date>-reattach.json` and `.md`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agui_bridge.demo.testing import free_port, running_demo_agent  # noqa: E402
from agui_bridge.protocol.sse_parser import SseParser  # noqa: E402

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "bench"
TOKEN = "bench-token"


@contextlib.contextmanager
def bridge(a2a_url: str, root: Path, workers: int, **options: Any) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_")}
    env |= {"IAC_CODE_AGUI_A2A_TOKEN": TOKEN, "IAC_CODE_AGUI_ALLOWED_CWDS": str(root), "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "agui_bridge.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--a2a-url", a2a_url, "--state-dir", str(root / f"state-{port}"), "--workers", str(workers)]
    args += ["--log-level", "warning", "--metrics", "false"]
    for name, value in options.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    log = (root / f"bridge-{port}.log").open("ab")
    process = subprocess.Popen(args, env=env, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException):
                if requests.get(url + "/health", timeout=0.5).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("bridge did not start")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def body(text: str, root: Path) -> dict[str, Any]:
    return {
        "threadId": str(uuid.uuid4()),
        "runId": f"run-{uuid.uuid4()}",
        "state": {},
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": ROS, "cwd": str(root)}},
    }


def event_times(response: requests.Response) -> dict[int, float]:
    """When each event id arrived (monotonic), read as the bytes come."""
    seen: dict[int, float] = {}
    parser = SseParser()
    for chunk in response.iter_content(chunk_size=None):
        now = time.monotonic()
        for message in parser.feed(chunk):
            if message.event_id is not None:
                seen[int(message.event_id)] = now
    return seen


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p99_ms": round(pct(ms, 0.99), 2),
            "mean_ms": round(statistics.fmean(ms), 2)}  # fmt: skip


def reattach_latency(url: str, root: Path, runs: int) -> dict[str, Any]:
    finished: list[float] = []
    for _ in range(runs):
        b = body("list files with a tool", root)
        requests.post(url + "/", json=b, timeout=30).content  # noqa: B018 - read it all
        started = time.monotonic()
        with requests.get(url + EVENTS.format(b["threadId"], b["runId"]), params={"rosInvocationId": ROS},
                          stream=True, timeout=30) as response:  # fmt: skip
            next(response.iter_content(chunk_size=None))
            finished.append(time.monotonic() - started)
    live: list[float] = []
    for _ in range(max(10, runs // 5)):
        b = body("slow [SLOW 0.6]", root)
        owner = requests.post(url + "/", json=b, stream=True, timeout=30)
        next(owner.iter_content(chunk_size=None))
        started = time.monotonic()
        with requests.get(url + EVENTS.format(b["threadId"], b["runId"]), params={"rosInvocationId": ROS},
                          stream=True, timeout=30) as response:  # fmt: skip
            next(response.iter_content(chunk_size=None))
            live.append(time.monotonic() - started)
        owner.content  # noqa: B018
        owner.close()
    return {"finished": summary(finished), "live": summary(live)}


def follower_lag(url: str, root: Path, runs: int) -> dict[str, Any]:
    lags: list[float] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        b = body("slow [SLOW 1.5]", root)
        owner = requests.post(url + "/", json=b, stream=True, timeout=30)
        follower = requests.get(url + EVENTS.format(b["threadId"], b["runId"]), params={"rosInvocationId": ROS},
                                stream=True, timeout=30)  # fmt: skip
        with ThreadPoolExecutor(2) as pool:
            owner_times = pool.submit(event_times, owner)
            follower_times = pool.submit(event_times, follower)
            shown, followed = owner_times.result(), follower_times.result()
        with lock:
            # only events produced after the follower attached (the backlog is not lag)
            first_live = min(followed) if followed else 0
            lags.extend(followed[i] - shown[i] for i in shown if i in followed and i > first_live)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(runs)))
    return {"lag": summary([max(0.0, lag) for lag in lags]), "target_p99_ms": 100}


def throughput(a2a_url: str, root: Path, workers: int, clients: int, rounds: int, deltas: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for label, max_bytes in (("off", 0), ("on", 64 * 1024 * 1024), ("off-2", 0), ("on-2", 64 * 1024 * 1024)):
        with bridge(a2a_url, root, workers, reattach_max_bytes=max_bytes) as url:

            def client(_: int) -> int:
                count = 0
                for _ in range(rounds):
                    with requests.post(url + "/", json=body(f"[LONG {deltas}]", root), stream=True,
                                       timeout=120) as response:  # fmt: skip
                        parser = SseParser()  # events only: heartbeats are not counted
                        count += sum(len(parser.feed(chunk)) for chunk in response.iter_content(chunk_size=None))
                return count

            client(0)  # warm-up
            started = time.monotonic()
            with ThreadPoolExecutor(clients) as pool:
                events = sum(pool.map(client, range(clients)))
            elapsed = time.monotonic() - started
            results[label] = {"events": events, "seconds": round(elapsed, 3), "events_per_s": round(events / elapsed)}
    off = (results["off"]["events_per_s"] + results["off-2"]["events_per_s"]) / 2
    on = (results["on"]["events_per_s"] + results["on-2"]["events_per_s"]) / 2
    results["on_vs_off"] = round(on / off, 3)
    results["target"] = "on within 10 % of off (on_vs_off >= 0.90)"
    return results


def emitter_cost(events: int = 200_000, batch: int = 32) -> dict[str, Any]:
    """CPU per shown event in the emitter with and without the run record (the bridge's own cost; the
    demo agent bounds the end-to-end case above)."""
    from agui_bridge.protocol import events as ev
    from agui_bridge.reattach.format import RecordHead
    from agui_bridge.reattach.record import RunRecord
    from agui_bridge.runs.emit import Emitter
    from agui_bridge.runs.observer import NULL_OBSERVER

    batches = [[ev.text_content("m", f"delta {i} of a streamed answer ") for i in range(batch)]] * (events // batch)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="agui-bench-emit-") as tmp:
        for label in ("off", "on", "off-2", "on-2"):
            sink = None
            if label.startswith("on"):
                head = RecordHead("t", f"r-{label}", "x", "o", 0)
                sink = RunRecord(Path(tmp), head, max_bytes=1 << 40)
            emitter = Emitter(NULL_OBSERVER, sink)
            started = time.process_time()
            for chunk in batches:
                emitter.events(chunk)
            out[label] = round((time.process_time() - started) / events * 1e6, 3)
    off = (out["off"] + out["off-2"]) / 2
    on = (out["on"] + out["on-2"]) / 2
    return {"cpu_us_per_event": out, "on_vs_off_cost": round(on / off, 3), "batch": batch}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = parser.parse_args()
    date = datetime.date.today().isoformat()
    with tempfile.TemporaryDirectory(prefix="agui-bench-reattach-") as tmp, running_demo_agent(TOKEN) as a2a_url:
        root = Path(tmp)
        with bridge(a2a_url, root, args.workers, reattach_window=30) as url:
            latency = reattach_latency(url, root, args.runs)
            lag = follower_lag(url, root, max(8, args.runs // 5))
        rate = throughput(a2a_url, root, args.workers, clients=8, rounds=3, deltas=2000)
    emit = emitter_cost()
    report = {
        "date": date,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "reattach_latency": latency,
        "follower_lag": lag,
        "throughput": rate,
        "emitter_cost": emit,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{date}-reattach.json").write_text(json.dumps(report, indent=2) + "\n")
    md = [
        f"# Reattach benchmark {date} ({args.workers} gevent workers, demo agent, {os.cpu_count()} shared CPUs)",
        "",
        "| measure | n | p50 ms | p99 ms |",
        "|---|---|---|---|",
        "| reattach to first replayed event, finished run | {n} | {p50_ms} | {p99_ms} |".format(**latency["finished"]),
        "| reattach to first replayed event, live run | {n} | {p50_ms} | {p99_ms} |".format(**latency["live"]),
        "| follower lag behind the run's own client (target p99 < 100) | {n} | {p50_ms} | {p99_ms} |".format(
            **lag["lag"]
        ),
        "",
        "| throughput (`[LONG 2000]`, 8 clients x 3 runs) | events/s |",
        "|---|---|",
        *(f"| recording {label} | {rate[label]['events_per_s']} |" for label in ("off", "on", "off-2", "on-2")),
        f"| on / off | {rate['on_vs_off']} |",
        "",
        f"| emitter CPU per event (batches of {emit['batch']}) | us |",
        "|---|---|",
        *(f"| recording {label} | {emit['cpu_us_per_event'][label]} |" for label in ("off", "on", "off-2", "on-2")),
        f"| on / off | {emit['on_vs_off_cost']} |",
        "",
    ]
    (out / f"{date}-reattach.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
