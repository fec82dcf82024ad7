"""Test helper: run the demo agent in a subprocess, exactly as the managed child would be run.

A subprocess (not a thread) keeps the agent's asyncio loop away from the test's gevent or threads
and exercises the real command line, token variable and ``/health`` readiness probe.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from agui_bridge.demo.server import TOKEN_ENV
from agui_bridge.kernel.outgoing import direct_session

READY_TIMEOUT_SECONDS = 20.0
#: The directory holding the ``agui_bridge`` package, so the child imports this very checkout.
_SOURCE_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (small race, as in the bridge)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def running_demo_agent(token: str | None = None) -> Iterator[str]:
    """Start ``python -m agui_bridge.demo`` on a free loopback port; yield ``http://127.0.0.1:<port>/``."""
    port = free_port()
    env = dict(os.environ)
    env.pop(TOKEN_ENV, None)
    if token:
        env[TOKEN_ENV] = token
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SOURCE_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_bridge.demo", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
    )
    base_url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            code = proc.poll()
            if code is not None:
                raise RuntimeError(f"The demo A2A agent exited during startup (exit code {code}).")
            try:
                with direct_session() as session:
                    healthy = session.get(f"{base_url}health", timeout=0.5).status_code == 200
                if healthy:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("The demo A2A agent did not become ready in time.")
            time.sleep(0.05)
        yield base_url
    finally:
        _stop(proc)
