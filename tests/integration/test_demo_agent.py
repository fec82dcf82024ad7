"""The demo A2A agent over real HTTP: every scenario, sessions, cancel, GetTask, auth, errors.

The agent runs as a subprocess (``running_demo_agent``) exactly as the bridge's managed child does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import requests

from agui_bridge.demo.testing import running_demo_agent
from agui_bridge.protocol.sse_parser import iter_messages
from tests.support.demo_a2a import AUTH, TOKEN, Stream, assert_turn_finished, rpc, send, user_message
from tests.support.eventually import eventually


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with running_demo_agent(token=TOKEN) as url:
        yield url


def test_plain_turn_has_the_kernel_shape(base_url: str) -> None:
    stream = send(base_url, "say hi")
    assert stream.content_type.startswith("text/event-stream")
    assert stream.raw.count(b"\r\n\r\n") == len(stream.events)
    assert b"\n" not in stream.raw.replace(b"\r\n", b"")
    first = stream.results[0]
    assert list(first) == ["task"]
    task = first["task"]
    assert task["status"] == {"state": "TASK_STATE_SUBMITTED"}
    assert task["history"][0]["parts"] == [{"text": "say hi"}]
    assert task["history"][0]["role"] == "ROLE_USER"
    assert stream.states()[:2] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
    assert all("timestamp" in u["status"] for u in stream.updates()[:2])
    sessions = {m.get("iacCodeSessionId") for m in stream.iac()}
    assert len(sessions) == 1
    assert None not in sessions
    assert stream.deltas() == ["Hello ", "from the ", "demo agent."]
    for update in stream.updates()[2:5]:
        message = update["status"]["message"]
        assert message["messageId"] == f"{task['id']}-message"
        assert message["role"] == "ROLE_AGENT"
        assert message["taskId"] == task["id"]
        assert message["contextId"] == task["contextId"]
    usage = next(m["usage"] for m in stream.iac() if "usage" in m)
    assert usage["inputTokens"] == 100
    assert usage["totalTokens"] == 110
    assert_turn_finished(stream)


def test_session_is_stable_per_context(base_url: str) -> None:
    first = send(base_url, "say hi")
    context_id = first.results[0]["task"]["contextId"]
    session = first.iac()[0]["iacCodeSessionId"]
    second = send(base_url, "again", context_id=context_id)
    assert "task" in second.results[0]
    assert second.task_id != first.task_id
    assert {m["iacCodeSessionId"] for m in second.iac()} == {session}
    # Same taskId after a finished turn: the task is reused and there is no `task` event.
    third = send(base_url, "and again", context_id=context_id, task_id=second.task_id)
    assert "task" not in third.results[0]
    assert third.states()[:2] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
    assert third.task_id == second.task_id
    assert_turn_finished(third)
    other = send(base_url, "say hi")
    assert other.iac()[0]["iacCodeSessionId"] != session


def test_iac_turn_streams_template_and_artifact(base_url: str) -> None:
    stream = send(base_url, "Create a VPC template")
    assert len(stream.deltas()) >= 10
    assert "ROSTemplateFormatVersion" in "".join(stream.deltas())
    artifacts = [r["artifactUpdate"] for r in stream.results if "artifactUpdate" in r]
    assert len(artifacts) == 1
    update = artifacts[0]
    assert update["taskId"] == stream.task_id
    assert update["lastChunk"] is True
    artifact = update["artifact"]
    assert artifact["name"] == "vpc.ros.yaml"
    meta = artifact["metadata"]
    assert meta["uri"] == f"iac-code-artifact://{artifact['artifactId']}/vpc.ros.yaml"
    assert meta["mediaType"] == "application/yaml"
    assert meta["byteSize"] > 0
    assert len(meta["sha256"]) == 64
    assert meta["sourcePath"] == "/workspace/session-1/vpc.ros.yaml"
    (part,) = artifact["parts"]
    assert part["url"] == meta["uri"]
    assert part["filename"] == "vpc.ros.yaml"
    assert part["metadata"] == meta
    assert_turn_finished(stream)


def test_reasoning_turn_sends_raw_thinking_before_text(base_url: str) -> None:
    stream = send(base_url, "[THINK] q")
    thinking = [m["thinking"] for m in stream.iac() if "thinking" in m]
    assert thinking == [{"type": "raw_thinking", "text": "Let me "}, {"type": "raw_thinking", "text": "think..."}]
    first_text = next(i for i, u in enumerate(stream.updates()) if "message" in u["status"])
    last_thinking = max(i for i, m in enumerate(stream.iac()) if "thinking" in m)
    assert last_thinking < first_text
    assert_turn_finished(stream)


def test_tool_turn_statuses_in_order(base_url: str) -> None:
    stream = send(base_url, "please list files")
    tools = [m["tool"] for m in stream.iac() if "tool" in m]
    assert [t["status"] for t in tools] == [
        "started",
        "input_delta",
        "input_delta",
        "input_complete",
        "progress",
        "progress",
        "completed",
    ]
    assert {t["toolUseId"] for t in tools} == {"call_demo_1"}
    assert tools[0]["name"] == "list_files"
    assert tools[3]["toolInput"] == {"path": "."}
    assert tools[3]["inputSummary"]["tool_name"] == "list_files"
    assert tools[4]["mcpProgress"]["progress"] == 0.5
    assert isinstance(tools[-1]["result"], str)
    assert_turn_finished(stream)


def test_failing_turn_ends_failed_with_error(base_url: str) -> None:
    stream = send(base_url, "this will fail")
    assert stream.states() == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_FAILED"]
    last = stream.updates()[-1]
    assert last["status"]["message"]["parts"][0]["text"].startswith("RetryableError")
    assert last["metadata"]["iac_code"]["error"]["retryable"] is False
    assert "iacCodeSessionId" in last["metadata"]["iac_code"]
    got = rpc(base_url, "GetTask", {"id": stream.task_id})
    assert got["result"]["status"]["state"] == "TASK_STATE_FAILED"


def test_long_turn_gives_n_deltas(base_url: str) -> None:
    stream = send(base_url, "[LONG 500]")
    assert len(stream.deltas()) == 500
    assert_turn_finished(stream)


def test_slow_turn_completes(base_url: str) -> None:
    started = time.monotonic()
    stream = send(base_url, "slow [SLOW 0.6]")
    assert time.monotonic() - started >= 0.5
    assert len(stream.deltas()) == 6
    assert_turn_finished(stream)


def test_cancel_stops_a_running_slow_turn(base_url: str) -> None:
    holder: dict[str, Stream] = {}
    reader = threading.Thread(target=lambda: holder.setdefault("s", send(base_url, "slow [SLOW 30]")))
    reader.start()

    def slow_task() -> str:
        listed = rpc(base_url, "ListTasks", {"historyLength": 1})
        ids = [
            str(task["id"])
            for task in listed.get("result", {}).get("tasks", [])
            if task["history"] and task["history"][0]["parts"][0]["text"] == "slow [SLOW 30]"
        ]
        assert ids, "the slow turn is not listed yet"
        return ids[-1]

    task_id = eventually(slow_task, timeout_s=5, interval_s=0.05)
    time.sleep(0.3)
    cancelled_at = time.monotonic()
    result = rpc(base_url, "CancelTask", {"id": task_id})["result"]
    assert result["status"]["state"] == "TASK_STATE_CANCELED"
    assert result["status"]["message"]["parts"] == [{"text": "Task canceled."}]
    reader.join(timeout=5)
    assert not reader.is_alive()
    assert time.monotonic() - cancelled_at < 3
    stream = holder["s"]
    assert stream.task_id == task_id
    assert stream.states()[-1] == "TASK_STATE_CANCELED"
    assert len(stream.deltas()) < 6
    time.sleep(0.6)
    got = rpc(base_url, "GetTask", {"id": task_id})["result"]
    assert got["status"]["state"] == "TASK_STATE_CANCELED"


def test_cancel_a_waiting_task(base_url: str) -> None:
    stream = send(base_url, "please write file")
    result = rpc(base_url, "CancelTask", {"id": stream.task_id})["result"]
    assert result["status"]["state"] == "TASK_STATE_CANCELED"
    assert result["status"]["message"]["messageId"] == f"{stream.task_id}-5"
    assert result["status"]["message"]["parts"] == [{"text": "Task canceled."}]


def test_a_finished_turn_cannot_be_cancelled(base_url: str) -> None:
    """As the kernel: a task whose turn ended is -32002 and stays INPUT_REQUIRED (tests/kernel compares)."""
    stream = send(base_url, "say hi")
    refused = rpc(base_url, "CancelTask", {"id": stream.task_id})
    assert (refused["error"]["code"], refused["error"]["message"]) == (-32002, "Task cannot be canceled")
    got = rpc(base_url, "GetTask", {"id": stream.task_id})["result"]
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_a_new_turn_racing_a_cancel_of_its_context_fails_like_the_kernel(base_url: str) -> None:
    """As the kernel: the context's runtime is torn down while the cancel is handled."""
    waiting = send(base_url, "please write file")
    context_id = waiting.results[0]["task"]["contextId"]
    canceller = threading.Thread(target=rpc, args=(base_url, "CancelTask", {"id": waiting.task_id}))
    canceller.start()
    time.sleep(0.05)  # inside the demo's 0.2 s teardown window
    racing = send(base_url, "say hi", context_id=context_id)
    canceller.join()
    assert [next(iter(r)) for r in racing.results] == ["task", "statusUpdate"]
    failed = racing.updates()[-1]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert failed["status"]["message"]["parts"] == [{"text": "RuntimeError: A2A context runtime missing"}]
    assert failed["status"]["message"]["messageId"] == f"{racing.task_id}-4"
    after = send(base_url, "say hi", context_id=context_id)  # the cancel has been answered
    assert after.states()[-1] == "TASK_STATE_INPUT_REQUIRED"


def test_get_task_and_unknown_task(base_url: str) -> None:
    stream = send(base_url, "say hi")
    got = rpc(base_url, "GetTask", {"id": stream.task_id, "historyLength": 100})["result"]
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert got["metadata"]["iac_code"]["iacCodeSessionId"] == stream.iac()[0]["iacCodeSessionId"]
    assert got["history"][0]["role"] == "ROLE_USER"
    unknown = rpc(base_url, "GetTask", {"id": str(uuid.uuid4())})
    assert "error" in unknown
    assert unknown["error"]["code"] == -32001


def test_missing_version_header_is_a_json_rpc_error(base_url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    params = {"message": user_message("say hi")}
    for method in ("SendStreamingMessage", "GetTask"):
        reply = rpc(base_url, method, params if method != "GetTask" else {"id": "x"}, headers=headers)
        assert reply["error"]["code"] == -32009


def test_malformed_json_is_a_json_rpc_error(base_url: str) -> None:
    resp = requests.post(base_url, data=b"{not json", headers=AUTH, timeout=5)
    assert resp.status_code == 200
    assert resp.json()["error"]["code"] == -32700


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"bearer {TOKEN}", TOKEN])
def test_wrong_or_missing_token_is_401(base_url: str, authorization: str | None) -> None:
    headers = {"A2A-Version": "1.0"}
    if authorization is not None:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": "1", "method": "GetTask", "params": {"id": "x"}}
    resp = requests.post(base_url, json=body, headers=headers, timeout=5)
    assert resp.status_code == 401
    assert resp.headers["content-type"] == "application/json"
    assert "error" in resp.json()
    card = requests.get(f"{base_url}.well-known/agent-card.json", headers=headers, timeout=5)
    assert card.status_code == 401


def test_health_is_open_and_card_needs_token(base_url: str) -> None:
    health = requests.get(f"{base_url}health", timeout=5)
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
    card = requests.get(f"{base_url}.well-known/agent-card.json", headers=AUTH, timeout=5)
    assert card.status_code == 200
    assert card.json()["capabilities"]["streaming"] is True


def test_without_token_everything_is_open() -> None:
    with running_demo_agent() as url:
        assert url.startswith("http://127.0.0.1:")
        body = {"jsonrpc": "2.0", "id": "1", "method": "GetTask", "params": {"id": "x"}}
        resp = requests.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=5)
        assert resp.status_code == 200
        assert resp.json()["error"]["code"] == -32001


def test_disconnect_does_not_stall_or_cancel_the_turn(base_url: str) -> None:
    """A client that goes away mid-stream leaves the task running (as the kernel) and unpaced."""
    body = {
        "jsonrpc": "2.0",
        "id": "1",
        "method": "SendStreamingMessage",
        "params": {"message": user_message("[LONG 3000]")},
    }
    with requests.post(base_url, json=body, headers=AUTH, stream=True, timeout=(5, 30)) as resp:
        first = next(iter_messages(resp.iter_content(chunk_size=None)))
        task_id = json.loads(first.data)["result"]["task"]["id"]

    def turn_finished() -> None:
        assert rpc(base_url, "GetTask", {"id": task_id})["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

    eventually(turn_finished, timeout_s=15, interval_s=0.1)
