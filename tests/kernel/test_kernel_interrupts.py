"""Interrupt expiry, cancellation, disconnects and restarts through the bridge against the real kernel.

A bridge with a 2 s interrupt TTL shows both ways out of an expired interrupt: a resume (refused with
EXECUTION_EXPIRED, the kernel task cancelled) and a new run that never resumes (must succeed: the
kernel once answered it with "A2A context runtime missing").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.bridge_harness import BridgeServer, bridge_server, run_body
from tests.kernel import fake_llm
from tests.kernel.helpers import (
    ROS,
    answer,
    document,
    error_code,
    resume_body,
    start,
    text_of,
    wait_task_state,
    workspace,
)
from tests.kernel.kernel_harness import Kernel

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
    return response.json()  # type: ignore[no-any-return]


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
    second = short_ttl.run(
        run_body(thread_id, "[WRITE] again", ws, ros_invocation_id="invocation-3"), expect="interrupt"
    )
    (pending,) = second[-1]["outcome"]["interrupts"]
    short_ttl.run(resume_body(thread_id, ws, [answer(pending, "allow_once")], ros="invocation-3"), expect="success")
    assert (ws / "hello.txt").exists()
    short_ttl.run(resume_body(again, ws, [answer(interrupt, "deny")]), expect="success")
