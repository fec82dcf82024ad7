"""`agui-bridge doctor`: check a deployment as `serve` would see it, before it takes traffic.

Each check gives one line: what was found and, when it failed, how to fix it. The exit status is 0
only when every check passed. Nothing is changed (the writability probe removes its own file) and
no secret is printed: tokens are only said to be set or not.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from agui_bridge.config.loopback import is_loopback_host
from agui_bridge.kernel.outgoing import direct_session

#: Room a state directory should keep: thread files are small, but a full disk fails closed.
MIN_FREE_BYTES = 64 * 1024 * 1024
MIN_FREE_INODES = 1000
#: Interrupt expiry compares wall clocks across workers (and hosts sharing a state directory).
MAX_CLOCK_SKEW_S = 30.0
#: A wall clock before this is certainly wrong (an unset RTC, a container without time sync).
CLOCK_FLOOR = 1735689600.0  # 2025-01-01T00:00:00Z
#: How many state entries the clock check looks at (stat only).
MAX_STATE_ENTRIES = 10_000
PROBE_TIMEOUT_S = 5.0
#: A2A 1.0 answers GetTask for an unknown id with TaskNotFound; -32009 means "not the 1.0 dialect".
TASK_NOT_FOUND = -32001
VERSION_NOT_SUPPORTED = -32009
METHOD_NOT_FOUND = -32601


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Target:
    """What `serve` would run with, from the resolved configuration (flags > env > YAML > defaults)."""

    host: str
    state_dir: Path
    allowed_cwds: str | None
    auth_token: str | None
    a2a_url: str | None
    a2a_token: str | None
    managed_a2a: str
    #: the --config file when a token came from it (its mode is checked), else None
    secret_file: Path | None = None


def target_from(resolved: Mapping[str, Any], state_dir: Path, secret_file: Path | None = None) -> Target:
    roots = resolved["allowed_cwds"]
    return Target(
        host=str(resolved["host"]),
        state_dir=state_dir,
        allowed_cwds=None if roots is None else str(roots),
        auth_token=resolved["auth_token"],
        a2a_url=resolved["a2a_url"],
        a2a_token=resolved["a2a_token"],
        managed_a2a=str(resolved["managed_a2a"]),
        secret_file=secret_file,
    )


# ------------------------------------------------------------------------------------ state directory


def check_state_dir(path: Path) -> list[Check]:
    """Exists, is a directory owned by this user and private (0700), writable, with room left."""
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        fix = f"agui-bridge state init --state-dir {path} (as the service user)"
        return [Check("state-dir", False, f"{path} {what}", fix)]
    checks = [Check("state-dir", True, f"{path} exists"), check_state_private(path)]
    checks.append(_check_writable(path))
    checks.append(_check_room(path))
    return checks


def check_state_private(path: Path) -> Check:
    """Owned by this user and closed to group and others (0700). `serve` and wsgi.py warn with this
    same check at start-up (docs/design.md#state-location)."""
    info = path.stat()
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 or info.st_uid != os.getuid():
        owner = "" if info.st_uid == os.getuid() else f", owned by uid {info.st_uid} (not {os.getuid()})"
        return Check("state-private", False, f"{path}: mode {mode:04o}{owner}", f"chown $USER {path}; chmod 700 {path}")
    return Check("state-private", True, f"mode {mode:04o}, owned by this user")


def check_secret_file(path: Path, what: str) -> Check:
    """A file holding a token must be closed to group and others, as ssh demands of a private key:
    `serve` and the Apache entry point refuse to start with this same check (docs/design.md#state-location)."""
    try:
        info = path.stat()
    except OSError as exc:
        return Check("secret-file", False, f"{what} {path}: {exc.strerror}", f"check {path}")
    if not stat.S_ISREG(info.st_mode):
        return Check("secret-file", True, f"{what} {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        who = "others" if mode & 0o007 else "its group"
        return Check(
            "secret-file",
            False,
            f"{what} {path} holds a token and is open to {who} (mode {mode:04o})",
            f"chmod 600 {path}",
        )
    return Check("secret-file", True, f"{what} {path}: mode {mode:04o}")


def _check_writable(path: Path) -> Check:
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".agui-doctor-", suffix=".tmp")
        try:
            os.write(fd, b"probe")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        return Check(
            "state-writable",
            False,
            f"cannot write a file: {exc.strerror}",
            f"give the service user write access to {path}",
        )
    return Check("state-writable", True, "a file was written, synced and removed")


def _check_room(path: Path) -> Check:
    usage = shutil.disk_usage(path)
    inodes = os.statvfs(path).f_favail
    detail = f"{usage.free // (1024 * 1024)} MiB and {inodes} inodes free"
    if usage.free < MIN_FREE_BYTES or inodes < MIN_FREE_INODES:
        return Check("state-space", False, detail, f"free space on the file system of {path} (>= 64 MiB, 1000 inodes)")
    return Check("state-space", True, detail)


def startup_problems(
    state_dir: Path, secret_file: Path | None, what: str = "config file"
) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for `serve`, wsgi.py and the Apache entry point: doctor's own checks, one line each.

    A token file open to others is refused, as ssh refuses such a private key: the secret is exposed
    now, and one chmod fixes it. A state directory open to others is a warning: the bridge creates its
    files 0600 in 0700 directories, so a looser top directory shows file names, not contents, and
    refusing would stop servers whose directory was made by hand or by a volume (docs/design.md#state-location).
    """
    refusals: list[str] = []
    if secret_file is not None:
        secret = check_secret_file(secret_file, what)
        if not secret.ok:
            refusals.append(f"refusing to start: {secret.detail}; fix: {secret.fix}")
    warnings: list[str] = []
    if state_dir.is_dir():  # absent: the store creates it 0700
        private = check_state_private(state_dir)
        if not private.ok:
            warnings.append(f"warning: the state directory is open to others ({private.detail}); fix: {private.fix}")
    return refusals, warnings


# ------------------------------------------------------------------------------------------ settings


def check_allowed_roots(raw: str | None) -> Check:
    """Every configured root must exist: serve silently ignores one that does not (docs/design.md#workspace-cwd)."""
    if raw is None:
        return Check("allowed-roots", True, "not set: workspaces under the working directory and the temp directory")
    entries = [e.strip() for e in raw.split(os.pathsep) if e.strip()]
    missing = [e for e in entries if not Path(os.path.expanduser(e)).is_dir()]
    if not entries:
        return Check("allowed-roots", False, "set but empty: no workspace is allowed", "list at least one directory")
    if missing:
        return Check(
            "allowed-roots", False, f"not a directory: {', '.join(missing)}", "create them or remove them from the list"
        )
    return Check("allowed-roots", True, f"{len(entries)} root(s), all directories")


def check_auth_token(host: str, token: str | None) -> Check:
    if token:
        return Check("auth-token", True, "set")
    if is_loopback_host(host):
        return Check("auth-token", True, f"not set; binding {host} (loopback) only")
    return Check(
        "auth-token",
        False,
        f"not set while binding {host} (beyond loopback)",
        "set IAC_CODE_AGUI_AUTH_TOKEN (or auth_token in --config)",
    )


# -------------------------------------------------------------------------------------------- upstream

HttpGet = Callable[[str, Mapping[str, str]], tuple[int, Mapping[str, str], bytes]]
HttpPost = Callable[[str, Mapping[str, str], bytes], tuple[int, Mapping[str, str], bytes]]


def _requests_get(url: str, headers: Mapping[str, str]) -> tuple[int, Mapping[str, str], bytes]:
    """Never through a proxy from the environment: the A2A token goes to the kernel only."""
    with direct_session() as session:
        response = session.get(url, headers=dict(headers), timeout=PROBE_TIMEOUT_S, allow_redirects=False)
        return response.status_code, response.headers, response.content[:65536]


def _requests_post(url: str, headers: Mapping[str, str], body: bytes) -> tuple[int, Mapping[str, str], bytes]:
    with direct_session() as session:
        response = session.post(url, headers=dict(headers), data=body, timeout=PROBE_TIMEOUT_S, allow_redirects=False)
        return response.status_code, response.headers, response.content[:65536]


def check_upstream(
    url: str | None, token: str | None, managed: str, get: HttpGet = _requests_get, post: HttpPost = _requests_post
) -> tuple[list[Check], float | None]:
    """`/health` answers, and A2A 1.0 with this token; also the upstream's clock (its `Date` header). Both
    lines are always there: a failed health check keeps the A2A line, probed when the kernel answered at all."""
    if url is None:
        note = f"managed '{managed}': started by serve itself, not probed"
        return [Check("upstream-health", True, note), Check("upstream-a2a", True, note)], None
    base = url if url.endswith("/") else url + "/"
    try:
        status, headers, _ = get(base + "health", {})
    except Exception as exc:  # noqa: BLE001 - any transport failure is what this check reports
        fix = f"start the kernel or correct --a2a-url ({base})"
        unreachable = f"{base}health unreachable: {type(exc).__name__}"
        return [
            Check("upstream-health", False, unreachable, fix),
            Check("upstream-a2a", False, f"not asked: {unreachable}", fix),
        ], None
    upstream_time = _http_date(headers.get("Date"))
    if status != 200:
        health = Check(
            "upstream-health", False, f"{base}health answered HTTP {status}", "check --a2a-url points at the kernel"
        )
    else:
        health = Check("upstream-health", True, f"{base}health answered 200")
    return [health, _check_a2a(base, token, post)], upstream_time


def _check_a2a(base: str, token: str | None, post: HttpPost) -> Check:
    envelope = {
        "jsonrpc": "2.0",
        "id": "agui-doctor",
        "method": "GetTask",
        "params": {"id": f"agui-doctor-{uuid.uuid4()}", "historyLength": 0},
    }
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    token_fix = "set IAC_CODE_AGUI_A2A_TOKEN to the kernel's IACCODE_A2A_HTTP_TOKEN"  # noqa: S105 - a hint
    try:
        status, _headers, body = post(base, headers, json.dumps(envelope).encode())
    except Exception as exc:  # noqa: BLE001 - any transport failure is what this check reports
        return Check("upstream-a2a", False, f"JSON-RPC call failed: {type(exc).__name__}", "check the kernel's logs")
    if status in (401, 403):
        return Check(
            "upstream-a2a",
            False,
            f"HTTP {status}: the token was refused ({'set' if token else 'none sent'})",
            token_fix,
        )
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if status == 200 and code == TASK_NOT_FOUND:
        return Check("upstream-a2a", True, "GetTask of an unknown id answered -32001 (A2A 1.0, token accepted)")
    if code == VERSION_NOT_SUPPORTED:
        return Check(
            "upstream-a2a",
            False,
            "-32009: the upstream does not speak A2A 1.0",
            "upgrade the kernel to an A2A 1.0 release",
        )
    if code == METHOD_NOT_FOUND:
        return Check(
            "upstream-a2a",
            False,
            "-32601: GetTask unknown (not an A2A 1.0 JSON-RPC endpoint)",
            "point --a2a-url at the kernel's JSON-RPC URL",
        )
    found = f"JSON-RPC error {code}" if code is not None else f"HTTP {status} without a JSON-RPC error"
    return Check(
        "upstream-a2a", False, f"unexpected answer to GetTask: {found}", "check --a2a-url and the kernel version"
    )


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------------- tracing


def check_tracing(environ: Mapping[str, str]) -> Check:
    """OTEL_TRACES_EXPORTER names only exporters this installation has (a wrong one turns tracing off)."""
    import importlib.util

    from agui_bridge.observability.tracing_setup import requested_exporters

    names = requested_exporters(environ)
    if not names:
        return Check("tracing", True, "off (OTEL_TRACES_EXPORTER unset or none)")
    unknown = [n for n in names if n not in ("console", "otlp")]
    if unknown:
        return Check("tracing", False, f"unknown exporter(s): {', '.join(unknown)}", "use console, otlp or none")
    if "otlp" in names and importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        return Check("tracing", False, "otlp requested but not installed", "pip install 'agui-bridge[otlp]'")
    return Check("tracing", True, f"on: {', '.join(names)}")


# ----------------------------------------------------------------------------------------------- clock


def check_clock(now: float, upstream_time: float | None, state_dir: Path) -> Check:
    """Interrupt expiry and lease grace periods compare wall-clock times written by other processes."""
    if now < CLOCK_FLOOR:
        return Check("clock", False, "the wall clock is before 2025", "enable time synchronisation (NTP/chrony)")
    if upstream_time is not None and abs(now - upstream_time) > MAX_CLOCK_SKEW_S:
        skew = now - upstream_time
        return Check(
            "clock", False, f"{skew:+.0f} s off the upstream's clock", "synchronise both hosts' clocks (NTP/chrony)"
        )
    future = _newest_mtime(state_dir)
    if future is not None and future - now > MAX_CLOCK_SKEW_S:
        detail = f"a state file was modified {future - now:.0f} s in the future"
        return Check("clock", False, detail, "the clock went back or another host's clock is ahead: synchronise (NTP)")
    compared = "matches the upstream's clock" if upstream_time is not None else "no upstream clock to compare"
    return Check("clock", True, f"sane; {compared}")


def _newest_mtime(state_dir: Path) -> float | None:
    newest: float | None = None
    threads = state_dir / "threads"
    try:
        with os.scandir(threads if threads.is_dir() else state_dir) as entries:
            for index, entry in enumerate(entries):
                if index >= MAX_STATE_ENTRIES:
                    break
                try:
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                except OSError:
                    continue
                newest = mtime if newest is None else max(newest, mtime)
    except OSError:
        return None
    return newest


# ------------------------------------------------------------------------------------------------- run


def run_checks(
    target: Target,
    *,
    now: Callable[[], float] = time.time,
    get: HttpGet = _requests_get,
    post: HttpPost = _requests_post,
    environ: Mapping[str, str] | None = None,
) -> list[Check]:
    checks = check_state_dir(target.state_dir)
    if target.secret_file is not None:
        checks.append(check_secret_file(target.secret_file, "config file"))
    checks.append(check_allowed_roots(target.allowed_cwds))
    checks.append(check_auth_token(target.host, target.auth_token))
    upstream, upstream_time = check_upstream(target.a2a_url, target.a2a_token, target.managed_a2a, get, post)
    checks.extend(upstream)
    checks.append(check_clock(now(), upstream_time, target.state_dir))
    checks.append(check_tracing(os.environ if environ is None else environ))
    return checks


def render_text(checks: Iterable[Check]) -> str:
    rows = list(checks)
    width = max(len(c.name) for c in rows)
    lines = []
    for check in rows:
        line = f"{'ok  ' if check.ok else 'FAIL'}  {check.name:<{width}}  {check.detail}"
        lines.append(line if check.ok else f"{line}; fix: {check.fix}")
    return "\n".join(lines)


def render_json(checks: Iterable[Check]) -> str:
    rows = list(checks)
    return json.dumps({"ok": all(c.ok for c in rows), "checks": [asdict(c) for c in rows]}, indent=2)
