"""The managed upstream child (docs/configuration.md): a loopback A2A server we start and stop.

The child is an LLM-driven agent with tools, so it gets only the environment it needs (an allow-list,
never the bridge's own `IAC_CODE_AGUI_*` settings or tokens, no proxies), dies with the process that
started it (PR_SET_PDEATHSIG, plus an exit hook for a start-up failure after the spawn), and must answer
`/health` before the server starts.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping

from agui_bridge.worker.fork import after_fork_in_child
from agui_bridge.worker.stop_budget import MANAGED_CHILD_WAIT_S

#: The bridge's own settings: never handed to the child (they include the AG-UI auth token).
BRIDGE_PREFIX = "IAC_CODE_AGUI_"
#: Exact names the child may inherit: its basics, the LLM providers' own key variables the kernel also
#: accepts, and TLS trust stores (not secrets).
ALLOWED_NAMES = frozenset(
    {"HOME", "PATH", "SHELL", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME"}
    | {"DISABLE_TELEMETRY", "IACCODE_A2A_ALLOWED_CWDS"}
    | {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY"}
    | {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"}
)
#: Prefixes the child may inherit: locale, the kernel's LLM configuration, cloud credentials its tools use.
ALLOWED_PREFIXES = ("LC_", "IAC_CODE_", "ALIBABA_CLOUD_", "ALICLOUD_")
#: Only the demo child (this package run with our interpreter) needs to find our sources.
DEMO_EXTRA_NAMES = frozenset({"PYTHONPATH"})
PR_SET_PDEATHSIG = 1


class ManagedUpstreamError(RuntimeError):
    """One line for the operator; `serve` exits with status 2."""


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_environment(kind: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed environment of the child: its LLM configuration, never the bridge's secrets."""
    env: dict[str, str] = {}
    for name, value in environ.items():
        if name.startswith(BRIDGE_PREFIX):
            continue
        if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES) or (kind == "demo" and name in DEMO_EXTRA_NAMES):
            env[name] = value
    allowed_cwds = environ.get(BRIDGE_PREFIX + "ALLOWED_CWDS")
    if allowed_cwds and "IACCODE_A2A_ALLOWED_CWDS" not in env:
        env["IACCODE_A2A_ALLOWED_CWDS"] = allowed_cwds
    return env


def find_iac_code(configured: str | None, environ: Mapping[str, str]) -> str:
    """`--iac-code-bin` if given (it must be an executable file), else `iac-code` on PATH or beside us."""
    if configured:
        path = os.path.abspath(os.path.expanduser(configured))
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise ManagedUpstreamError(f"--iac-code-bin {configured!r} is not an executable file.")
        return path
    found = shutil.which("iac-code", path=environ.get("PATH", os.defpath))
    if found is None:
        sibling = os.path.join(os.path.dirname(sys.executable), "iac-code")
        found = sibling if os.access(sibling, os.X_OK) else None
    if found is None:
        raise ManagedUpstreamError("iac-code was not found on PATH; install it or pass --iac-code-bin.")
    return found


def child_command(kind: str, port: int, environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    if kind == "demo":
        return [sys.executable, "-m", "agui_bridge.demo", "--host", "127.0.0.1", "--port", str(port)]
    if kind == "iac-code":
        executable = find_iac_code(environ.get(BRIDGE_PREFIX + "IAC_CODE_BIN"), environ)
        return [executable, "a2a", "--host", "127.0.0.1", "--port", str(port), "--thinking-exposure", "all"]
    raise ManagedUpstreamError(f"unknown managed upstream {kind!r} (expected demo or iac-code)")


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: the kernel sends SIGTERM to the child when the process that spawned it dies."""

    def arm() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the exit hook and supervisors remain
            return
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


class ManagedUpstream:
    """Start a child on a free loopback port with a random bearer token; stop it on exit."""

    def __init__(self, kind: str, environ: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.port = free_loopback_port()
        self.token = secrets.token_urlsafe(32)
        self.url = f"http://127.0.0.1:{self.port}/"
        self._environ = dict(environ if environ is not None else os.environ)
        self._process: subprocess.Popen[bytes] | None = None
        #: The process that started the child stops it at exit; a forked gunicorn worker inherits the
        #: exit hook but not the child (docs/design.md#fork-registry).
        self._stops_at_exit = True
        after_fork_in_child(self._disown)

    def _disown(self) -> None:
        self._stops_at_exit = False

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None else process.pid

    def start(self, ready_timeout_s: float = 60.0) -> None:
        if self._process is not None:
            raise ManagedUpstreamError("The local A2A process is already started.")
        command = child_command(self.kind, self.port, self._environ)
        env = child_environment(self.kind, self._environ)
        env["IACCODE_A2A_HTTP_TOKEN"] = self.token
        try:
            self._process = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent(os.getpid())
            )
        except (OSError, subprocess.SubprocessError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ManagedUpstreamError(
                f"The local A2A process {command[0]!r} could not be started: {reason}."
            ) from None
        atexit.register(self._stop_at_exit)  # a start-up failure after the spawn must not leave it running
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, ready_timeout_s: float) -> None:
        process = self._process
        assert process is not None
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                self._process = None
                raise ManagedUpstreamError(f"The local A2A process exited during startup (exit code {code}).")
            if self._healthy():
                return
            time.sleep(0.1)
        raise ManagedUpstreamError("The local A2A process did not become ready in time.")

    def _healthy(self) -> bool:
        request = urllib.request.Request(  # noqa: S310 - a loopback http URL we built
            self.url + "health", headers={"Authorization": f"Bearer {self.token}"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        try:
            with opener.open(request, timeout=0.5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def watch(self, on_exit: Callable[[], None], interval_s: float = 0.5) -> None:
        """Call `on_exit` once if the child dies while it should be running (not after `stop`).

        gunicorn's arbiter reaps every child of the master, so the exit is seen as poll() != None
        (returncode 0 after ECHILD) rather than through a signal; a thread polling is enough.
        """

        def poll() -> None:
            while True:
                process = self._process
                if process is None:
                    return
                if process.poll() is not None and self._process is process:
                    on_exit()
                    return
                time.sleep(interval_s)

        threading.Thread(target=poll, name="managed-upstream-watch", daemon=True).start()

    def _stop_at_exit(self) -> None:
        if self._stops_at_exit:
            self.stop()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(MANAGED_CHILD_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(MANAGED_CHILD_WAIT_S)
