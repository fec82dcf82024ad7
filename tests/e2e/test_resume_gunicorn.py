"""Interrupt -> resume end to end: `agui-bridge serve` with 4 gevent workers against the demo agent.

Covers every row of the resume matrix (docs/design.md#resume-matrix) plus EXECUTION_EXPIRED
(docs/design.md#decision-interrupts-expire), the crash cases (a worker or the whole server SIGKILLed
right after an interrupt, or in the middle of a turn; a state directory that refuses writes), 20
simultaneous resumes of one interrupt, and the state file after each step. Where the design keeps an
interrupt retryable, a corrected resume then succeeds.

Rows that need A2A to disagree with the bridge (an unknown session, a task of another context, an
answer the kernel refuses) are produced by editing the thread file the way a diverged kernel would
leave it, through the same locked store the workers use.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from agui_bridge.demo.testing import running_demo_agent
from agui_bridge.store import model
from agui_bridge.store.keys import thread_file_stem
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream, event_types
from tests.support.harness import (
    BridgeServer,
    StreamReader,
    a2a_task_state,
    bridge_server,
    custom,
    new_thread_id,
    run_body,
    wait_for_task_state,
)
from tests.support.state_checks import Secrets, assert_documented_document, assert_state_clean

pytestmark = pytest.mark.e2e

ROS = "invocation-1"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume")


@pytest.fixture(scope="module")
def server(root: Path, demo_url: str, demo_token: str) -> Iterator[BridgeServer]:
    with bridge_server(demo_url, demo_token, root / "state", root, workers=4, heartbeat_interval=1) as running:
        yield running


@pytest.fixture
def ws(root: Path) -> Path:
    path = root / f"ws-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return path


# --------------------------------------------------------------------------------------------- helpers


def start(server: BridgeServer, ws: Path, text: str, **props: Any) -> tuple[str, list[dict[str, Any]]]:
    """A new thread whose first run ends on an interrupt; returns (threadId, interrupts)."""
    thread_id = new_thread_id()
    events = server.run(run_body(thread_id, text, ws, ros_invocation_id=ROS, **props), expect="interrupt")
    return thread_id, events[-1]["outcome"]["interrupts"]


def resume_body(thread_id: str, ws: Path, answers: list[dict[str, Any]], **props: Any) -> dict[str, Any]:
    body = run_body(thread_id, "", ws, ros_invocation_id=props.pop("ros", ROS), **props)
    body["messages"] = []
    body["resume"] = answers
    return body


def resume(
    server: BridgeServer, thread_id: str, ws: Path, answers: list[dict[str, Any]], expect: str, **props: Any
) -> list[dict[str, Any]]:
    return server.run(resume_body(thread_id, ws, answers, **props), expect=expect)


def answer(interrupt: dict[str, Any], payload: Any = None, status: str = "resolved") -> dict[str, Any]:
    entry: dict[str, Any] = {"interruptId": interrupt["id"], "status": status}
    if payload is not None:
        entry["payload"] = payload
    return entry


def allow(interrupt: dict[str, Any]) -> dict[str, Any]:
    return answer(interrupt, {"decision": "allow_once"})


def error_of(events: list[dict[str, Any]]) -> tuple[str, str]:
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"], event_types(events)
    return events[-1]["code"], events[-1]["message"]


def thread_file(server: BridgeServer, thread_id: str) -> Path:
    return server.state_dir / "threads" / f"{thread_file_stem(thread_id)}.json"


def document(server: BridgeServer, thread_id: str) -> dict[str, Any]:
    return assert_documented_document(thread_file(server, thread_id))


def pending_ids(server: BridgeServer, thread_id: str) -> list[str]:
    return list(document(server, thread_id)["execution"]["pending"])


def edit_state(server: BridgeServer, thread_id: str, change: Callable[[model.ThreadState], None]) -> None:
    """Change the thread file under the same lock the workers take."""
    with ThreadStore(server.state_dir).transaction(thread_id) as txn:
        assert txn.state is not None
        change(txn.state)
        txn.commit(txn.state)


def post_json(server: BridgeServer, body: dict[str, Any]) -> tuple[int, str]:
    response = requests.post(server.url, json=body, timeout=30)
    return response.status_code, response.json()["error"]["code"]


def worker_pids(server: BridgeServer) -> list[int]:
    return [pid for pid in server.child_pids() if pid != server.managed_child_pid()]


def kill_workers(server: BridgeServer) -> None:
    for pid in worker_pids(server):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_for_workers(server: BridgeServer, old: list[int], count: int = 4, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = worker_pids(server)
        if len(current) >= count and not set(current) & set(old):
            try:
                if requests.get(server.url + "health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
        time.sleep(0.2)
    raise AssertionError("gunicorn did not replace its workers")


# --------------------------------------------------------------------------------------------- the happy paths


def test_permission_allow_then_deny_across_workers_with_state_checked_after_each_step(
    server: BridgeServer, ws: Path, demo_url: str, demo_token: str
) -> None:
    keys = Secrets()
    thread_id, (interrupt,) = start(server, ws, "please write file", **keys.props())
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "call_demo_write_1"
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["allow_once", "deny"]
    waiting = document(server, thread_id)
    assert list(waiting["execution"]["pending"]) == [interrupt["id"]]
    entry = waiting["execution"]["pending"][interrupt["id"]]
    assert (
        set(entry) == {"value", "sideband", "expiresAt", "announced"} and entry["expiresAt"] == interrupt["expiresAt"]
    )
    # Released with the interrupt commit (docs/design.md#decision-lease-release-before-terminal).
    assert "activeRun" not in waiting
    task_id = waiting["execution"]["taskId"]
    events = resume(server, thread_id, ws, [allow(interrupt)], "success", **keys.props())
    session = custom(events, "iac-code.session.v1")[0]["value"]
    assert session["executionId"] == waiting["execution"]["executionId"] and session["taskId"] == task_id
    assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["call_demo_write_1"]
    assert len(custom(events, "iac-code.artifact.v1")) == 1
    done = document(server, thread_id)
    assert done["execution"]["pending"] == {} and done["execution"]["taskId"] is None
    assert [a["interruptId"] for a in done["appliedResumeDigests"]] == [interrupt["id"]]
    assert a2a_task_state(demo_url, demo_token, task_id) == "TASK_STATE_INPUT_REQUIRED"
    # A second turn on the same thread is denied; the deny stream shows the failed tool.
    second = server.run(
        run_body(thread_id, "write file again", ws, ros_invocation_id="invocation-2"), expect="interrupt"
    )
    (again,) = second[-1]["outcome"]["interrupts"]
    denied = resume(server, thread_id, ws, [answer(again, {"decision": "deny"})], "success", ros="invocation-2")
    assert any("denied" in e.get("delta", "") for e in denied)
    assert_state_clean(server.state_dir, keys.never_stored())


def test_question_and_candidate_answers(server: BridgeServer, ws: Path) -> None:
    thread_id, (question,) = start(server, ws, "ask me a question")
    assert question["reason"] == "input_required" and question["toolCallId"] == "call_demo_ask_1"
    events = resume(server, thread_id, ws, [answer(question, {"freeText": "Medium (4 vCPU)"})], "success")
    results = [(e["toolCallId"], e["content"]) for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results == [("call_demo_ask_1", "Medium (4 vCPU)")]
    assert "".join(e.get("delta", "") for e in events).endswith("You chose: Medium (4 vCPU).")
    thread_id, (choice,) = start(server, ws, "choose one of the candidates")
    assert choice["message"].endswith("- 2: vpc-with-nat")
    events = resume(server, thread_id, ws, [answer(choice, {"selectedId": "2"})], "success")
    assert "".join(e.get("delta", "") for e in events) == "Selected candidate: vpc-with-nat."


def test_two_permissions_answered_in_one_resume(server: BridgeServer, ws: Path) -> None:
    thread_id, interrupts = start(server, ws, "two tools at once")
    assert len(interrupts) == 2
    events = resume(
        server, thread_id, ws, [allow(interrupts[0]), answer(interrupts[1], {"decision": "deny"})], "success"
    )
    assert "".join(e.get("delta", "") for e in events).startswith("Wrote 1 of 2 files")
    assert pending_ids(server, thread_id) == []


# --------------------------------------------------------------------------------------------- matrix 6.6


def test_prestream_rows(server: BridgeServer, ws: Path) -> None:
    assert post_json(server, resume_body(new_thread_id(), ws, [])) == (409, "EXECUTION_LOST")
    thread_id, (interrupt,) = start(server, ws, "please write file")
    assert post_json(server, resume_body(thread_id, ws, [allow(interrupt)], ros="invocation-other")) == (
        409,
        "EXECUTION_LOST",
    )
    assert post_json(server, run_body(thread_id, "a new turn", ws, ros_invocation_id=ROS)) == (409, "RESUME_REQUIRED")
    resume(server, thread_id, ws, [allow(interrupt)], "success")  # still retryable


def test_thread_busy(server: BridgeServer, ws: Path) -> None:
    thread_id = new_thread_id()
    running = StreamReader(server.post(run_body(thread_id, "slow [SLOW 3]", ws, ros_invocation_id=ROS)))
    running.until(lambda evs: bool(evs))
    fake = {"interruptId": "permission-x", "status": "resolved", "payload": {"decision": "deny"}}
    codes = {post_json(server, resume_body(thread_id, ws, [fake])) for _ in range(6)}
    assert codes == {(409, "THREAD_BUSY")}
    assert_valid_agui_stream(running.rest(), expect_terminal="success")
    running.response.close()


@pytest.mark.parametrize(
    ("make_answers", "code"),
    [
        (lambda i: [], "INCOMPLETE_RESUME"),
        (lambda i: [allow(i), allow(i)], "INCOMPLETE_RESUME"),
        (lambda i: [answer({"id": "permission-unknown"}, {"decision": "deny"})], "UNKNOWN_INTERRUPT"),
        (lambda i: [answer(i, {"decision": "allow"})], "RESUME_PAYLOAD_INVALID"),
        (lambda i: [answer(i)], "RESUME_PAYLOAD_INVALID"),
    ],
    ids=["empty", "duplicate", "unknown", "schema", "no-payload"],
)
def test_invalid_resumes_keep_the_interrupt_retryable(
    server: BridgeServer, ws: Path, make_answers: Callable[[dict[str, Any]], list[dict[str, Any]]], code: str
) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")
    assert error_of(resume(server, thread_id, ws, make_answers(interrupt), "RUN_ERROR"))[0] == code
    assert pending_ids(server, thread_id) == [interrupt["id"]]
    resume(server, thread_id, ws, [allow(interrupt)], "success")


def test_repeated_answers_and_nothing_pending(server: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")
    resume(server, thread_id, ws, [allow(interrupt)], "success")
    applied = document(server, thread_id)["appliedResumeDigests"]
    for repeat in ([allow(interrupt)], [answer(interrupt, {"decision": "deny"})]):
        events = resume(server, thread_id, ws, repeat, "RUN_ERROR")
        assert error_of(events) == ("RESUME_ALREADY_APPLIED", "The interrupt response has already been applied.")
        assert not [e for e in events if e["type"] == "TOOL_CALL_RESULT"]  # the tool did not run again
    assert document(server, thread_id)["appliedResumeDigests"] == applied
    other = answer({"id": "permission-never"}, {"decision": "deny"})
    events = resume(server, thread_id, ws, [other], "RUN_ERROR")
    assert error_of(events) == ("EXECUTION_LOST", "The A2A task to resume is unavailable.")


def test_session_restore_rows(server: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")
    real_session = document(server, thread_id)["iacCodeSessionId"]

    def forget_session(state: model.ThreadState) -> None:
        state.session_id = "session-the-kernel-lost"

    edit_state(server, thread_id, forget_session)
    events = resume(server, thread_id, ws, [allow(interrupt)], "RUN_ERROR")
    assert error_of(events) == ("EXECUTION_LOST", "The iac-code session to resume is unavailable.")
    assert pending_ids(server, thread_id) == [interrupt["id"]]

    def restore(state: model.ThreadState) -> None:
        state.session_id = real_session

    edit_state(server, thread_id, restore)
    resume(server, thread_id, ws, [allow(interrupt)], "success")
    syncing_thread, (syncing,) = start(server, ws, "please write file [BACKUP_NOT_READY]")
    events = resume(server, syncing_thread, ws, [allow(syncing)], "RUN_ERROR")
    assert error_of(events) == (
        "SESSION_BACKUP_NOT_READY",
        "Session backup is still synchronizing. Retry after 3 seconds.",
    )
    assert pending_ids(server, syncing_thread) == [syncing["id"]]
    resume(server, syncing_thread, ws, [allow(syncing)], "success")  # the backup has synced meanwhile


def test_gettask_identity_mismatch(server: BridgeServer, ws: Path) -> None:
    other_thread, _ = start(server, ws, "please write file")
    other_task = document(server, other_thread)["execution"]["taskId"]
    thread_id, (interrupt,) = start(server, ws, "please write file")
    own_task = document(server, thread_id)["execution"]["taskId"]

    def point_at(task_id: str) -> Callable[[model.ThreadState], None]:
        def change(state: model.ThreadState) -> None:
            state.execution.task_id = task_id

        return change

    edit_state(server, thread_id, point_at(other_task))
    events = resume(server, thread_id, ws, [allow(interrupt)], "RUN_ERROR")
    assert error_of(events) == ("A2A_PROTOCOL_ERROR", "The A2A task identity does not match the interrupted run.")
    assert pending_ids(server, thread_id) == [interrupt["id"]]
    edit_state(server, thread_id, point_at(own_task))
    resume(server, thread_id, ws, [allow(interrupt)], "success")


def test_kernel_rejecting_the_answer_keeps_it_pending(
    server: BridgeServer, ws: Path, demo_url: str, demo_token: str
) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")

    def wrong_tool(value: str) -> Callable[[model.ThreadState], None]:
        def change(state: model.ThreadState) -> None:
            state.execution.pending[interrupt["id"]].value["toolUseId"] = value

        return change

    edit_state(server, thread_id, wrong_tool("call_the_kernel_never_made"))
    events = resume(server, thread_id, ws, [allow(interrupt)], "RUN_ERROR")
    assert error_of(events) == ("A2A_UNAVAILABLE", "The local A2A execution service rejected the interrupt response.")
    doc = document(server, thread_id)
    assert list(doc["execution"]["pending"]) == [interrupt["id"]]
    assert a2a_task_state(demo_url, demo_token, doc["execution"]["taskId"]) == "TASK_STATE_INPUT_REQUIRED"
    edit_state(server, thread_id, wrong_tool("call_demo_write_1"))
    resume(server, thread_id, ws, [allow(interrupt)], "success")


def test_kernel_down_before_acceptance_keeps_the_interrupt(root: Path, ws: Path) -> None:
    with running_demo_agent("t") as url, bridge_server(url, "t", root / "state-down", root, workers=4) as bridge:
        thread_id, (interrupt,) = start(bridge, ws, "please write file")
        task_id = document(bridge, thread_id)["execution"]["taskId"]
    # The demo agent has stopped: every call to it now fails at the transport.
    with bridge_server(url, "t", root / "state-down", root, workers=4) as bridge:
        events = resume(bridge, thread_id, ws, [allow(interrupt)], "RUN_ERROR")
        assert error_of(events) == ("A2A_UNAVAILABLE", "The local A2A execution service is unavailable.")
        doc = document(bridge, thread_id)
        assert list(doc["execution"]["pending"]) == [interrupt["id"]] and doc["execution"]["taskId"] == task_id


def test_cancelled_question_cancels_the_task(server: BridgeServer, ws: Path, demo_url: str, demo_token: str) -> None:
    thread_id, (question,) = start(server, ws, "ask me a question")
    task_id = document(server, thread_id)["execution"]["taskId"]
    events = resume(server, thread_id, ws, [answer(question, status="cancelled")], "RUN_ERROR")
    assert error_of(events) == ("CANCELLED", "The execution was cancelled by the interrupt response.")
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    assert pending_ids(server, thread_id) == []
    server.run(run_body(thread_id, "hello again", ws, ros_invocation_id="invocation-2"), expect="success")


def test_cancelled_permission_is_a_deny(server: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")
    events = resume(server, thread_id, ws, [answer(interrupt, status="cancelled")], "success")
    assert any("denied" in e.get("delta", "") for e in events)


def test_expired_interrupt(root: Path, ws: Path, demo_url: str, demo_token: str) -> None:
    with bridge_server(demo_url, demo_token, root / "state-ttl", root, workers=4, interrupt_ttl=1) as bridge:
        thread_id, (interrupt,) = start(bridge, ws, "please write file")
        task_id = document(bridge, thread_id)["execution"]["taskId"]
        time.sleep(1.2)
        events = resume(bridge, thread_id, ws, [allow(interrupt)], "RUN_ERROR")
        assert error_of(events)[0] == "EXECUTION_EXPIRED"
        assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
        doc = document(bridge, thread_id)
        assert doc["execution"]["pending"] == {} and doc["execution"]["taskId"] is None
        # A second thread: its expired interrupt is cleaned up by the next new turn (no RESUME_REQUIRED).
        other, _ = start(bridge, ws, "please write file")
        other_task = document(bridge, other)["execution"]["taskId"]
        time.sleep(1.2)
        bridge.run(run_body(other, "something else", ws, ros_invocation_id="invocation-2"), expect="success")
        assert wait_for_task_state(demo_url, demo_token, other_task, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
        # Cancelling an expired interrupt (what @ag-ui/client must send) is the same clean-up, ending
        # RUN_FINISHED cancelled so that client stops waiting; the thread then takes a new turn.
        third, (expiring,) = start(bridge, ws, "please write file")
        time.sleep(1.2)
        events = resume(bridge, third, ws, [answer(expiring, status="cancelled")], "cancelled")
        assert event_types(events) == ["RUN_STARTED", "RUN_FINISHED"]
        bridge.run(run_body(third, "next", ws, ros_invocation_id="invocation-2"), expect="success")


# --------------------------------------------------------------------------------------------- concurrency


def test_twenty_simultaneous_resumes_apply_once(server: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")
    bodies = [resume_body(thread_id, ws, [allow(interrupt)]) for _ in range(20)]

    def fire(body: dict[str, Any]) -> tuple[int, bytes]:
        response = requests.post(server.url, json=body, timeout=60)
        return response.status_code, response.content

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(fire, bodies))
    outcomes: list[str] = []
    tool_results = 0
    for status, raw in results:
        if status == 409:
            outcomes.append(json.loads(raw)["error"]["code"])
            continue
        assert status == 200
        events = assert_valid_agui_stream(raw)
        tool_results += sum(e["type"] == "TOOL_CALL_RESULT" for e in events)
        last = events[-1]
        outcomes.append("success" if last["type"] == "RUN_FINISHED" else last["code"])
    assert outcomes.count("success") == 1, outcomes
    assert set(outcomes) <= {"success", "THREAD_BUSY", "RESUME_ALREADY_APPLIED"}, outcomes
    assert tool_results == 1
    assert len(document(server, thread_id)["appliedResumeDigests"]) == 1


# --------------------------------------------------------------------------------------------- crashes


def test_worker_sigkill_right_after_the_interrupt(server: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(server, ws, "please write file")
    old = worker_pids(server)
    kill_workers(server)
    wait_for_workers(server, old)
    events = resume(server, thread_id, ws, [allow(interrupt)], "success")
    assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["call_demo_write_1"]


def test_server_sigkill_right_after_the_interrupt(root: Path, ws: Path, demo_url: str, demo_token: str) -> None:
    state = root / "state-crash"
    first = BridgeServer(demo_url, demo_token, state, root, workers=4).start()
    try:
        thread_id, (interrupt,) = start(first, ws, "please write file")
    finally:
        first.stop(signal.SIGKILL)
    with bridge_server(demo_url, demo_token, state, root, workers=4) as second:
        resume(second, thread_id, ws, [allow(interrupt)], "success")


def test_sigkill_mid_turn_is_reclaimed_and_the_task_cancelled(
    root: Path, ws: Path, demo_url: str, demo_token: str
) -> None:
    state = root / "state-midturn"
    first = BridgeServer(demo_url, demo_token, state, root, workers=4).start()
    thread_id = new_thread_id()
    try:
        reader = StreamReader(first.post(run_body(thread_id, "slow [SLOW 30]", ws, ros_invocation_id=ROS)))
        events = reader.until(lambda evs: bool(custom(evs, "iac-code.session.v1")))
        task_id = custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
        first.stop(signal.SIGKILL)
        reader.response.close()
    finally:
        first.stop(signal.SIGKILL)
    assert a2a_task_state(demo_url, demo_token, task_id) == "TASK_STATE_WORKING"  # orphaned until next access
    with bridge_server(demo_url, demo_token, state, root, workers=4) as second:
        second.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")
        assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
        assert "activeRun" not in document(second, thread_id)


def test_state_that_refuses_writes_announces_no_interrupt_and_cancels_the_task(
    root: Path, ws: Path, demo_url: str, demo_token: str
) -> None:
    """RLIMIT_FSIZE 0 on the workers makes every state write fail with EFBIG (even as root)."""
    with bridge_server(demo_url, demo_token, root / "state-ro", root, workers=4) as bridge:
        thread_id = new_thread_id()
        reader = StreamReader(bridge.post(run_body(thread_id, "please write file [PAUSE 3]", ws)))
        events = reader.until(lambda evs: bool(custom(evs, "iac-code.session.v1")))
        task_id = custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
        for pid in worker_pids(bridge):
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, 0))
        events = assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_ERROR")
        assert events[-1]["code"] == "STATE_PERSISTENCE_FAILED"
        assert events[-1]["message"] == "The interrupted execution state could not be committed."
        assert not [e for e in events if e["type"] == "RUN_FINISHED"]
        assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
        assert document(bridge, thread_id)["execution"]["pending"] == {}
