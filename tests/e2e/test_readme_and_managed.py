"""The README's first command and curl example, with the demo agent as the managed upstream."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.harness import BridgeServer, custom, new_thread_id, readme_example_body, run_body
from tests.support.processes import gone

pytestmark = pytest.mark.e2e


def test_readme_example_streams_success_through_the_managed_demo_agent(tmp_path: Path) -> None:
    server = BridgeServer(None, None, tmp_path / "state", None).start()  # no --a2a-url: managed demo child
    try:
        child = server.managed_child_pid()
        assert child is not None
        events = server.run(readme_example_body(), expect="success")
        assert events[0]["type"] == "RUN_STARTED" and events[-1]["outcome"] == {"type": "success"}
        assert custom(events, "iac-code.artifact.v1")
    finally:
        server.stop(group=False)  # SIGTERM to the master only: it must stop its child itself
    assert gone(child)  # exited, or a zombie nobody reaped yet


def test_idle_shutdown_exits_gracefully_and_stops_the_managed_child(tmp_path: Path) -> None:
    """9.3: `--idle-shutdown N` exits on its own once nothing ran for N s and nothing is pending."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = BridgeServer(None, None, tmp_path / "state", tmp_path, idle_shutdown=2, workers=2).start()
    try:
        child = server.managed_child_pid()
        assert child is not None
        parked = run_body(new_thread_id(), "please write file", workspace)
        server.run(parked, expect="interrupt")
        time.sleep(4)
        assert server.process is not None and server.process.poll() is None  # a pending interrupt keeps it up
        body = run_body(parked["threadId"], "", workspace)
        interrupt_id = json.loads(Path(server.state_dir, "threads", f"{parked['threadId']}.json").read_text())
        (pending_id,) = interrupt_id["execution"]["pending"]
        body["resume"] = [{"interruptId": pending_id, "status": "resolved", "payload": {"decision": "deny"}}]
        server.run(body, expect="success")
        assert server.process.wait(20) == 0
        server.process = None
    finally:
        server.stop(group=True)
    assert gone(child)  # exited, or a zombie nobody reaped yet


def test_a_dead_managed_child_stops_the_server_with_status_1(tmp_path: Path) -> None:
    """Every run would fail without the kernel: exit non-zero so systemd/Docker restart the service."""
    server = BridgeServer(None, None, tmp_path / "state", tmp_path).start()
    try:
        child = server.managed_child_pid()
        assert child is not None
        os.kill(child, signal.SIGKILL)
        assert server.process is not None and server.process.wait(30) == 1
        server.process = None
    finally:
        server.stop()
    assert "the managed A2A process exited" in server.log_path.read_text()
