"""Process management and /proc measurements for the bench (stdlib only).

Every process started here gets its own session (process group) and is stopped by that group id
only: nothing is ever killed by name.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
#: The checkout whose agui_bridge is measured (PYTHONPATH of every bridge/demo/state process); another
#: checkout (e.g. a branch with a proposed patch) can be measured with BENCH_REPO_ROOT=/path/to/it.
REPO_ROOT = Path(os.environ.get("BENCH_REPO_ROOT") or BENCH_DIR.parent).resolve()
BENCH_PY = BENCH_DIR / ".venv" / "bin" / "python"
REF_VENV = BENCH_DIR / ".venv-ref"
REF_PY = REF_VENV / "bin" / "python"
REF_CLI = REF_VENV / "bin" / "iac-code"
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: `--hub-watchdog-ms` of every bridge the bench starts (0: off); bench.py and hostile.py set it from their
#: own --hub-watchdog-ms option.
HUB_WATCHDOG_MS = 0.0
#: What the watchdog reported in each bridge, read from its log when it stops: findings, not failures.
HUB_FINDINGS: list[dict[str, Any]] = []
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


# ---- statistics ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default); None for no values."""
    data = sorted(v for v in values if v is not None and not math.isnan(v))
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> dict[str, Any]:
    vals = [v * scale for v in values if v is not None]
    if not vals:
        return {"n": 0}

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)

    return {
        "n": len(vals),
        "median": r(percentile(vals, 50)),
        "p99": r(percentile(vals, 99)),
        "min": r(min(vals)),
        "max": r(max(vals)),
    }


def ratio(a: float | None, b: float | None, digits: int = 3) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, digits)


# ---- /proc -------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read().decode("ascii", "replace")
    fields = raw.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * PAGE_KIB


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out.extend(int(p) for p in fh.read().split())
    return out


def socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    fd_dir = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                target = os.readlink(f"{fd_dir}/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def established_to_port(pid: int, remote_port: int) -> int:
    """ESTABLISHED TCP sockets owned by `pid` whose remote port is `remote_port` (/proc/<pid>/net/tcp*)."""
    inodes = socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as fh:
            next(fh)
            for line in fh:
                parts = line.split()
                if parts[3] != "01":  # ESTABLISHED
                    continue
                if int(parts[2].rsplit(":", 1)[1], 16) != remote_port:
                    continue
                if int(parts[9]) in inodes:
                    count += 1
    return count


def open_fds(pid: int) -> int:
    with contextlib.suppress(OSError):
        return len(os.listdir(f"/proc/{pid}/fd"))
    return -1


def loadavg() -> list[float]:
    with open("/proc/loadavg") as fh:
        return [float(x) for x in fh.read().split()[:3]]


# ---- processes -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 2.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def runs_let_go(url: str, timeout: float = 10.0) -> float | None:
    """Runs a bridge has let go of, from its `/metrics`: ended (any outcome) plus detached (their client
    left and the reattach window started). None when `/metrics` does not answer."""
    try:
        status, body = http_get(url.rstrip("/") + "/metrics", timeout=timeout)
    except OSError:
        return None
    if status != 200:
        return None
    total = 0.0
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith(("agui_runs_detached_total ", "agui_runs_total{")):
            total += float(line.rsplit(" ", 1)[-1])
    return total


class Proc:
    """A child process in its own session, logged to a file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: Path,
        log_dir: Path,
        pipe_stdout: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self.log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv,
            env=env,
            cwd=str(cwd),
            stdout=subprocess.PIPE if pipe_stdout else self.log,
            stderr=self.log,
            start_new_session=True,
        )
        self.pid = self.popen.pid

    def read_line(self, prefix: str, timeout: float) -> str:
        """Wait for a stdout line starting with `prefix` (then stdout is drained to the log)."""
        assert self.popen.stdout is not None
        deadline = time.monotonic() + timeout
        os.set_blocking(self.popen.stdout.fileno(), False)
        buf = b""
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                break
            chunk = self.popen.stdout.read()
            if chunk:
                buf += chunk
                for line in buf.decode(errors="replace").splitlines():
                    if line.startswith(prefix):
                        self._drain_stdout()
                        return line
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no {prefix!r} line; log: {self.tail()}")

    def _drain_stdout(self) -> None:
        import threading

        def pump() -> None:
            assert self.popen.stdout is not None
            os.set_blocking(self.popen.stdout.fileno(), True)
            for data in iter(lambda: self.popen.stdout.read1(65536), b""):  # type: ignore[union-attr]
                self.log.write(data)

        threading.Thread(target=pump, daemon=True).start()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = 3000) -> str:
        with contextlib.suppress(OSError):
            self.log.flush()
            return self.log_path.read_text(errors="replace")[-n:]
        return ""

    def stop(self, timeout: float = 30.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait(10)
        else:
            # the leader is gone; its group may still have members (e.g. a gunicorn worker)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self.log.close()


def wait_health(url: str, proc: Proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited: {proc.tail()}")
        with contextlib.suppress(OSError):
            status, _ = http_get(url, timeout=1.0)
            if status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} not healthy after {timeout}s: {proc.tail()}")


def base_env(extra: dict[str, str] | None = None, *, with_repo: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IAC_CODE_AGUI_", "IACCODE_A2A_"))}
    env.pop("PYTHONPATH", None)
    if with_repo:
        env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class Replay:
    def __init__(
        self, log_dir: Path, token: str, *, deltas: int, ping_interval: float = 15.0, hold_max: float = 600.0
    ) -> None:
        self.stats_file = log_dir / "replay-stats.json"
        argv = [
            str(BENCH_PY),
            str(BENCH_DIR / "replay_upstream.py"),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--deltas",
            str(deltas),
            "--ping-interval",
            str(ping_interval),
            "--hold-max",
            str(hold_max),
            "--stats-file",
            str(self.stats_file),
        ]
        self.proc = Proc(
            "replay-upstream",
            argv,
            env=base_env({"IACCODE_A2A_HTTP_TOKEN": token}, with_repo=False),
            cwd=BENCH_DIR,
            log_dir=log_dir,
            pipe_stdout=True,
        )
        self.port = int(self.proc.read_line("READY", 60).split()[1])
        self.url = f"http://127.0.0.1:{self.port}/"
        self.token = token
        self.pid = self.proc.pid

    def stats(self) -> dict[str, int]:
        """The upstream's counters (written every 0.5 s): requests, streams, held_now, held_max, cancels."""
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(self.stats_file.read_text()))
        return {}

    def stop(self) -> None:
        self.proc.stop()


def fsync_probe(directory: Path, n: int = 40) -> dict[str, Any]:
    """The disk right now: 2 KiB temp file + fsync + rename + directory fsync, n times (ms)."""
    directory.mkdir(parents=True, exist_ok=True)
    payload = os.urandom(1024).hex().encode()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fd, tmp = tempfile.mkstemp(dir=directory)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / "probe")
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        times.append((time.perf_counter() - t0) * 1000)
    return {"n": n, "p50_ms": round(percentile(times, 50) or 0, 3), "p99_ms": round(percentile(times, 99) or 0, 3)}


class Demo:
    def __init__(self, log_dir: Path, token: str) -> None:
        self.port = free_port()
        argv = [str(BENCH_PY), "-m", "agui_bridge.demo", "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = Proc(
            "demo-agent", argv, env=base_env({"IACCODE_A2A_HTTP_TOKEN": token}), cwd=BENCH_DIR, log_dir=log_dir
        )
        self.url = f"http://127.0.0.1:{self.port}/"
        self.token = token
        self.pid = self.proc.pid
        wait_health(self.url + "health", self.proc)

    def stop(self) -> None:
        self.proc.stop()


class Bridge:
    """`agui-bridge serve` (gunicorn + gevent workers) against an external A2A URL."""

    def __init__(
        self,
        log_dir: Path,
        name: str,
        *,
        a2a_url: str,
        a2a_token: str,
        state_dir: Path,
        cwd_root: Path,
        workers: int = 1,
        heartbeat_s: float | None = None,
        worker_connections: int | None = None,
        max_active_runs: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = base_env(
            {
                "IAC_CODE_AGUI_A2A_TOKEN": a2a_token,
                "IAC_CODE_AGUI_ALLOWED_CWDS": str(cwd_root),
                "IAC_CODE_AGUI_LOG_LEVEL": "warning",
                **(extra_env or {}),
            }
        )
        args = [
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--a2a-url",
            a2a_url,
            "--state-dir",
            str(state_dir),
            "--workers",
            str(workers),
        ]
        if heartbeat_s is not None:
            args += ["--heartbeat-interval", repr(heartbeat_s)]
        if max_active_runs is not None:
            args += ["--max-active-runs", str(max_active_runs)]
        if HUB_WATCHDOG_MS > 0:
            args += ["--hub-watchdog-ms", repr(HUB_WATCHDOG_MS)]
        self.name = name
        shown = list(args)
        if worker_connections is not None:  # gunicorn's pool size: an environment variable only
            env["IAC_CODE_AGUI_WORKER_CONNECTIONS"] = str(worker_connections)
            shown.insert(0, f"IAC_CODE_AGUI_WORKER_CONNECTIONS={worker_connections}")
        self.command = (
            " ".join(["agui-bridge", *shown])
            if worker_connections is None
            else " ".join([shown[0], "agui-bridge", *shown[1:]])
        )
        argv = [str(BENCH_PY), "-m", "agui_bridge.cli", *args]
        self.proc = Proc(name, argv, env=env, cwd=cwd_root, log_dir=log_dir)
        wait_health(self.url + "health", self.proc)
        self.workers = self._workers(workers)
        self.pid = self.workers[0]

    def _workers(self, n: int) -> list[int]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pids = children(self.proc.pid)
            if len(pids) >= n:
                return pids
            time.sleep(0.1)
        raise RuntimeError("gunicorn workers not found")

    def stop(self) -> None:
        self.proc.stop()
        if HUB_WATCHDOG_MS > 0:
            record_hub_findings(self.name, self.proc.log_path)


@dataclass
class BridgeOnUpstream:
    """What `bridge_on_upstream` started, and where: `workspace` is the bridge's allowed cwd root."""

    tmp: Path
    workspace: Path
    upstream: Demo | Replay
    bridge: Bridge


@contextlib.contextmanager
def bridge_on_upstream(
    name: str,
    upstream: Callable[[Path, str], Demo | Replay],
    *,
    keep_tmp: bool,
    **bridge_options: Any,
) -> Iterator[BridgeOnUpstream]:
    """One bridge worker (`Bridge` named bridge-`name`, `bridge_options` passed on) on the upstream that
    `upstream(log_dir, a2a_token)` starts, both requiring a random bearer token, in a temporary directory of
    their own (logs/, work/, state/). On the way out both are stopped and the directory removed (kept, and
    said, with `keep_tmp`)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"agui-bench-{name}-"))
    log_dir = tmp / "logs"
    log_dir.mkdir()
    workspace = tmp / "work"
    workspace.mkdir()
    a2a_token = secrets.token_urlsafe(16)
    started: Demo | Replay | None = None
    bridge = None
    try:
        started = upstream(log_dir, a2a_token)
        bridge = Bridge(
            log_dir,
            f"bridge-{name}",
            a2a_url=started.url,
            a2a_token=a2a_token,
            state_dir=tmp / "state",
            cwd_root=workspace,
            workers=1,
            **bridge_options,
        )
        yield BridgeOnUpstream(tmp, workspace, started, bridge)
    finally:
        if bridge is not None:
            bridge.stop()
        if started is not None:
            started.stop()
        if keep_tmp:
            log(f"{name}: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def record_hub_findings(name: str, log_path: Path) -> None:
    """Each hub watchdog report in a stopped bridge's log becomes a finding (printed and kept in HUB_FINDINGS)."""
    sys.path.insert(0, str(REPO_ROOT))
    from agui_bridge.worker.hub_watchdog import logged_reports

    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    for report in logged_reports(text):
        stack = report.stack.splitlines()[-12:]  # the innermost frames name the blocking code
        HUB_FINDINGS.append(
            {"bridge": name, "blocked_ms": report.blocked_ms, "blocked_since": report.blocked_since, "stack": stack}
        )
        log(f"hub watchdog FINDING in {name}: blocked for at least {report.blocked_ms} ms at\n" + "\n".join(stack))


def hub_findings_markdown(threshold_ms: float, findings: list[dict[str, Any]]) -> list[str]:
    """The results' section on the hub watchdog (empty when it was off)."""
    if threshold_ms <= 0:
        return []
    lines = ["", f"## Hub watchdog ({threshold_ms:g} ms): {len(findings)} finding(s)", ""]
    for finding in findings:
        lines += [f"* {finding['bridge']}: at least {finding['blocked_ms']} ms", "", "```", *finding["stack"], "```"]
    return lines


def bridge_config(a2a_url: str) -> Any:
    """`agui-bridge config show --json` for a bench bridge (effective defaults, secrets masked)."""
    out = subprocess.run(
        [str(BENCH_PY), "-m", "agui_bridge.cli", "config", "show", "--json", "--a2a-url", a2a_url],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": (out.stderr or out.stdout)[-500:]}


def source_digest() -> dict[str, Any]:
    """sha256 over agui_bridge/**/*.py of this checkout: which code was measured (no VCS needed)."""
    import hashlib

    digest = hashlib.sha256()
    files = sorted((REPO_ROOT / "agui_bridge").rglob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return {"root": str(REPO_ROOT), "files": len(files), "sha256": digest.hexdigest()[:16]}


class Reference:
    """`iac-code agui --a2a-url URL` (uvicorn, one process) from bench/.venv-ref.

    `heartbeat_s` set: bench/ref_serve.py (same run_server, with the module's fixed 15 s heartbeat
    patched so idle runs are comparable with the bridge's shortened one).
    """

    def __init__(
        self,
        log_dir: Path,
        name: str,
        *,
        a2a_url: str,
        a2a_token: str,
        state_dir: Path,
        cwd_root: Path,
        heartbeat_s: float | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = base_env(
            {"IAC_CODE_AGUI_A2A_TOKEN": a2a_token, "IAC_CODE_AGUI_ALLOWED_CWDS": str(cwd_root)}, with_repo=False
        )
        args = ["--host", "127.0.0.1", "--port", str(self.port), "--a2a-url", a2a_url, "--state-dir", str(state_dir)]
        if heartbeat_s is not None:
            env["BENCH_REF_HEARTBEAT_S"] = repr(heartbeat_s)
            argv = [str(REF_PY), str(BENCH_DIR / "ref_serve.py"), *args]
            self.command = " ".join(["bench/ref_serve.py", *args])
        else:
            argv = [str(REF_CLI), "agui", *args]
            self.command = " ".join(["iac-code agui", *args])
        self.proc = Proc(name, argv, env=env, cwd=cwd_root, log_dir=log_dir)
        wait_health(self.url + "health", self.proc, timeout=90)
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.stop()


def reference_status() -> dict[str, Any]:
    """Whether bench/run installed the reference adapter; the reason if not."""
    status_file = BENCH_DIR / ".venv-ref.status"
    if status_file.exists():
        with contextlib.suppress(ValueError):
            return dict(json.loads(status_file.read_text()))
    if REF_CLI.exists():
        return {"installed": True}
    return {"installed": False, "reason": "bench/.venv-ref/bin/iac-code missing (bench/run did not install it)"}


def run_json(argv: Sequence[str], *, env: dict[str, str], timeout: float, cwd: Path = BENCH_DIR) -> Any:
    out = subprocess.run(
        list(argv), env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"{argv[1] if len(argv) > 1 else argv[0]} failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


Version = tuple[str, Path]


def parse_versions(specs: Sequence[str]) -> list[Version]:
    """`NAME=DIR` options of the hand-run A/B tools (DIR holds an `agui_bridge/`), as (name, resolved dir)."""
    return [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in specs]


def alternated(versions: Sequence[Version], round_index: int) -> Sequence[Version]:
    """The A/B order of one round: reversed every other round, so drift in the machine's load hits each alike."""
    return versions if round_index % 2 == 0 else versions[::-1]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def first(values: Iterable[Any]) -> Any:
    return next(iter(values), None)
