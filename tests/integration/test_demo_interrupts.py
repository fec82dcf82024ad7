"""The demo agent's interrupts over real HTTP: permissions, questions, candidates, GetTask,
SubscribeToTask, CancelTask and ``/iac-code/session/ensure-restored``, as the kernel recordings show.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from agui_bridge.demo.testing import running_demo_agent
from agui_bridge.protocol.sse_parser import parse_body
from tests.support.demo_a2a import AUTH, TOKEN, Stream, assert_turn_finished, rpc, send

PERMISSION_KEYS = {"schemaVersion", "kind", "requestTaskId", "inputId", "toolUseId", "decision"}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with running_demo_agent(token=TOKEN) as url:
        yield url


def post_message(base_url: str, parts: list[dict[str, Any]], context_id: str, task_id: str) -> requests.Response:
    body = {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": parts,
                "metadata": {"iac_code": {"cwd": "/workspace/session-1"}},
                "taskId": task_id,
                "contextId": context_id,
            },
            "configuration": {"acceptedOutputModes": ["text/plain"]},
        },
    }
    return requests.post(base_url, json=body, headers=AUTH, timeout=(5, 30))


def as_stream(resp: requests.Response) -> Stream:
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream"), resp.text
    stream = Stream(resp.headers["content-type"], resp.content)
    stream.events.extend(json.loads(message.data) for message in parse_body(resp.content))
    return stream


def answer_payload(waiting: dict[str, Any], decision: str) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "kind": "permission",
        "requestTaskId": waiting["requestTaskId"],
        "inputId": waiting["inputId"],
        "toolUseId": waiting["toolUseId"],
        "decision": decision,
    }


def answer(base_url: str, waiting: dict[str, Any], decision: str, **extra: Any) -> requests.Response:
    part = {"data": {**answer_payload(waiting, decision), **extra}, "mediaType": "application/json"}
    return post_message(base_url, [part], waiting["contextId"], waiting["requestTaskId"])


def last_iac(stream: Stream) -> dict[str, Any]:
    return dict(stream.updates()[-1]["metadata"]["iac_code"])


def start_waiting(base_url: str, text: str) -> tuple[Stream, dict[str, Any]]:
    stream = send(base_url, text)
    assert stream.states()[-1] == "TASK_STATE_INPUT_REQUIRED"
    return stream, last_iac(stream)["input"]


def get_task(base_url: str, task_id: str) -> dict[str, Any]:
    result: dict[str, Any] = rpc(base_url, "GetTask", {"id": task_id, "historyLength": 100})["result"]
    return result


def test_permission_request_has_the_kernel_shape(base_url: str) -> None:
    stream, waiting = start_waiting(base_url, "please write file x.yaml")
    tools = [m["tool"] for m in stream.iac() if "tool" in m]
    assert [t["status"] for t in tools] == ["started", "input_delta", "input_delta", "input_complete"]
    assert tools[0]["name"] == "write_file"
    iac = last_iac(stream)
    assert iac["permission"] == {
        "autoApproved": False,
        "toolUseId": tools[0]["toolUseId"],
        "toolName": "write_file",
        "pending": True,
    }
    assert "pendingPermissions" not in iac
    assert waiting["schemaVersion"] == 1
    assert waiting["kind"] == "permission"
    assert waiting["requestTaskId"] == stream.task_id
    assert waiting["contextId"] == stream.results[0]["task"]["contextId"]
    assert waiting["inputId"].startswith("permission-")
    assert waiting["toolUseId"] == tools[0]["toolUseId"]
    assert waiting["toolName"] == "write_file"
    assert waiting["prompt"] == "Write /workspace/x.yaml. Allow once?"
    assert waiting["title"] and waiting["safeSummary"].startswith("write_file: ")
    assert waiting["required"] is True
    assert waiting["language"] == "en"
    assert [o["id"] for o in waiting["options"]] == ["allow_once", "deny"]
    # A second turn of the same scenario gets a fresh inputId.
    _, other = start_waiting(base_url, "permission please")
    assert other["inputId"] != waiting["inputId"]


def test_allow_once_runs_the_tool_and_gettask_stays_stale(base_url: str) -> None:
    stream, waiting = start_waiting(base_url, "write file")
    task_id = stream.task_id
    snapshot = get_task(base_url, task_id)
    assert snapshot["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    meta = snapshot["metadata"]["iac_code"]
    assert meta["input"]["inputId"] == waiting["inputId"]
    assert meta["permission"]["pending"] is True
    assert meta["executionControl"]["executionStatus"] == "input-required"
    assert meta["executionControl"]["taskId"] == task_id

    resumed = as_stream(answer(base_url, waiting, "allow_once"))
    first = resumed.updates()[0]
    assert first["status"]["state"] == "TASK_STATE_WORKING"
    assert first["metadata"]["iac_code"] == {
        "inputReceived": {"toolUseId": waiting["toolUseId"], "kind": "permission", "inputId": waiting["inputId"]}
    }
    assert "task" not in resumed.results[0]
    (artifact,) = [r["artifactUpdate"] for r in resumed.results if "artifactUpdate" in r]
    assert artifact["artifact"]["name"] == "x.yaml"
    completed = next(m["tool"] for m in resumed.iac() if "tool" in m)
    assert completed["status"] == "completed"
    assert completed["result"].startswith("Successfully wrote")
    assert completed["artifact"]["artifactId"] == artifact["artifact"]["artifactId"]
    assert_turn_finished(resumed)
    assert "".join(resumed.deltas()) == "The tool ran; all done."

    after = get_task(base_url, task_id)
    assert after["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert after["metadata"]["iac_code"]["input"]["inputId"] == waiting["inputId"]  # stale, as the kernel


def test_deny_fails_the_tool(base_url: str) -> None:
    _, waiting = start_waiting(base_url, "write file")
    resumed = as_stream(answer(base_url, waiting, "deny"))
    assert "inputReceived" in resumed.iac()[0]
    tool = next(m["tool"] for m in resumed.iac() if "tool" in m)
    assert tool["status"] == "failed"
    assert "denied" in tool["result"]
    assert not any("artifactUpdate" in r for r in resumed.results)
    assert_turn_finished(resumed)


def test_answer_validation_like_the_kernel(base_url: str) -> None:
    _, waiting = start_waiting(base_url, "write file")
    unknown = answer(base_url, {**waiting, "inputId": "permission-" + "0" * 32}, "allow_once")
    assert unknown.status_code == 200
    assert unknown.headers["content-type"].startswith("application/json")
    assert unknown.json()["error"]["code"] == -32602
    assert unknown.json()["error"]["message"] == "permission_resume_invalid: pending permission is not active."
    extra = answer(base_url, waiting, "allow_once", note="x")
    assert extra.status_code == 200
    assert extra.json()["error"] == {
        **extra.json()["error"],
        "code": -32602,
        "message": "Permission response payload fields do not match schemaVersion 1.",
    }
    # Still pending after both rejections; the real answer works, a duplicate only acknowledges.
    assert_turn_finished(as_stream(answer(base_url, waiting, "allow_once")))
    duplicate = as_stream(answer(base_url, waiting, "allow_once"))
    assert len(duplicate.events) == 1
    assert duplicate.states() == ["TASK_STATE_WORKING"]
    assert duplicate.iac()[0]["inputReceived"]["inputId"] == waiting["inputId"]


def test_text_while_permission_pending_is_guidance(base_url: str) -> None:
    stream, waiting = start_waiting(base_url, "write file")
    guidance = send(base_url, "use another region; and a permission", waiting["contextId"], stream.task_id)
    assert guidance.states()[:2] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
    assert_turn_finished(guidance)
    assert get_task(base_url, stream.task_id)["metadata"]["iac_code"]["input"]["inputId"] == waiting["inputId"]
    assert_turn_finished(as_stream(answer(base_url, waiting, "allow_once")))


def test_two_tools_wait_together_and_finish_after_both_answers(base_url: str) -> None:
    stream = send(base_url, "use two tools")
    iac = last_iac(stream)
    first = iac["input"]
    (second,) = iac["pendingPermissions"]
    assert first["toolUseId"] != second["toolUseId"]
    assert first["inputId"] != second["inputId"]
    assert second["kind"] == "permission"
    assert second["required"] is True
    partial = as_stream(answer(base_url, second, "deny"))
    assert len(partial.events) == 1
    assert partial.iac()[0]["inputReceived"]["inputId"] == second["inputId"]
    meta = get_task(base_url, stream.task_id)["metadata"]["iac_code"]
    assert meta["input"]["inputId"] == first["inputId"]
    assert meta["pendingPermissions"] == []
    done = as_stream(answer(base_url, first, "allow_once"))
    tools = {m["tool"]["toolUseId"]: m["tool"]["status"] for m in done.iac() if "tool" in m}
    assert tools == {first["toolUseId"]: "completed", second["toolUseId"]: "failed"}
    assert "".join(done.deltas()) == "Wrote 1 of 2 files; all done."
    assert_turn_finished(done)


def test_question_is_answered_as_text_and_echoed(base_url: str) -> None:
    stream, waiting = start_waiting(base_url, "ask me a question")
    assert waiting["kind"] == "ask_user_question"
    assert waiting["allowFreeText"] is True
    assert waiting["prompt"] == "Which instance size should I use?"
    assert all(set(o) == {"id", "label"} for o in waiting["options"])
    assert waiting["toolName"] == "ask_user_question"
    assert "permission" not in last_iac(stream)
    resumed = as_stream(post_message(base_url, [{"text": "Large (8 vCPU)"}], waiting["contextId"], stream.task_id))
    assert resumed.iac()[0]["inputReceived"]["inputId"] == waiting["inputId"]
    tool = next(m["tool"] for m in resumed.iac() if "tool" in m)
    assert tool == {
        "name": "ask_user_question",
        "toolUseId": waiting["toolUseId"],
        "status": "completed",
        "result": "Large (8 vCPU)",
    }
    assert "".join(resumed.deltas()) == "You chose: Large (8 vCPU)."
    assert_turn_finished(resumed)


def test_candidate_selection_is_answered_as_text(base_url: str) -> None:
    stream, waiting = start_waiting(base_url, "choose one of the candidates")
    assert waiting["kind"] == "candidate_selection"
    assert [o["candidate_index"] for o in waiting["options"]] == [0, 1, 2]
    assert all("name" in o for o in waiting["options"])
    resumed = as_stream(post_message(base_url, [{"text": "1"}], waiting["contextId"], stream.task_id))
    assert "".join(resumed.deltas()) == "Selected candidate: vpc-multi-zone."
    assert_turn_finished(resumed)


def test_subscribe_to_an_idle_task_is_not_active(base_url: str) -> None:
    stream, _ = start_waiting(base_url, "write file")
    body = {"jsonrpc": "2.0", "id": "1", "method": "SubscribeToTask", "params": {"id": stream.task_id}}
    resp = requests.post(base_url, json=body, headers=AUTH, timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    error = resp.json()["error"]
    assert error["code"] == -32001
    assert error["message"] == f"Task {stream.task_id} is not active"


def test_cancel_a_waiting_task(base_url: str) -> None:
    stream, waiting = start_waiting(base_url, "write file")
    result = rpc(base_url, "CancelTask", {"id": stream.task_id})["result"]
    assert result["status"]["state"] == "TASK_STATE_CANCELED"
    assert result["status"]["message"]["parts"] == [{"text": "Task canceled."}]
    assert get_task(base_url, stream.task_id)["status"]["state"] == "TASK_STATE_CANCELED"
    late = answer(base_url, waiting, "allow_once")
    assert late.json()["error"]["code"] == -32602


def ensure_restored(base_url: str, session_id: str, task_id: str = "t") -> requests.Response:
    body = {"cwd": "/workspace/session-1", "sessionId": session_id, "taskId": task_id}
    return requests.post(f"{base_url}iac-code/session/ensure-restored", json=body, headers=AUTH, timeout=10)


def test_ensure_restored(base_url: str) -> None:
    stream = send(base_url, "say hi")
    session = stream.iac()[0]["iacCodeSessionId"]
    ok = ensure_restored(base_url, session, stream.task_id)
    assert (ok.status_code, ok.json()) == (200, {"status": "current"})
    assert ensure_restored(base_url, str(uuid.uuid4())).status_code == 404
    syncing = send(base_url, "hello [BACKUP_NOT_READY]")
    busy = ensure_restored(base_url, syncing.iac()[0]["iacCodeSessionId"], syncing.task_id)
    assert busy.status_code == 409
    error = busy.json()["error"]
    assert error["code"] == "SESSION_BACKUP_NOT_READY"
    assert error["retryable"] is True
    assert error["message"]
    retried = ensure_restored(base_url, syncing.iac()[0]["iacCodeSessionId"], syncing.task_id)
    assert (retried.status_code, retried.json()) == (200, {"status": "current"})  # synced by the retry
    assert requests.post(f"{base_url}iac-code/session/ensure-restored", json={}, timeout=10).status_code == 401
