"""How long a SIGKILLed gunicorn worker's connections wait: from the kill to the first answer of its replacement.

Run by hand (not part of `bench/run`): `.venv/bin/python bench/worker_respawn.py [--reps 5] [--workers 1]`.
It starts `agui-bridge serve --workers N` from this checkout (an A2A URL that is never called: `/health` does
not probe it), then, per repetition, SIGKILLs one worker and sends one `GET /health` at once on a new
connection. With one worker nobody else can answer: the request waits in the listening socket's backlog (the
master keeps the socket) until the replacement accepts it, so its latency is the outage a client sees. Also
reported: when the master forked the replacement (its notice of the death included); the rest is the worker's
boot (imports, app). Prints JSON.
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
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def children(pid: int) -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return {int(p) for p in out.split()}


def health(url: str, timeout_s: float) -> bool:
    try:
        with urllib.request.urlopen(url + "health", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until `predicate()` is true (polled every 2 ms), None past the deadline."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.002)
    return None


def boot_logged_at(log: Path, pid: int) -> float:
    """Epoch seconds of gunicorn's "Booting worker with pid: N" (the master logs it right after the fork;
    millisecond timestamps in local time)."""
    for line in log.read_text(errors="replace").splitlines():
        if line.endswith(f"Booting worker with pid: {pid}"):
            stamp = line[:23]  # 2026-12-02 08:36:08,392
            return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:23]) / 1000
    return float("nan")


def stats(values: list[float]) -> dict[str, object]:
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3),
            "all": [round(v, 3) for v in values]}  # fmt: skip


def measure(reps: int, workers: int) -> dict[str, object]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    scratch = Path(tempfile.mkdtemp(prefix="agui-respawn-"))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    args = [sys.executable, "-m", "agui_bridge.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(workers), "--a2a-url", f"http://127.0.0.1:{free_port()}/",
            "--state-dir", str(scratch / "state")]  # fmt: skip
    log_path = scratch / "serve.log"
    with log_path.open("wb") as log:
        master = subprocess.Popen(args, env=env, stdout=log, stderr=log, start_new_session=True)
    answered: list[float] = []
    forked: list[float] = []
    try:
        if wait_until(lambda: health(url, 0.5), 60) is None:
            raise SystemExit(f"serve did not answer: {log_path.read_text()[-2000:]}")
        for _ in range(reps):
            if wait_until(lambda: len(children(master.pid)) == workers, 30) is None:
                raise SystemExit("workers did not settle")
            before = children(master.pid)
            victim = min(before)
            killed_wall, killed_at = time.time(), time.monotonic()
            os.kill(victim, signal.SIGKILL)
            if not health(url, 60):
                raise SystemExit("no answer after the kill")
            answered.append(time.monotonic() - killed_at)
            (replacement,) = children(master.pid) - before
            forked.append(boot_logged_at(log_path, replacement) - killed_wall)
            time.sleep(1.0)  # the replacement settles before the next kill
    finally:
        os.killpg(master.pid, signal.SIGTERM)
        master.wait(30)
    return {
        "workers": workers,
        "first_answer_after_kill_s": stats(answered),
        "replacement_forked_after_kill_s": stats(forked),
        "cpus": os.cpu_count(),
        "loadavg": [round(v, 2) for v in os.getloadavg()],
        "log": str(log_path),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    options = parser.parse_args()
    print(json.dumps(measure(options.reps, options.workers), indent=2))


if __name__ == "__main__":
    main()
