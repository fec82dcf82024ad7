"""End to end: `agui-bridge serve` (gunicorn, gevent worker, 2 workers) against the demo agent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.agui_checks import assert_valid_agui_stream, event_types, sse_comments
from tests.support.harness import (
    BridgeServer,
    StreamReader,
    bridge_server,
    custom,
    new_thread_id,
    read_sse_until,
    run_body,
    wait_for_task_state,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(tmp_path: Path, demo_url: str, demo_token: str) -> Iterator[BridgeServer]:
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, heartbeat_interval=0.5) as running:
        yield running


def session_value(events: list[dict[str, Any]]) -> dict[str, Any]:
    values = custom(events, "iac-code.session.v1")
    assert len(values) == 1
    value: dict[str, Any] = values[0]["value"]
    return value


def test_health_reports_the_protocol(server: BridgeServer) -> None:
    body = requests.get(server.url + "health", timeout=5).json()
    assert body["status"] == "ok" and body["protocol"] == "ag-ui" and body["executionKernel"] == "a2a-1.0"


def test_every_normal_scenario_streams_valid_agui(server: BridgeServer, tmp_path: Path) -> None:
    expectations = {
        "say hi": ["TEXT_MESSAGE_CONTENT"],
        "Create a VPC template": ["TEXT_MESSAGE_CONTENT", "CUSTOM"],
        "[THINK] why": ["REASONING_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT"],
        "use a tool to list files": ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"],
    }
    for text, expected in expectations.items():
        events = server.run(run_body(new_thread_id(), text, tmp_path), expect="success")
        assert set(expected) <= set(event_types(events)), text
        assert session_value(events)["sessionId"]
        assert events[-1]["usage"]
    iac = server.run(run_body(new_thread_id(), "Create a VPC template", tmp_path), expect="success")
    assert custom(iac, "iac-code.artifact.v1")
    tool = server.run(run_body(new_thread_id(), "use a tool", tmp_path), expect="success")
    assert custom(tool, "iac-code.tool-progress.v1")


def test_failing_turn(server: BridgeServer, tmp_path: Path) -> None:
    events = server.run(run_body(new_thread_id(), "fail now", tmp_path), expect="RUN_ERROR")
    assert events[-1]["code"] == "A2A_EXECUTION_FAILED"


def test_upstream_down(tmp_path: Path) -> None:
    from agui_bridge.demo.testing import free_port

    dead = f"http://127.0.0.1:{free_port()}/"
    with bridge_server(dead, None, tmp_path / "state", tmp_path) as server:
        events = server.run(run_body(new_thread_id(), "hi", tmp_path), expect="RUN_ERROR")
        assert events[-1]["code"] == "A2A_UNAVAILABLE"


def test_heartbeat_during_a_slow_turn(server: BridgeServer, tmp_path: Path) -> None:
    with server.post(run_body(new_thread_id(), "slow [SLOW 5]", tmp_path)) as response:
        raw = b"".join(response.iter_content(chunk_size=None))
    assert "heartbeat" in sse_comments(raw)
    assert_valid_agui_stream(raw, expect_terminal="success")


def test_disconnect_cancels_the_task(server: BridgeServer, tmp_path: Path, demo_url: str, demo_token: str) -> None:
    response = server.post(run_body(new_thread_id(), "slow [SLOW 30]", tmp_path))
    _, events = read_sse_until(response, lambda evs: any(e.get("name") == "iac-code.session.v1" for e in evs))
    task_id = session_value(events)["taskId"]
    response.close()
    started = time.monotonic()
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED", 10) == "TASK_STATE_CANCELED"
    assert time.monotonic() - started < 10


def test_thread_busy_across_workers(server: BridgeServer, tmp_path: Path) -> None:
    thread_id = new_thread_id()
    first = StreamReader(server.post(run_body(thread_id, "slow [SLOW 4]", tmp_path)))
    first.until(lambda evs: bool(evs))
    # Several attempts on fresh connections: gunicorn spreads them over both workers.
    codes = set()
    for _ in range(6):
        second = requests.post(server.url, json=run_body(thread_id, "hi", tmp_path), timeout=10)
        codes.add((second.status_code, second.json()["error"]["code"]))
    assert codes == {(409, "THREAD_BUSY")}
    assert_valid_agui_stream(first.rest(), expect_terminal="success")
    first.response.close()


def test_duplicate_and_conflicting_run_ids(server: BridgeServer, tmp_path: Path) -> None:
    body = run_body(new_thread_id(), "hi", tmp_path)
    server.run(body, expect="success")
    duplicate = requests.post(server.url, json=body, timeout=10)
    assert (duplicate.status_code, duplicate.json()["error"]["code"]) == (409, "DUPLICATE_RUN_ID")
    body["messages"][0]["content"] = "changed"
    conflict = requests.post(server.url, json=body, timeout=10)
    assert (conflict.status_code, conflict.json()["error"]["code"]) == (409, "RUN_ID_CONFLICT")


def test_restart_between_two_turns(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    thread_id = new_thread_id()
    state = tmp_path / "state"
    with bridge_server(demo_url, demo_token, state, tmp_path) as first_server:
        first = first_server.run(run_body(thread_id, "hi", tmp_path), expect="success")
    with bridge_server(demo_url, demo_token, state, tmp_path) as second_server:
        second = second_server.run(run_body(thread_id, "again", tmp_path), expect="success")
    one, two = session_value(first), session_value(second)
    assert one["contextId"] == two["contextId"] and one["sessionId"] == two["sessionId"]
    assert one["executionId"] != two["executionId"]


def test_a_long_run_stays_busy_across_workers_after_its_lease_grace(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    """Past the lease's grace period only the owner worker's beacon keeps the run busy (no per-run writes)."""
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=2, lease_ttl=1) as server:
        thread_id = new_thread_id()
        running = StreamReader(server.post(run_body(thread_id, "slow [SLOW 6]", tmp_path)))
        running.until(lambda evs: bool(evs))
        time.sleep(3)  # three times the grace period
        codes = set()
        for _ in range(6):
            second = requests.post(server.url, json=run_body(thread_id, "hi", tmp_path), timeout=10)
            codes.add((second.status_code, second.json()["error"]["code"]))
        assert codes == {(409, "THREAD_BUSY")}
        state = json.loads((tmp_path / "state" / "threads" / f"{thread_id}.json").read_text())
        assert state["activeRun"]["leaseUntil"] < int(time.time() * 1000)  # never renewed in the file
        assert_valid_agui_stream(running.rest(), expect_terminal="success")
        running.response.close()
        server.run(run_body(thread_id, "next turn", tmp_path), expect="success")
