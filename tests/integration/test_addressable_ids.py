"""Ids that can never be addressed are refused, and run records are named without ambiguity
(docs/design.md#input-validation, docs/design.md#reattach).

A run whose runId holds `/` could never be reattached (its reattach URL is a plain 404), and a NUL in
threadId or runId would let two runs share one record name. So control characters in either id, `/` in a
runId and a leading `/` in a threadId are INVALID_INPUT at the id's pointer, on `POST /` and on every
extension route that takes the id, with a localised message. A threadId with `/` inside stays valid:
the extension URLs carry it (`Team/Thread 1`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import translate
from agui_bridge.reattach.format import existing_record_paths, legacy_record_name, record_name, record_paths
from tests.support.agui_checks import parse_sse
from tests.support.harness import new_thread_id, run_body

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
STATUS = "/extensions/iac-code/v1/threads/{}/status"
CANCEL = "/extensions/iac-code/v1/executions/exec-1/cancel"
ROS = "invocation-1"

CONTROL_CHARACTERS = ["a\x00b", "a\nb", "a\x1bb", "a\x7fb", "a\x85b", "a\x9bb"]
REFUSED = [
    *[pytest.param(field, bad, "id_control_characters", id=f"{field}-{bad!r}")
      for field in ("threadId", "runId") for bad in CONTROL_CHARACTERS],
    pytest.param("runId", "a/b", "run_id_slash", id="runId-slash"),
    pytest.param("runId", "/a", "run_id_slash", id="runId-leading-slash"),
    pytest.param("threadId", "/a", "thread_id_leading_slash", id="threadId-leading-slash"),
]  # fmt: skip


def assert_refused(response: Any, pointer: str, key: str, language: str = "en") -> None:
    assert response.status_code == 400, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["field"] == pointer
    assert error["message"] == translate(key, language, field=pointer.lstrip("/"))


@pytest.mark.parametrize(("field", "bad", "key"), REFUSED)
def test_post_refuses_a_thread_or_run_id_that_could_never_be_addressed(
    client: FlaskClient, workspace: Path, field: str, bad: str, key: str
) -> None:
    body = run_body(new_thread_id(), "hello", workspace)
    body[field] = bad
    assert_refused(client.post("/", json=body), f"/{field}", key)


@pytest.mark.parametrize("language", ["de", "ja", "zh"])
def test_the_refusal_is_localised(client: FlaskClient, workspace: Path, language: str) -> None:
    body = run_body(new_thread_id(), "hello", workspace, run_id="run/1")
    response = client.post("/", json=body, headers={"Accept-Language": language})
    assert_refused(response, "/runId", "run_id_slash", language)


def test_ordinary_ids_are_still_admitted(client: FlaskClient, workspace: Path) -> None:
    body = run_body("Team/Thread: ü 1.2 ~ (x)/", "hello", workspace, run_id="run:ü 1.2 ~ \\ (y)")
    events = parse_sse(client.post("/", json=body).get_data())
    assert events[-1]["type"] == "RUN_FINISHED"


def test_the_extension_routes_refuse_the_same_ids(client: FlaskClient) -> None:
    control, leading = "id_control_characters", "thread_id_leading_slash"
    assert_refused(client.post(CANCEL, json={"threadId": "/a", "rosInvocationId": ROS}), "/threadId", leading)
    assert_refused(client.post(CANCEL, json={"threadId": "a\x00b", "rosInvocationId": ROS}), "/threadId", control)
    assert_refused(client.post(STATUS.format("a%01b"), json={"rosInvocationId": ROS}), "/threadId", control)
    reattach = client.get(EVENTS.format("a%1bb", "r"), headers={"Ros-Invocation-Id": ROS})
    assert_refused(reattach, "/threadId", control)
    reattach = client.get(EVENTS.format("t", "r%1bx"), headers={"Ros-Invocation-Id": ROS})
    assert_refused(reattach, "/runId", control)


def test_record_names_are_unambiguous() -> None:
    pairs = [("a\x00b", "c"), ("a", "b\x00c"), ("a", "bc"), ("ab", "c"), ('a"', "b"), ("a", '"b'), ("a,", "b")]
    assert len({record_name(thread, run) for thread, run in pairs}) == len(pairs)
    assert legacy_record_name("a\x00b", "c") == legacy_record_name("a", "b\x00c")  # why new records use record_name


def test_a_record_written_under_the_legacy_name_is_still_reattached(
    client: FlaskClient, workspace: Path, settings: Settings
) -> None:
    """A run admitted by an older release: its record is found by the name that release gave it."""
    thread_id = new_thread_id()
    body = run_body(thread_id, "hello", workspace, ros_invocation_id=ROS)
    shown = parse_sse(client.post("/", json=body).get_data())
    current, _, _ = record_paths(settings.state_dir, thread_id, body["runId"])
    legacy = current.with_name(legacy_record_name(thread_id, body["runId"]) + current.suffix)
    shutil.move(current, legacy)
    assert existing_record_paths(settings.state_dir, thread_id, body["runId"])[0] == legacy
    replay = client.get(EVENTS.format(thread_id, body["runId"]), headers={"Ros-Invocation-Id": ROS})
    assert replay.status_code == 200
    assert [event["type"] for event in parse_sse(replay.get_data())] == [event["type"] for event in shown]
