"""Turns through the bridge (gunicorn, 2 gevent workers) against the real iac-code 0.16.0 kernel.

Normal text, reasoning, a `bash` tool call, a silence longer than the heartbeat, a `write_file`
permission allowed, denied and answered twice; every stream is checked as AG-UI and captured for the
@ag-ui/client verifier.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
    workspace,
)
from tests.kernel.kernel_harness import Kernel
from tests.support.agui_checks import assert_valid_agui_stream, event_types, sse_comments
from tests.support.harness import BridgeServer, bridge_server, custom, new_thread_id, run_body


@pytest.fixture(scope="module")
def bridge(kernel: Kernel, kernel_root: Path) -> Iterator[BridgeServer]:
    state = kernel_root / "state-turns"
    with bridge_server(kernel.url, kernel.token, state, kernel_root, workers=2, heartbeat_interval=1) as server:
        yield server


@pytest.fixture
def ws(kernel_root: Path) -> Path:
    return workspace(kernel_root)


def test_normal_turn_then_a_second_turn_on_the_same_thread(bridge: BridgeServer, ws: Path) -> None:
    thread_id = new_thread_id()
    events = bridge.run(run_body(thread_id, "hello", ws, ros_invocation_id=ROS), expect="success")
    assert event_types(events)[0] == "RUN_STARTED" and events[-1]["outcome"] == {"type": "success"}
    assert text_of(events) == fake_llm.PLAIN_TEXT
    session = custom(events, "iac-code.session.v1")[0]["value"]
    assert session["taskId"] and session["sessionId"]
    again = bridge.run(run_body(thread_id, "hello again", ws, ros_invocation_id="invocation-2"), expect="success")
    second = custom(again, "iac-code.session.v1")[0]["value"]
    assert second["sessionId"] == session["sessionId"]  # same kernel context and session
    assert text_of(again) == fake_llm.PLAIN_TEXT


def test_reasoning_is_streamed_as_reasoning(bridge: BridgeServer, ws: Path) -> None:
    events = bridge.run(run_body(new_thread_id(), "[REASON] think", ws), expect="success")
    reasoning = "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert reasoning == "Let me think about this carefully."
    assert text_of(events).endswith("the answer is 42.")


def test_bash_tool_call(bridge: BridgeServer, ws: Path) -> None:
    thread_id = new_thread_id()
    events = bridge.run(run_body(thread_id, "[BASH] run it", ws), expect=None)
    if events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "interrupt":
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        events = bridge.run(resume_body(thread_id, ws, [answer(interrupt, "allow_once")]), expect="success")
    assert events[-1]["outcome"] == {"type": "success"}
    results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert any("kernel-tier-bash" in str(content) for content in results), results
    assert text_of(events).endswith(fake_llm.TOOL_DONE_TEXT)


def test_silence_longer_than_the_heartbeat_is_filled_with_heartbeats(bridge: BridgeServer, ws: Path) -> None:
    body = run_body(new_thread_id(), "[SILENT] wait", ws)
    with bridge.post(body) as response:
        assert response.status_code == 200
        raw = b"".join(response.iter_content(chunk_size=None))
    events = assert_valid_agui_stream(raw, expect_terminal="success")
    assert sse_comments(raw).count("heartbeat") >= 2  # 3 s of silence, a 1 s heartbeat
    assert text_of(events) == "Back after a silence."


def test_permission_allowed_runs_the_tool(bridge: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(bridge, ws, "[WRITE] a file")
    assert interrupt["reason"] == "tool_call"
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["allow_once", "deny"]
    assert not (ws / "hello.txt").exists()
    events = bridge.run(resume_body(thread_id, ws, [answer(interrupt, "allow_once")]), expect="success")
    assert (ws / "hello.txt").read_text() == "hello from the kernel tier\n"
    assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == [interrupt["toolCallId"]]
    assert text_of(events).endswith(fake_llm.TOOL_DONE_TEXT)
    done = document(bridge, thread_id)
    assert done["execution"]["pending"] == {} and done["execution"]["taskId"] is None


def test_permission_denied_does_not_run_the_tool(bridge: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(bridge, ws, "[WRITE] a file")
    events = bridge.run(resume_body(thread_id, ws, [answer(interrupt, "deny")]), expect="success")
    assert not (ws / "hello.txt").exists()
    assert text_of(events).endswith(fake_llm.TOOL_DONE_TEXT)
    # The thread takes a new turn afterwards.
    bridge.run(run_body(thread_id, "hello", ws, ros_invocation_id="invocation-2"), expect="success")


def test_permission_answered_twice_is_applied_once(bridge: BridgeServer, ws: Path) -> None:
    thread_id, (interrupt,) = start(bridge, ws, "[WRITE] a file")
    body = resume_body(thread_id, ws, [answer(interrupt, "allow_once")])

    def post(i: int) -> tuple[int, bytes]:
        with requests.post(bridge.url, json={**body, "runId": f"{body['runId']}-{i}"}, stream=True, timeout=60) as r:
            return r.status_code, b"".join(r.iter_content(chunk_size=None))

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(post, range(2)))
    streams = [assert_valid_agui_stream(raw, expect_terminal=None) for status, raw in outcomes if status == 200]
    refused = [raw for status, raw in outcomes if status != 200]
    succeeded = [s for s in streams if s[-1]["type"] == "RUN_FINISHED"]
    assert len(succeeded) == 1, outcomes
    for other in [s for s in streams if s is not succeeded[0]]:
        assert error_code(other) in ("RESUME_ALREADY_APPLIED", "THREAD_BUSY")
    for raw in refused:
        assert b"THREAD_BUSY" in raw
    assert (ws / "hello.txt").exists()
    # A third, later answer (allow or deny) is refused by the bridge: the kernel never sees it.
    for decision in ("allow_once", "deny"):
        again = bridge.run(resume_body(thread_id, ws, [answer(interrupt, decision)]), expect="RUN_ERROR")
        assert error_code(again) == "RESUME_ALREADY_APPLIED"
        assert not [e for e in again if e["type"] == "TOOL_CALL_RESULT"]


def test_a_question_in_a_pipeline_turn(scripted_llm: fake_llm.ScriptedLLM, bridge: BridgeServer, ws: Path) -> None:
    """iac-code 0.16.0 offers the model `ask_user_question` only inside a Pipeline step (normal turns
    have no question tool). The question becomes an interrupt; the chosen option reaches the model as the
    tool's result. The scripted model cannot conclude a Pipeline step (`complete_step`), so the kernel
    then fails the step: the resumed run ends RUN_ERROR A2A_EXECUTION_FAILED."""
    thread_id = new_thread_id()
    events = bridge.run(run_body(thread_id, "[ASK] which size", ws, runMode="pipeline"), expect="interrupt")
    (question,) = events[-1]["outcome"]["interrupts"]
    assert question["reason"] == "input_required" and question["metadata"]["kind"] == "ask_user_question"
    assert question["message"].startswith(fake_llm.QUESTION)
    assert {"selectedId": "m"} in [
        {k: v["const"] for k, v in option["properties"].items()}
        for option in question["responseSchema"]["oneOf"]
        if "selectedId" in option["properties"]
    ]
    body = resume_body(thread_id, ws, [{"interruptId": question["id"], "status": "resolved",
                                         "payload": {"selectedId": "m"}}], runMode="pipeline")  # fmt: skip
    resumed = bridge.run(body, expect="RUN_ERROR")
    results = [(e["toolCallId"], e["content"]) for e in resumed if e["type"] == "TOOL_CALL_RESULT"]
    assert results[0] == (question["toolCallId"], "Medium")
    assert error_code(resumed) == "A2A_EXECUTION_FAILED"
    tool_messages = [m for _p, b in scripted_llm.requests for m in b.get("messages", []) if m.get("role") == "tool"]
    assert any("Medium" in str(m.get("content")) or '"m"' in str(m.get("content")) for m in tool_messages)


def test_gettask_sees_what_the_bridge_reports(bridge: BridgeServer, kernel: Kernel, ws: Path) -> None:
    thread_id, (interrupt,) = start(bridge, ws, "[WRITE] a file")
    task_id = document(bridge, thread_id)["execution"]["taskId"]
    task = get_task(kernel, task_id)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["metadata"]["iac_code"]["input"]["toolUseId"] == interrupt["toolCallId"]
    bridge.run(resume_body(thread_id, ws, [answer(interrupt, "deny")]), expect="success")
