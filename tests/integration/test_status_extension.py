"""The thread status extension through the Flask test client against the demo agent.

`POST /extensions/iac-code/v1/threads/{threadId}/status` with `{"rosInvocationId"}`: the same checks,
order, limits and error envelope as the cancellation extension; the same matching rules (unknown
thread or another caller's rosInvocationId -> 404 EXECUTION_NOT_FOUND); the pending interrupts exactly
as RUN_FINISHED announced them, in insertion order; no message text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.projection.interrupts import build_interrupt
from agui_bridge.store.model import RunLease, format_rfc3339_ms
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream, parse_sse
from tests.support.harness import custom, new_thread_id, run_body
from tests.support.sse import response_chunks

STATUS = "/extensions/iac-code/v1/threads/{}/status"
ROS = "invocation-1"


def status(client: FlaskClient, thread_id: str, body: Any = None, **kwargs: Any) -> Any:
    if "data" not in kwargs:
        kwargs["json"] = {"rosInvocationId": ROS} if body is None else body
    return client.post(STATUS.format(thread_id), **kwargs)


def run(client: FlaskClient, body: dict[str, Any], expect: str = "RUN_FINISHED") -> list[dict[str, Any]]:
    response = client.post("/", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return assert_valid_agui_stream(response.get_data(), expect_terminal=expect)


def resume_body(thread_id: str, workspace: Path, answers: list[dict[str, Any]]) -> dict[str, Any]:
    body = run_body(thread_id, "", workspace, ros_invocation_id=ROS)
    body["messages"] = []
    body["resume"] = answers
    return body


def store_of(client: FlaskClient) -> ThreadStore:
    return ThreadStore(client.application.extensions["agui_bridge"].settings.state_dir)


def test_pending_permission_is_listed_as_announced_and_cleared_by_the_resume(
    client: FlaskClient, settings: Settings, workspace: Path
) -> None:
    thread_id = new_thread_id()
    events = run(client, run_body(thread_id, "please write file", workspace))
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    session = custom(events, "iac-code.session.v1")[0]["value"]

    other_worker = create_app(settings).test_client()  # any worker, and after a restart: the file decides
    answer = status(other_worker, thread_id)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.get_json() == {
        "threadId": thread_id,
        "executionId": session["executionId"],
        "rosInvocationId": ROS,
        "active": False,
        "taskId": session["taskId"],
        "pending": outcome["interrupts"],
    }
    assert "I will write a file" not in answer.get_data(as_text=True)  # no message text

    decision = {
        "interruptId": outcome["interrupts"][0]["id"],
        "status": "resolved",
        "payload": {"decision": "allow_once"},
    }
    resumed = run(client, resume_body(thread_id, workspace, [decision]))
    assert resumed[-1]["outcome"] == {"type": "success"}
    assert [e["toolCallId"] for e in resumed if e["type"] == "TOOL_CALL_RESULT"] == ["call_demo_write_1"]

    after = status(other_worker, thread_id).get_json()
    assert after["pending"] == []
    assert after["active"] is False
    assert after["executionId"] == session["executionId"]
    assert after["threadId"] == thread_id and after["rosInvocationId"] == ROS


@pytest.mark.parametrize(
    ("text", "count"),
    [("ask me a question", 1), ("choose candidates", 1), ("two tools", 2)],
)
def test_every_interrupt_kind_in_insertion_order(client: FlaskClient, workspace: Path, text: str, count: int) -> None:
    thread_id = new_thread_id()
    events = run(client, run_body(thread_id, text, workspace))
    announced = events[-1]["outcome"]["interrupts"]
    assert len(announced) == count
    answer = status(client, thread_id)
    assert answer.status_code == 200
    pending = answer.get_json()["pending"]
    assert pending == announced
    assert [p["id"] for p in pending] == [a["id"] for a in announced]


def test_an_entry_without_its_announced_copy_is_rebuilt(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    announced = run(client, run_body(thread_id, "ask me a question", workspace))[-1]["outcome"]["interrupts"]
    store = store_of(client)
    with store.transaction(thread_id) as txn:
        state = txn.state
        assert state is not None
        for entry in state.execution.pending.values():
            entry.announced = None
        txn.commit(state)
    assert "announced" not in store.path_for(thread_id).read_text()
    state = store.read(thread_id)
    assert state is not None
    expected = [build_interrupt(e.value, format_rfc3339_ms(e.expires_at_ms)) for e in state.execution.pending.values()]
    pending = status(client, thread_id).get_json()["pending"]
    assert pending == expected
    assert pending == announced  # the same builder, the same persisted value and expiry


def test_a_live_run_is_active(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    response = client.post("/", json=run_body(thread_id, "slow [SLOW 20]", workspace), buffered=False)
    try:
        raw = b""
        for chunk in response_chunks(response):
            raw += chunk
            if custom(parse_sse(raw), "iac-code.session.v1"):
                break
        session = custom(parse_sse(raw), "iac-code.session.v1")[0]["value"]
        body = status(client, thread_id).get_json()
        assert body["active"] is True
        assert body["pending"] == []
        assert body["taskId"] == session["taskId"]
        assert body["executionId"] == session["executionId"]
    finally:
        response.close()


def test_an_expired_lease_is_not_active(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    run(client, run_body(thread_id, "hi", workspace))
    store = store_of(client)
    state = store.read(thread_id)
    assert state is not None and state.active_run is None
    with store.transaction(thread_id) as txn:
        assert txn.state is not None
        txn.state.active_run = RunLease("run-x", txn.state.execution.execution_id, "host:1:1", expires_at_ms=1)
        txn.commit(txn.state)
    assert status(client, thread_id).get_json()["active"] is False


@pytest.mark.parametrize(
    ("thread", "body", "status_code", "code", "field"),
    [
        ("unknown", {"rosInvocationId": ROS}, 404, "EXECUTION_NOT_FOUND", None),
        ("THREAD", {"rosInvocationId": "someone-else"}, 404, "EXECUTION_NOT_FOUND", None),
        ("THREAD", {}, 400, "INVALID_INPUT", "/rosInvocationId"),
        ("THREAD", {"rosInvocationId": ""}, 400, "INVALID_INPUT", "/rosInvocationId"),
        ("THREAD", {"rosInvocationId": 7}, 400, "INVALID_INPUT", "/rosInvocationId"),
        ("THREAD", {"rosInvocationId": None}, 400, "INVALID_INPUT", "/rosInvocationId"),
        ("THREAD", ["not", "an", "object"], 400, "INVALID_INPUT", ""),
        ("THREAD", "text", 400, "INVALID_INPUT", ""),
    ],
)
def test_status_rejections(
    client: FlaskClient, workspace: Path, thread: str, body: Any, status_code: int, code: str, field: str | None
) -> None:
    thread_id = new_thread_id()
    run(client, run_body(thread_id, "please write file", workspace))
    target = thread_id if thread == "THREAD" else f"{thread}-{thread_id}"
    answer = status(client, target, body)
    assert answer.status_code == status_code
    error = answer.get_json()["error"]
    assert error["code"] == code
    assert error.get("field") == field
    assert set(answer.get_json()) == {"error"}


@pytest.mark.parametrize(
    ("kwargs", "status_code", "code"),
    [
        ({"data": '{"rosInvocationId":"r"}', "content_type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        ({"data": "{}"}, 415, "UNSUPPORTED_MEDIA_TYPE"),  # no Content-Type at all
        ({"data": "{not json", "content_type": "application/json"}, 400, "INVALID_JSON"),
        ({"data": "", "content_type": "application/json"}, 400, "INVALID_JSON"),
        ({"data": "x" * 70_000, "content_type": "application/json"}, 413, "REQUEST_TOO_LARGE"),
        ({"data": "x" * 70_000, "content_type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"),  # 415 before 413
        ({"data": json.dumps({"rosInvocationId": "r", "pad": "x" * 65_536}), "content_type": "application/json"},
         413, "REQUEST_TOO_LARGE"),
    ],
)  # fmt: skip
def test_status_body_checks(client: FlaskClient, kwargs: dict[str, Any], status_code: int, code: str) -> None:
    answer = status(client, "t", **kwargs)
    assert (answer.status_code, answer.get_json()["error"]["code"]) == (status_code, code)


def test_messages_are_localised_from_accept_language(client: FlaskClient) -> None:
    answer = status(client, "t", {}, headers={"Accept-Language": "de-DE, en;q=0.5"})
    assert answer.get_json()["error"]["message"] == "rosInvocationId ist erforderlich."
    too_large = status(
        client, "t", data="x" * 70_000, content_type="application/json", headers={"Accept-Language": "ja"}
    )
    assert too_large.get_json()["error"]["message"] == "ステータスリクエストの本文が大きすぎます。"


def test_status_requires_the_bearer_token_first(settings: Settings) -> None:
    client = create_app(settings.replace(auth_token="s3cret")).test_client()
    for kwargs in ({"json": {"rosInvocationId": "r"}}, {"data": "garbage", "content_type": "text/plain"}):
        answer = client.post(STATUS.format("t"), **kwargs)
        assert (answer.status_code, answer.get_json()["error"]["code"]) == (401, "UNAUTHORIZED")
    wrong = status(client, "t", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = status(client, "t", headers={"Authorization": "Bearer s3cret"})
    assert (ok.status_code, ok.get_json()["error"]["code"]) == (404, "EXECUTION_NOT_FOUND")


def test_unreadable_state_is_503(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    run(client, run_body(thread_id, "hi", workspace))
    store_of(client).path_for(thread_id).write_text("{ corrupt")
    answer = status(client, thread_id)
    assert (answer.status_code, answer.get_json()["error"]["code"]) == (503, "STATE_UNAVAILABLE")


def test_thread_ids_that_are_not_path_safe(client: FlaskClient, workspace: Path) -> None:
    thread_id = "Team/Thread 1 ü"
    run(client, run_body(thread_id, "please write file", workspace))
    answer = client.post(STATUS.format(quote(thread_id, safe="")), json={"rosInvocationId": ROS})
    assert answer.status_code == 200
    assert answer.get_json()["threadId"] == thread_id
    assert len(answer.get_json()["pending"]) == 1


def test_only_post_is_routed(client: FlaskClient) -> None:
    assert client.get(STATUS.format("t")).status_code == 405
