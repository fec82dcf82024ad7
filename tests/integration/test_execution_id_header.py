"""`POST /` names its execution in the `Agui-Execution-Id` response header (docs/http-api.md#execution-id-header).

A load balancer that keeps each thread on its host learns the cancel route's key (the executionId) from the
headers of the run's 200 answer, which go out before the first event. The header must equal the executionId the
status route and the session event show, a resume must name the execution it resumes, guidance the execution it
joins, and a refused request carries none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from agui_bridge.config.settings import Settings
from agui_bridge.protocol.headers import EXECUTION_ID_HEADER
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import custom, new_thread_id, run_body
from tests.support.scripted_runs import guidance_body, thread

ROS = "invocation-1"
STATUS = "/extensions/iac-code/v1/threads/{}/status"


def post_run(client: FlaskClient, body: dict[str, Any], expect: str = "RUN_FINISHED") -> tuple[str, list[Any]]:
    """The header the run answered with, and its events read to the end."""
    response = client.post("/", json=body)
    try:
        assert response.status_code == 200, response.get_data(as_text=True)
        header = response.headers.get(EXECUTION_ID_HEADER)
        assert header, "a 200 run answer names its execution"
        return header, assert_valid_agui_stream(response.get_data(), expect_terminal=expect)
    finally:
        response.close()


def status_execution_id(client: FlaskClient, thread_id: str) -> str:
    answer = client.post(STATUS.format(thread_id), json={"rosInvocationId": ROS})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    execution_id: str = answer.get_json()["executionId"]
    return execution_id


def test_a_run_answers_with_the_execution_id_the_status_route_and_session_event_show(
    client: FlaskClient, workspace: Path
) -> None:
    thread_id = new_thread_id()
    header, events = post_run(client, run_body(thread_id, "hello", workspace, ros_invocation_id=ROS))
    session = custom(events, "iac-code.session.v1")[0]["value"]
    assert header == session["executionId"] == status_execution_id(client, thread_id)


def test_a_resume_names_the_execution_it_resumes_and_a_new_turn_its_new_one(
    client: FlaskClient, workspace: Path
) -> None:
    thread_id = new_thread_id()
    first, events = post_run(client, run_body(thread_id, "please write file", workspace, ros_invocation_id=ROS))
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    resume = run_body(thread_id, "", workspace, ros_invocation_id=ROS)
    resume["messages"] = []
    resume["resume"] = [{"interruptId": outcome["interrupts"][0]["id"], "status": "resolved",
                         "payload": {"decision": "allow_once"}}]  # fmt: skip
    resumed, _ = post_run(client, resume, expect="RUN_FINISHED")
    assert resumed == first == status_execution_id(client, thread_id)

    next_turn, _ = post_run(client, run_body(thread_id, "hello again", workspace, ros_invocation_id=ROS))
    assert next_turn != first and next_turn == status_execution_id(client, thread_id)


def test_guidance_names_the_running_execution_it_joins(
    client: FlaskClient, settings: Settings, workspace: Path
) -> None:
    # A Pipeline run of thread-1 is streaming execution exec-1 (held by another worker): guidance joins it.
    thread(ThreadStore(settings.state_dir), workspace)
    response = client.post("/", json=guidance_body(workspace))
    try:
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.headers.get(EXECUTION_ID_HEADER) == "exec-1"
        assert_valid_agui_stream(response.get_data(), capture=False)  # however the kernel answers, it ends
    finally:
        response.close()


def test_a_refused_run_carries_no_execution_id(client: FlaskClient, workspace: Path) -> None:
    body = run_body(new_thread_id(), "hello", workspace)
    body["resume"] = [{"interruptId": "none", "status": "resolved"}]  # nothing pending on a new thread
    response = client.post("/", json=body)
    assert response.status_code == 409 and EXECUTION_ID_HEADER not in response.headers
