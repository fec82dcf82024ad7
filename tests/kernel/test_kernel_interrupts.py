"""Interrupt expiry, cancellation, disconnects and restarts through the bridge against the real kernel.

A bridge with a 2 s interrupt TTL shows both ways out of an expired interrupt: a resume (refused with
EXECUTION_EXPIRED, the kernel task cancelled) and a new run that never resumes (must succeed: the
kernel once answered it with "A2A context runtime missing").
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.kernel import fake_llm
from tests.kernel.helpers import (
    ROS,
    answer,
    document,
    error_code,
    get_task,
    resume_body,
    start,
    text_of,
    wait_task_state,
    workspace,
)
from tests.kernel.kernel_harness import Kernel
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import BridgeServer, StreamReader, bridge_server, custom, new_thread_id, run_body

TTL_S = 2


@pytest.fixture(scope="module")
def bridge(kernel: Kernel, kernel_root: Path) -> Iterator[BridgeServer]:
    state = kernel_root / "state-interrupts"
    with bridge_server(kernel.url, kernel.token, state, kernel_root, workers=2, heartbeat_interval=1) as server:
        yield server


@pytest.fixture(scope="module")
def short_ttl(kernel: Kernel, kernel_root: Path) -> Iterator[BridgeServer]:
    state = kernel_root / "state-ttl"
    with bridge_server(
        kernel.url, kernel.token, state, kernel_root, workers=2, heartbeat_interval=1, interrupt_ttl=TTL_S
    ) as server:
        yield server


@pytest.fixture
def ws(kernel_root: Path) -> Path:
    return workspace(kernel_root)


def cancel(server: BridgeServer, execution_id: str, thread_id: str, ros: str = ROS) -> dict[str, Any]:
    response = requests.post(
        f"{server.url}extensions/iac-code/v1/executions/{execution_id}/cancel",
        json={"threadId": thread_id, "rosInvocationId": ros},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_expired_interrupt_then_resume_is_execution_expired(short_ttl: BridgeServer, kernel: Kernel, ws: Path) -> None:
    thread_id, (interrupt,) = start(short_ttl, ws, "[WRITE] a file")
    task_id = document(short_ttl, thread_id)["execution"]["taskId"]
    time.sleep(TTL_S + 0.5)
    events = short_ttl.run(resume_body(thread_id, ws, [answer(interrupt, "allow_once")]), expect="RUN_ERROR")
    assert error_code(events) == "EXECUTION_EXPIRED"
    assert wait_task_state(kernel, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    assert not (ws / "hello.txt").exists()
    # ... and the thread then takes a new run.
    after = short_ttl.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
    assert text_of(after) == fake_llm.PLAIN_TEXT


def test_expired_interrupt_then_a_new_run_without_resume_succeeds(
    short_ttl: BridgeServer, kernel: Kernel, ws: Path
) -> None:
    thread_id, _ = start(short_ttl, ws, "[WRITE] a file")
    task_id = document(short_ttl, thread_id)["execution"]["taskId"]
    time.sleep(TTL_S + 0.5)
    events = short_ttl.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
    assert text_of(events) == fake_llm.PLAIN_TEXT
    assert wait_task_state(kernel, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    assert not (ws / "hello.txt").exists()
    # The same thread keeps working: a tool turn with a permission, then a plain one.
    again, (interrupt,) = start(short_ttl, ws, "[WRITE] now")
    assert again != thread_id
    # Answered at once: the interrupts here live TTL_S (2 s), less than the next turns take on a loaded machine.
    short_ttl.run(resume_body(again, ws, [answer(interrupt, "deny")]), expect="success")
    second = short_ttl.run(
        run_body(thread_id, "[WRITE] again", ws, ros_invocation_id="invocation-3"), expect="interrupt"
    )
    (pending,) = second[-1]["outcome"]["interrupts"]
    short_ttl.run(resume_body(thread_id, ws, [answer(pending, "allow_once")], ros="invocation-3"), expect="success")
    assert (ws / "hello.txt").exists()


def session_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = custom(events, "iac-code.session.v1")[0]["value"]
    return result


def has_session(events: list[dict[str, Any]]) -> bool:
    return bool(custom(events, "iac-code.session.v1"))


def test_cancel_extension_on_a_running_execution(bridge: BridgeServer, kernel: Kernel, ws: Path) -> None:
    thread_id = new_thread_id()
    reader = StreamReader(bridge.post(run_body(thread_id, "[SLOW] long answer", ws, ros_invocation_id=ROS)))
    try:
        session = session_of(reader.until(has_session))
        reader.until(lambda evs: any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in evs))
        assert cancel(bridge, session["executionId"], thread_id) == {
            "executionId": session["executionId"],
            "status": "cancelled",
        }
        events = assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_ERROR")
    finally:
        reader.response.close()
    assert error_code(events) == "CANCELLED"
    assert wait_task_state(kernel, session["taskId"], "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    assert cancel(bridge, session["executionId"], thread_id)["status"] == "already_terminal"
    after = bridge.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
    assert text_of(after) == fake_llm.PLAIN_TEXT


def test_cancel_extension_on_an_interrupted_execution(bridge: BridgeServer, kernel: Kernel, ws: Path) -> None:
    thread_id, (interrupt,) = start(bridge, ws, "[WRITE] a file")
    waiting = document(bridge, thread_id)["execution"]
    assert cancel(bridge, waiting["executionId"], thread_id)["status"] == "cancelled"
    assert wait_task_state(kernel, waiting["taskId"], "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    refused = bridge.run(resume_body(thread_id, ws, [answer(interrupt, "allow_once")]), expect="RUN_ERROR")
    assert error_code(refused) == "EXECUTION_LOST"
    assert not (ws / "hello.txt").exists()
    # The cancelled context takes a new turn right away (the kernel rebuilds its runtime).
    after = bridge.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
    assert text_of(after) == fake_llm.PLAIN_TEXT


def test_client_disconnect_mid_turn_cancels_the_kernel_task(bridge: BridgeServer, kernel: Kernel, ws: Path) -> None:
    thread_id = new_thread_id()
    reader = StreamReader(bridge.post(run_body(thread_id, "[SLOW] long answer", ws, ros_invocation_id=ROS)))
    session = session_of(reader.until(has_session))
    reader.until(lambda evs: any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in evs))
    reader.response.close()
    assert wait_task_state(kernel, session["taskId"], "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    deadline = time.monotonic() + 15
    while "activeRun" in document(bridge, thread_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    after = bridge.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
    assert text_of(after) == fake_llm.PLAIN_TEXT


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["graceful", "killed"])
def test_bridge_restart_between_the_interrupt_and_the_resume(
    kernel: Kernel, kernel_root: Path, ws: Path, how: signal.Signals
) -> None:
    state = kernel_root / f"state-restart-{how.name}"
    first = BridgeServer(kernel.url, kernel.token, state, kernel_root, workers=2).start()
    try:
        thread_id, (interrupt,) = start(first, ws, "[WRITE] a file")
    finally:
        first.stop(how)
    with bridge_server(kernel.url, kernel.token, state, kernel_root, workers=2) as second:
        events = second.run(resume_body(thread_id, ws, [answer(interrupt, "allow_once")]), expect="success")
        assert (ws / "hello.txt").read_text() == "hello from the kernel tier\n"
        assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == [interrupt["toolCallId"]]


def test_bridge_killed_mid_turn_then_a_new_run_reclaims_and_cancels_the_orphan(
    kernel: Kernel, kernel_root: Path, ws: Path
) -> None:
    state = kernel_root / "state-midturn"
    thread_id = new_thread_id()
    first = BridgeServer(kernel.url, kernel.token, state, kernel_root, workers=2).start()
    try:
        reader = StreamReader(first.post(run_body(thread_id, "[SLOW] long answer", ws, ros_invocation_id=ROS)))
        task_id = session_of(reader.until(has_session))["taskId"]
    finally:
        first.stop(signal.SIGKILL)
    reader.response.close()
    with bridge_server(kernel.url, kernel.token, state, kernel_root, workers=2) as second:
        events = second.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
        assert text_of(events) == fake_llm.PLAIN_TEXT
        assert wait_task_state(kernel, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"


def test_expired_interrupt_cancelled_by_the_client_then_an_immediate_new_run(
    short_ttl: BridgeServer, kernel: Kernel, ws: Path
) -> None:
    """What @ag-ui/client 1.0 sends for an expired interrupt (status cancelled), then at once a new turn."""
    thread_id, (interrupt,) = start(short_ttl, ws, "[WRITE] a file")
    task_id = document(short_ttl, thread_id)["execution"]["taskId"]
    time.sleep(TTL_S + 0.5)
    dismissal = {"interruptId": interrupt["id"], "status": "cancelled"}
    events = short_ttl.run(resume_body(thread_id, ws, [dismissal]), expect="cancelled")
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_FINISHED"]
    assert get_task(kernel, task_id)["status"]["state"] == "TASK_STATE_CANCELED"  # before the response ended
    after = short_ttl.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
    assert text_of(after) == fake_llm.PLAIN_TEXT
