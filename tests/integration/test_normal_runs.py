"""Normal runs through the Flask test client (thread back-end) against the real demo A2A agent."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.hooks import worker_host
from tests.support.agui_checks import assert_valid_agui_stream, event_types, parse_sse, sse_comments
from tests.support.harness import custom, new_thread_id, run_body, wait_for_task_state
from tests.support.sse import response_chunks


def run(client: FlaskClient, body: dict[str, Any], expect: str | None = None, **headers: str) -> list[dict[str, Any]]:
    response = client.post("/", json=body, headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["X-Accel-Buffering"] == "no"
    return assert_valid_agui_stream(response.get_data(), expect_terminal=expect)


def test_plain_text_run_streams_text_session_and_usage(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    body = run_body(thread_id, "say hi", workspace)
    events = run(client, body, "success")
    assert events[0] == {
        "type": "RUN_STARTED",
        "threadId": thread_id,
        "runId": body["runId"],
        "protocolVersion": "1.0",
        "timestamp": events[0]["timestamp"],
    }
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text
    session = custom(events, "iac-code.session.v1")
    assert len(session) == 1
    value = session[0]["value"]
    assert value["threadId"] == thread_id and value["aguiRunId"] == body["runId"]
    assert value["contextId"].startswith("agui-") and value["taskId"] and value["sessionId"]
    finished = events[-1]
    assert finished["outcome"] == {"type": "success"}
    assert finished["usage"][0]["totalTokens"] > 0


def test_iac_answer_emits_the_template_as_an_artifact(client: FlaskClient, workspace: Path) -> None:
    events = run(client, run_body(new_thread_id(), "Create a VPC template", workspace), "success")
    artifacts = custom(events, "iac-code.artifact.v1")
    assert len(artifacts) == 1
    assert artifacts[0]["value"]["schemaVersion"] == 1
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "ROSTemplateFormatVersion" in text or "VPC" in text


def test_reasoning_is_projected_before_text(client: FlaskClient, workspace: Path) -> None:
    types = event_types(run(client, run_body(new_thread_id(), "[THINK] why?", workspace), "success"))
    assert types.index("REASONING_START") < types.index("REASONING_END") < types.index("TEXT_MESSAGE_START")


def test_tool_call_with_progress_and_result(client: FlaskClient, workspace: Path) -> None:
    events = run(client, run_body(new_thread_id(), "use a tool to list files", workspace), "success")
    types = event_types(events)
    for expected in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"):
        assert expected in types
    assert types.index("TOOL_CALL_END") < types.index("TOOL_CALL_RESULT")
    progress = custom(events, "iac-code.tool-progress.v1")
    assert progress and progress[0]["value"]["status"] == "progress"
    args = next(e for e in events if e["type"] == "TOOL_CALL_ARGS")
    json.loads(args["delta"])


def test_failing_turn_ends_with_a2a_execution_failed(client: FlaskClient, workspace: Path) -> None:
    events = run(client, run_body(new_thread_id(), "please fail", workspace), "RUN_ERROR")
    assert events[-1]["code"] == "A2A_EXECUTION_FAILED"
    assert events[-1]["message"] == "The A2A execution failed."


def test_run_error_message_is_localised(client: FlaskClient, workspace: Path) -> None:
    events = run(client, run_body(new_thread_id(), "please fail", workspace, preferredLanguage="de-DE"), "RUN_ERROR")
    assert events[-1]["code"] == "A2A_EXECUTION_FAILED"
    assert events[-1]["message"] == "Die A2A-Ausführung ist fehlgeschlagen."  # the German catalog's text


def test_upstream_down_gives_a2a_unavailable(settings: Settings, workspace: Path) -> None:
    from agui_bridge.demo.testing import free_port

    app = create_app(settings.replace(a2a_url=f"http://127.0.0.1:{free_port()}/"))
    events = run(app.test_client(), run_body(new_thread_id(), "hi", workspace), "RUN_ERROR")
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "A2A_UNAVAILABLE"
    assert events[-1]["message"] == "The local A2A execution service is unavailable."


class KernelClientLog(logging.Handler):
    """The kernel client's records, whatever the process's logging set-up (propagation may be off)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@pytest.mark.parametrize(
    ("token", "language", "message"),
    [
        ("wrong-token-7f3a", "en",
         "The local A2A execution service refused the adapter's credentials (a wrong or missing A2A token)."),
        (None, "de-DE", "Der lokale A2A-Ausführungsdienst hat die Zugangsdaten des Adapters abgelehnt (falsches oder "
         "fehlendes A2A-Token)."),
    ],
    ids=["wrong-token", "no-token"],
)  # fmt: skip
def test_a_kernel_refusing_the_token_is_reported_as_a_refusal_not_as_down(
    settings: Settings, workspace: Path, token: str | None, language: str, message: str
) -> None:
    logger = logging.getLogger("agui_bridge.kernel.client")
    captured = KernelClientLog()
    logger.addHandler(captured)
    try:
        app = create_app(settings.replace(a2a_token=token))
        body = run_body(new_thread_id(), "hi", workspace, preferredLanguage=language)
        events = run(app.test_client(), body, "RUN_ERROR")
    finally:
        logger.removeHandler(captured)
    assert (events[-1]["code"], events[-1]["message"]) == ("A2A_UNAVAILABLE", message)
    refusals = [line for line in captured.lines if "refused the bridge's credentials (HTTP 401)" in line]
    assert refusals and refusals[0].startswith("ERROR ") and "IAC_CODE_AGUI_A2A_TOKEN" in refusals[0], captured.lines
    assert not token or all(token not in line for line in captured.lines)  # the token itself is never logged


def test_wrong_upstream_token_gives_a2a_unavailable(settings: Settings, workspace: Path) -> None:
    app = create_app(settings.replace(a2a_token="wrong"))
    events = run(app.test_client(), run_body(new_thread_id(), "hi", workspace), "RUN_ERROR")
    assert events[-1]["code"] == "A2A_UNAVAILABLE"


def test_heartbeat_comment_is_sent_while_upstream_is_silent(settings: Settings, workspace: Path) -> None:
    app = create_app(settings.replace(heartbeat_interval_s=0.2))
    response = app.test_client().post("/", json=run_body(new_thread_id(), "slow [SLOW 2]", workspace))
    raw = response.get_data()
    assert "heartbeat" in sse_comments(raw)
    assert all(e.get("name") != "heartbeat" and e.get("object") != "heartbeat" for e in parse_sse(raw))
    assert_valid_agui_stream(raw, expect_terminal="success")


def test_disconnect_cancels_the_a2a_task(
    client: FlaskClient, workspace: Path, demo_url: str, demo_token: str, state_dir: Path
) -> None:
    thread_id = new_thread_id()
    response = client.post("/", json=run_body(thread_id, "slow [SLOW 20]", workspace), buffered=False)
    task_id = None
    for chunk in response_chunks(response):
        for event in parse_sse(chunk):
            if event.get("name") == "iac-code.session.v1":
                task_id = event["value"]["taskId"]
        if task_id:
            break
    assert task_id
    response.close()  # the client goes away mid-run
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    state = ThreadStore(state_dir).read(thread_id)
    assert state is not None and state.active_run is None and state.execution.task_id is None


def test_second_run_on_a_busy_thread_is_thread_busy(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    first = client.post("/", json=run_body(thread_id, "slow [SLOW 3]", workspace), buffered=False)
    next(response_chunks(first))
    second = client.post("/", json=run_body(thread_id, "hi", workspace))
    assert second.status_code == 409
    assert second.get_json()["error"]["code"] == "THREAD_BUSY"
    first.close()


def test_duplicate_and_conflicting_run_ids(client: FlaskClient, workspace: Path) -> None:
    thread_id = new_thread_id()
    body = run_body(thread_id, "hi", workspace)
    run(client, body, "success")
    again = client.post("/", json=body)
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "DUPLICATE_RUN_ID"
    changed = dict(body, messages=[{"id": "m2", "role": "user", "content": "other"}])
    conflict = client.post("/", json=changed)
    assert conflict.status_code == 409 and conflict.get_json()["error"]["code"] == "RUN_ID_CONFLICT"


def test_thread_survives_a_bridge_restart_between_turns(settings: Settings, workspace: Path) -> None:
    thread_id = new_thread_id()
    first = run(create_app(settings).test_client(), run_body(thread_id, "hi", workspace), "success")
    second = run(create_app(settings).test_client(), run_body(thread_id, "again", workspace), "success")
    one, two = custom(first, "iac-code.session.v1")[0]["value"], custom(second, "iac-code.session.v1")[0]["value"]
    assert one["contextId"] == two["contextId"]
    assert one["sessionId"] == two["sessionId"]
    assert one["executionId"] != two["executionId"]
    assert one["taskId"] != two["taskId"]


def test_binding_conflict_when_the_workspace_moves(client: FlaskClient, workspace: Path, tmp_path: Path) -> None:
    thread_id = new_thread_id()
    run(client, run_body(thread_id, "hi", workspace), "success")
    other = tmp_path / "elsewhere"
    response = client.post("/", json=run_body(thread_id, "hi", other))
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "THREAD_BINDING_CONFLICT"


def test_lease_of_a_dead_owner_is_reclaimed(settings: Settings, workspace: Path, state_dir: Path) -> None:
    thread_id = new_thread_id()
    client = create_app(settings).test_client()
    run(client, run_body(thread_id, "hi", workspace), "success")
    store = ThreadStore(state_dir)
    from agui_bridge.store.model import RunLease

    with store.transaction(thread_id) as txn:
        state = txn.state
        assert state is not None
        dead_owner = f"{socket.gethostname()}:999999999:1"  # same host, no such pid: its worker died
        state.active_run = RunLease(
            "ghost-run", state.execution.execution_id, dead_owner, int(time.time() * 1000) + 60000
        )
        txn.commit(state)
    run(client, run_body(thread_id, "hi again", workspace), "success")


@pytest.mark.parametrize("text", ["[LONG 300]"])
def test_long_answer_keeps_every_delta(client: FlaskClient, workspace: Path, text: str) -> None:
    events = run(client, run_body(new_thread_id(), text, workspace), "success")
    assert sum(1 for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == 300


def test_drain_refuses_new_runs_and_stops_active_ones(client: FlaskClient, workspace: Path) -> None:
    """Graceful drain in-process (threads back-end): 503 + Retry-After for new runs; RUN_ERROR for active ones."""
    host = worker_host(client.application)
    assert host is not None
    response = client.post("/", json=run_body(new_thread_id(), "slow [SLOW 30]", workspace), buffered=False)
    chunks = response_chunks(response)
    raw = next(chunks)
    while b"iac-code.session.v1" not in raw:
        raw += next(chunks)
    stopped: list[int] = []
    drainer = threading.Thread(target=lambda: stopped.append(host.loops.drain(0.2)))
    drainer.start()
    raw += b"".join(chunks)
    drainer.join(10)
    assert stopped == [1]
    events = assert_valid_agui_stream(raw, expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
    refused = client.post("/", json=run_body(new_thread_id(), "hi", workspace))
    assert refused.status_code == 503 and refused.headers["Retry-After"]
    assert refused.get_json()["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert client.get("/health").status_code == 200
