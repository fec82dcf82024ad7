"""The managed upstream child (behaviour.md 9.4, D11): a loopback A2A server we start and stop."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping


class ManagedUpstreamError(RuntimeError):
    pass


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_command(kind: str, port: int) -> list[str]:
    if kind == "demo":
        return [sys.executable, "-m", "agui_bridge.demo", "--host", "127.0.0.1", "--port", str(port)]
    if kind == "iac-code":
        sibling = os.path.join(os.path.dirname(sys.executable), "iac-code")
        executable = sibling if os.path.exists(sibling) else shutil.which("iac-code")
        if executable is None:
            raise ManagedUpstreamError("iac-code is not installed (pip install 'iac-code').")
        return [executable, "a2a", "--host", "127.0.0.1", "--port", str(port), "--thinking-exposure", "all"]
    raise ManagedUpstreamError(f"unknown managed upstream {kind!r} (expected demo or iac-code)")


class ManagedUpstream:
    """Start a child on a free loopback port with a random bearer token; stop it on exit."""

    def __init__(self, kind: str, environ: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.port = free_loopback_port()
        self.token = secrets.token_urlsafe(32)
        self.url = f"http://127.0.0.1:{self.port}/"
        self._environ = dict(environ if environ is not None else os.environ)
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, ready_timeout_s: float = 20.0) -> None:
        if self._process is not None:
            raise ManagedUpstreamError("The local A2A process is already started.")
        env = dict(self._environ)
        env["IACCODE_A2A_HTTP_TOKEN"] = self.token
        if "IAC_CODE_AGUI_ALLOWED_CWDS" in env and "IACCODE_A2A_ALLOWED_CWDS" not in env:
            env["IACCODE_A2A_ALLOWED_CWDS"] = env["IAC_CODE_AGUI_ALLOWED_CWDS"]
        try:
            self._process = subprocess.Popen(child_command(self.kind, self.port), env=env)
        except OSError as exc:
            raise ManagedUpstreamError(f"The local A2A process could not be started: {exc.strerror}.") from None
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                self._process = None
                raise ManagedUpstreamError(f"The local A2A process exited during startup (exit code {code}).")
            if self._healthy():
                return
            time.sleep(0.1)
        self.stop()
        raise ManagedUpstreamError("The local A2A process did not become ready in time.")

    def _healthy(self) -> bool:
        request = urllib.request.Request(  # noqa: S310 - a loopback http URL we built
            self.url + "health", headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=0.5) as response:  # noqa: S310 - loopback http
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

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
