"""The cancellation extension through the Flask test client against the demo agent (docs/design.md#cancellation)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream, parse_sse
from tests.support.harness import custom, new_thread_id, run_body, wait_for_task_state
from tests.support.sse import response_chunks

CANCEL = "/extensions/iac-code/v1/executions/{}/cancel"


def cancel(client: FlaskClient, execution_id: str, body: Any, **kwargs: Any) -> Any:
    return client.post(CANCEL.format(execution_id), json=body, **kwargs)


def start_slow_run(client: FlaskClient, thread_id: str, workspace: Path) -> tuple[Any, dict[str, Any], bytes]:
    response = client.post("/", json=run_body(thread_id, "slow [SLOW 20]", workspace), buffered=False)
    raw = b""
    for chunk in response_chunks(response):
        raw += chunk
        session = custom(parse_sse(raw), "iac-code.session.v1")
        if session:
            return response, session[0]["value"], raw
    raise AssertionError("no session event")


def test_cancel_of_an_in_flight_run_ends_it_with_cancelled(
    client: FlaskClient, workspace: Path, demo_url: str, demo_token: str
) -> None:
    thread_id = new_thread_id()
    response, session, raw = start_slow_run(client, thread_id, workspace)
    result: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: result.update(raw=raw + b"".join(response_chunks(response))))
    reader.start()
    other = create_app(client.application.extensions["agui_bridge"].settings).test_client()  # another "worker"
    answer = cancel(other, session["executionId"], {"threadId": thread_id, "rosInvocationId": "invocation-1"})
    assert answer.status_code == 200
    assert answer.get_json() == {"executionId": session["executionId"], "status": "cancelled"}
    reader.join(15)
    events = assert_valid_agui_stream(result["raw"], expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
    assert wait_for_task_state(demo_url, demo_token, session["taskId"], "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    again = cancel(other, session["executionId"], {"threadId": thread_id, "rosInvocationId": "invocation-1"})
    assert again.get_json() == {"executionId": session["executionId"], "status": "already_terminal"}
    response.close()


def test_a_task_the_kernel_already_cancelled_is_not_a_503(
    client: FlaskClient, workspace: Path, demo_url: str, demo_token: str
) -> None:
    """The owner's own cancel (its client went away) can reach the kernel first: the extension's CancelTask
    then answers -32002 "cannot be canceled", which means the work is already stopped, not that A2A failed."""
    thread_id = new_thread_id()
    response, session, _ = start_slow_run(client, thread_id, workspace)
    kernel = requests.post(
        demo_url,
        json={"jsonrpc": "2.0", "id": "first", "method": "CancelTask", "params": {"id": session["taskId"]}},
        headers={"A2A-Version": "1.0", "Authorization": f"Bearer {demo_token}"},
        timeout=5,
    )
    assert kernel.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    answer = cancel(client, session["executionId"], {"threadId": thread_id, "rosInvocationId": "invocation-1"})
    assert answer.status_code == 200, answer.get_data()
    assert answer.get_json() == {"executionId": session["executionId"], "status": "cancelled"}
    response.close()


def test_cancel_works_after_a_restart_and_frees_the_thread(settings: Settings, workspace: Path) -> None:
    thread_id = new_thread_id()
    events = assert_valid_agui_stream(
        create_app(settings).test_client().post("/", json=run_body(thread_id, "hi", workspace)).get_data()
    )
    execution_id = custom(events, "iac-code.session.v1")[0]["value"]["executionId"]
    restarted = create_app(settings).test_client()
    answer = cancel(restarted, execution_id, {"threadId": thread_id, "rosInvocationId": "invocation-1"})
    assert answer.get_json()["status"] == "already_terminal"  # a finished turn retires its execution


@pytest.mark.parametrize(
    ("execution", "body", "status", "code"),
    [
        ("unknown", {"threadId": "no-such-thread", "rosInvocationId": "invocation-1"}, 404, "EXECUTION_NOT_FOUND"),
        ("CURRENT", {"threadId": "THREAD", "rosInvocationId": "someone-else"}, 404, "EXECUTION_NOT_FOUND"),
        ("unknown", {"threadId": "THREAD", "rosInvocationId": "invocation-1"}, 404, "EXECUTION_NOT_FOUND"),
        ("CURRENT", {"threadId": "THREAD"}, 400, "INVALID_INPUT"),
        ("CURRENT", {"threadId": "", "rosInvocationId": "x"}, 400, "INVALID_INPUT"),
        ("CURRENT", ["not", "an", "object"], 400, "INVALID_INPUT"),
    ],
)
def test_cancel_rejections(
    client: FlaskClient, workspace: Path, execution: str, body: Any, status: int, code: str
) -> None:
    thread_id = new_thread_id()
    response, session, _ = start_slow_run(client, thread_id, workspace)
    try:
        if isinstance(body, dict):
            body = {k: (thread_id if v == "THREAD" else v) for k, v in body.items()}
        execution_id = session["executionId"] if execution == "CURRENT" else execution
        answer = cancel(client, execution_id, body)
        assert answer.status_code == status
        assert answer.get_json()["error"]["code"] == code
        state = ThreadStore(client.application.extensions["agui_bridge"].settings.state_dir).read(thread_id)
        assert state is not None and state.active_run is not None  # nothing was cancelled
    finally:
        response.close()


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"data": "{}", "content_type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        ({"data": "{not json", "content_type": "application/json"}, 400, "INVALID_JSON"),
        ({"data": "x" * 70_000, "content_type": "application/json"}, 413, "REQUEST_TOO_LARGE"),
    ],
)
def test_cancel_body_checks(client: FlaskClient, kwargs: dict[str, Any], status: int, code: str) -> None:
    answer = client.post(CANCEL.format("e"), **kwargs)
    assert (answer.status_code, answer.get_json()["error"]["code"]) == (status, code)


def test_cancel_requires_the_bearer_token(settings: Settings) -> None:
    client = create_app(settings.replace(auth_token="s3cret")).test_client()
    answer = cancel(client, "e", {"threadId": "t", "rosInvocationId": "r"})
    assert (answer.status_code, answer.get_json()["error"]["code"]) == (401, "UNAUTHORIZED")
    ok = cancel(client, "e", {"threadId": "t", "rosInvocationId": "r"}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 404
