"""How fast a worker and a server are ready (section `boot`): the worker-ready and serve-ready targets.

* worker ready: `agui-bridge serve --workers 1` on the replay upstream; SIGKILL its worker, then one `GET /health`
  on a new connection at once (it waits in the listen backlog the master keeps). Measured: kill -> answer (the
  master's notice included) and fork -> answer (the new worker's start time from /proc, 10 ms resolution).
  With one worker nothing else can answer.
* serve ready: `agui-bridge serve` from the process start to its first `/health` answer, on the replay upstream
  (`--a2a-url`) and with the managed demo agent (what `scripts/serve` runs), a warm install (the bench venv and
  the page cache are warm after the first start).
* worker import: `python -c "import wsgi"` wall time, the part of a worker's start that is the bridge's own.

Every probe connects until the port accepts (10 ms apart), then waits for the answer: the figure is when a
client would have had its answer, not when a poll happened to land.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from typing import Any

import harness as h

#: Targets: a new worker answers within this many seconds of its fork, `serve` within this of its start.
WORKER_READY_GOAL_S = 1.0
#: ... and a SIGKILLed worker's connections get their first answer within this many seconds of the kill (the
#: master's notice of the death, its fork of the replacement and the replacement's start).
KILL_READY_GOAL_S = 1.5
SERVE_READY_GOAL_S = 3.0
FULL = {"kill_reps": 10, "serve_reps": 5, "import_reps": 5}
QUICK = {"kill_reps": 3, "serve_reps": 2, "import_reps": 3}


def boottime() -> float:
    """Seconds since boot, the clock of /proc/<pid>/stat's start time."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def started_at(pid: int) -> float:
    """A process's start (its fork), seconds since boot (clock-tick resolution)."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().decode("ascii", "replace").rpartition(")")[2].split()
    return int(fields[19]) / h.CLK_TCK  # field 22, starttime


def first_health(port: int, timeout_s: float = 60.0) -> float:
    """Connect until the port accepts, send `GET /health`, wait for a 200; returns the boottime of the answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        except OSError:
            time.sleep(0.01)
            continue
        with sock:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                head = sock.recv(64)
            except OSError:
                head = b""
            answered = boottime()
        if head.startswith(b"HTTP/1.1 200"):
            return answered
        time.sleep(0.01)  # refused by a worker that was stopping, or reset: try again
    raise RuntimeError(f"no /health answer on port {port} within {timeout_s} s")


def _metric(values: list[float]) -> dict[str, Any]:
    vals = [round(v, 3) for v in values]
    return {"median": h.percentile(vals, 50), "p99": h.percentile(vals, 99), "values": vals}


def worker_ready(bench: Any, replay: h.Replay, reps: int) -> dict[str, Any]:
    """SIGKILL the only worker `reps` times; kill -> answer and fork -> answer of each replacement."""
    name = "bridge-boot-worker"
    bridge = bench.track(
        h.Bridge(
            bench.logs,
            name,
            a2a_url=replay.url,
            a2a_token=bench.token,
            state_dir=bench.state_dir(name),
            cwd_root=bench.cwd_root,
            workers=1,
        )
    )
    kill_to_answer: list[float] = []
    fork_to_answer: list[float] = []
    try:
        bench.warm(bridge.port)
        for i in range(reps):
            (victim,) = h.children(bridge.proc.pid) or [bridge.pid]
            killed = boottime()
            os.kill(victim, signal.SIGKILL)
            answered = first_health(bridge.port)
            new = [pid for pid in h.children(bridge.proc.pid) if pid != victim]
            if not new:
                raise RuntimeError("the master has no new worker although /health answered")
            kill_to_answer.append(answered - killed)
            fork_to_answer.append(answered - started_at(new[0]))
            h.log(f"boot: worker {i + 1}/{reps}: kill -> answer {kill_to_answer[-1]:.3f} s")
    finally:
        bench.stop(bridge)
    return {
        "command": bridge.command,
        "kill_to_answer_s": _metric(kill_to_answer),
        "fork_to_answer_s": _metric(fork_to_answer),
    }


def serve_ready(bench: Any, a2a_url: str | None, reps: int) -> dict[str, Any]:
    """Start `agui-bridge serve --workers 1` `reps` times; process start -> first /health answer."""
    label = "replay" if a2a_url else "demo"
    times: list[float] = []
    command = ""
    for i in range(reps):
        port = h.free_port()
        args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        args += ["--state-dir", str(bench.state_dir(f"boot-serve-{label}"))]
        extra = {"IAC_CODE_AGUI_ALLOWED_CWDS": str(bench.cwd_root), "IAC_CODE_AGUI_LOG_LEVEL": "warning"}
        if a2a_url:
            args += ["--a2a-url", a2a_url]
            extra["IAC_CODE_AGUI_A2A_TOKEN"] = bench.token
        command = " ".join(["agui-bridge", *args[:-2], "--state-dir", "DIR"])
        started = boottime()
        proc = h.Proc(
            f"boot-serve-{label}-{i}",
            [str(h.BENCH_PY), "-m", "agui_bridge.cli", *args],
            env=h.base_env(extra),
            cwd=bench.cwd_root,
            log_dir=bench.logs,
        )
        try:
            times.append(first_health(port) - started)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {proc.tail()}") from None
        finally:
            proc.stop()
        h.log(f"boot: serve ({label}) {i + 1}/{reps}: start -> /health {times[-1]:.3f} s")
    return {"command": command, "start_to_health_s": _metric(times)}


def import_time(reps: int) -> dict[str, Any]:
    """`python -c "import wsgi"`: the bridge's import, app built, as a worker does it after its fork."""
    env = h.base_env({"IAC_CODE_AGUI_A2A_URL": "http://127.0.0.1:9/"})
    times: list[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run([str(h.BENCH_PY), "-c", "import wsgi"], env=env, cwd=h.REPO_ROOT, check=True, timeout=120)
        times.append(time.perf_counter() - t0)
    return {"command": 'python -c "import wsgi"', "wall_s": _metric(times)}


def section_boot(bench: Any, replay: h.Replay) -> dict[str, Any]:
    cfg = QUICK if bench.args.quick else FULL
    out: dict[str, Any] = {"cpus": os.cpu_count(), "loadavg_start": h.loadavg(), **cfg}
    out["import"] = import_time(cfg["import_reps"])
    out["worker"] = worker_ready(bench, replay, cfg["kill_reps"])
    out["serve_replay"] = serve_ready(bench, replay.url, cfg["serve_reps"])
    out["serve_demo"] = serve_ready(bench, None, cfg["serve_reps"])
    out["loadavg_end"] = h.loadavg()
    return out


def targets(res: dict[str, Any]) -> list[tuple[str, str, float | None, bool | None, str, str]]:
    """(name, goal, measured, met, unit, note) of the boot targets; empty when the section did not run."""
    boot = res.get("boot")
    if not isinstance(boot, dict):
        return []
    fork = (boot.get("worker") or {}).get("fork_to_answer_s", {}).get("median")
    kill = (boot.get("worker") or {}).get("kill_to_answer_s", {}).get("median")
    demo = (boot.get("serve_demo") or {}).get("start_to_health_s", {}).get("median")
    replay = (boot.get("serve_replay") or {}).get("start_to_health_s", {}).get("median")
    return [
        (
            "a new worker answers /health after its fork",
            f"<= {WORKER_READY_GOAL_S} s",
            fork,
            None if fork is None else fork <= WORKER_READY_GOAL_S,
            "s",
            "the replacement's fork read from /proc (10 ms resolution)",
        ),
        (
            "a SIGKILLed worker's replacement answers /health after the kill",
            f"<= {KILL_READY_GOAL_S} s",
            kill,
            None if kill is None else kill <= KILL_READY_GOAL_S,
            "s",
            "measured from the SIGKILL, the master's notice included",
        ),
        (
            "agui-bridge serve (managed demo agent) answers its first /health",
            f"<= {SERVE_READY_GOAL_S} s",
            demo,
            None if demo is None else demo <= SERVE_READY_GOAL_S,
            "s",
            f"with --a2a-url: {replay} s",
        ),
    ]


def markdown(boot: dict[str, Any]) -> list[str]:
    def m(metric: dict[str, Any] | None) -> str:
        if not metric or metric.get("median") is None:
            return "n/a"
        med, p99 = metric["median"], metric["p99"]
        return f"{med:.2f}" if med == p99 else f"{med:.2f} ({p99:.2f})"

    worker = boot.get("worker") or {}
    return [
        "",
        "## Boot (`boot`)",
        "",
        f"{boot.get('cpus')} CPUs, load average {boot.get('loadavg_start')} at start, {boot.get('loadavg_end')} at "
        f"end. Seconds, median (p99). Worker: `{worker.get('command', 'n/a')}`, its worker SIGKILLed "
        f"{boot.get('kill_reps')} times, one `GET /health` sent at once; serve: {boot.get('serve_reps')} starts each.",
        "",
        "| measurement | s |",
        "|---|---|",
        f"| worker: fork -> first /health answer | {m(worker.get('fork_to_answer_s'))} |",
        f"| worker: SIGKILL -> first /health answer | {m(worker.get('kill_to_answer_s'))} |",
        f"| `agui-bridge serve --a2a-url ...`: start -> first /health | "
        f"{m((boot.get('serve_replay') or {}).get('start_to_health_s'))} |",
        f"| `agui-bridge serve` (managed demo agent): start -> first /health | "
        f"{m((boot.get('serve_demo') or {}).get('start_to_health_s'))} |",
        f'| `python -c "import wsgi"` | {m((boot.get("import") or {}).get("wall_s"))} |',
    ]
