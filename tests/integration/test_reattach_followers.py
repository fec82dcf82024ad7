"""Reattach followers count in the worker's stream cap (docs/design.md#reattach), through the Flask test
client on the thread back-end, where a follower holds a host thread for as long as its run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from tests.support.agui_checks import parse_sse
from tests.support.harness import new_thread_id, run_body
from tests.support.sse import response_chunks

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "invocation-1"


def reattach(client: FlaskClient, thread_id: str, run_id: str) -> Any:
    return client.get(EVENTS.format(thread_id, run_id), query_string={"rosInvocationId": ROS}, buffered=False)


def first_events(response: Any) -> bytes:
    raw = b""
    for chunk in response_chunks(response):
        raw += chunk
        if parse_sse(raw):
            return raw
    return raw


def test_followers_share_the_stream_cap_with_runs_and_give_their_place_back(
    settings: Settings, workspace: Path
) -> None:
    app = create_app(settings.replace(max_thread_streams_per_worker=2, reattach_window_s=5.0))
    thread_id = new_thread_id()
    body = run_body(thread_id, "slow [SLOW 2]", workspace)
    owner = app.test_client().post("/", json=body, buffered=False)
    head = first_events(owner)  # the run holds one place
    follower = reattach(app.test_client(), thread_id, body["runId"])
    assert follower.status_code == 200  # the follower the other
    refused = reattach(app.test_client(), thread_id, body["runId"])
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert refused.get_json()["error"]["code"] == "SERVICE_UNAVAILABLE"
    another_run = app.test_client().post("/", json=run_body(new_thread_id(), "hello", workspace))
    assert another_run.status_code == 503  # a follower keeps a run out as a run would
    assert app.test_client().get("/health").status_code == 200
    follower.close()
    again = reattach(app.test_client(), thread_id, body["runId"])
    assert again.status_code == 200  # the closed follower gave its place back
    again.close()
    rest = b"".join(response_chunks(owner))
    owner.close()  # as a WSGI server does: the run gives its place back
    assert b"RUN_FINISHED" in head + rest
