"""Under `Type=notify`, `agui-bridge serve` says READY=1 from its main process once a worker answers
(docs/operations.md#readiness): the first `GET /health` after the notice is answered, with no retry."""

from __future__ import annotations

import array
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from agui_bridge.demo.testing import free_port
from agui_bridge.worker.readiness import WORKER_READY_LOG
from tests.support.harness import REPO_ROOT

pytestmark = pytest.mark.e2e

START_DEADLINE_S = 60.0


def receive_with_sender(sock: socket.socket) -> tuple[str, int]:
    """One notification and the pid of its sender (SCM_CREDENTIALS, as systemd checks NotifyAccess)."""
    data, ancillary, _flags, _address = sock.recvmsg(4096, socket.CMSG_SPACE(12))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid, _uid, _gid = array.array("i", payload[:12])
            return data.decode(), pid
    raise AssertionError("no sender credentials")


def test_ready_comes_from_the_main_pid_once_a_worker_answers(tmp_path: Path) -> None:
    notify_path = str(tmp_path / "notify")
    port = free_port()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(notify_path)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_")}
        env.update(PYTHONPATH=str(REPO_ROOT), NOTIFY_SOCKET=notify_path)
        args = [sys.executable, "-m", "agui_bridge.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
        args += ["--a2a-url", "http://127.0.0.1:9/", "--state-dir", str(tmp_path / "state"), "--workers", "2"]
        log_path = tmp_path / "serve.log"
        with log_path.open("ab") as log:
            serve = subprocess.Popen(args, env=env, stdout=log, stderr=log, start_new_session=True)
        try:
            deadline = time.monotonic() + START_DEADLINE_S
            messages: list[tuple[str, int]] = []
            while not any("READY=1" in text for text, _ in messages):
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    messages.append(receive_with_sender(sock))
                except TimeoutError:
                    raise AssertionError(f"no READY=1: {log_path.read_text()[-2000:]}") from None
            # The GET alone would pass after an early READY=1 too (it waits in the backlog for a worker): a worker
            # must already have said it built its app when the notice arrives.
            assert WORKER_READY_LOG in log_path.read_text(errors="replace"), log_path.read_text()[-2000:]
            assert requests.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        finally:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(30)
    ready = [(text, pid) for text, pid in messages if "READY=1" in text]
    assert ready == [("READY=1\nSTATUS=agui-bridge: a worker answers", serve.pid)]  # NotifyAccess=main
    assert all(pid == serve.pid for _, pid in messages)
