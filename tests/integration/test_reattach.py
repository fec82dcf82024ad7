"""Reattach (docs/design.md#reattach) through the Flask test client against the demo agent.

Event ids on every event; `GET /extensions/iac-code/v1/threads/{threadId}/runs/{runId}/events` replays
after the cursor and follows the live run; a client that goes away within the reattach window does not
lose the run; without a reader the window ends it with a recorded RUN_ERROR CANCELLED; every refusal
is the documented status with a localised envelope.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import translate
from agui_bridge.protocol.sse_parser import SseComment, parse_body_records
from agui_bridge.reattach.format import record_paths
from agui_bridge.reattach.retention import sweep_records
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream, numbered_frames, parse_sse
from tests.support.eventually import eventually
from tests.support.harness import new_thread_id, run_body, wait_for_task_state
from tests.support.sse import response_chunks

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "invocation-1"


def app_with(settings: Settings, **changes: Any) -> Flask:
    return create_app(settings.replace(**changes))


def reattach(client: FlaskClient, thread_id: str, run_id: str, ros: str | None = ROS, **kwargs: Any) -> Any:
    query = dict(kwargs.pop("query", {}))
    if ros is not None:
        query["rosInvocationId"] = ros
    return client.get(EVENTS.format(thread_id, run_id), query_string=query, **kwargs)


def ids_of(raw: bytes) -> list[int]:
    return [position for position, _ in numbered_frames(raw)]


def frames_of(raw: bytes) -> dict[int, bytes]:
    """Event frames by id (heartbeats dropped): what a client stitching by id keeps."""
    return dict(numbered_frames(raw))


def stitched(*parts: bytes) -> bytes:
    merged: dict[int, bytes] = {}
    for part in parts:
        for position, frame in frames_of(part).items():
            assert merged.setdefault(position, frame) == frame, f"event {position} differs between readers"
    return b"".join(merged[position] for position in sorted(merged))


def read_until(response: Any, predicate: Any) -> bytes:
    """Read a streamed test response chunk by chunk until `predicate(events so far)` holds."""
    raw = b""
    for chunk in response_chunks(response):
        raw += chunk
        if predicate(parse_sse(raw)):
            return raw
    return raw


def test_every_event_has_its_position_and_a_finished_run_replays_byte_for_byte(
    client: FlaskClient, workspace: Path
) -> None:
    thread_id = new_thread_id()
    body = run_body(thread_id, "list files with a tool", workspace)
    response = client.post("/", json=body)
    raw = response.get_data()
    events = assert_valid_agui_stream(raw, expect_terminal="success")
    assert ids_of(raw) == list(range(1, len(events) + 1))
    replay = reattach(client, thread_id, body["runId"])
    assert replay.status_code == 200 and replay.mimetype == "text/event-stream"
    assert replay.get_data() == b"".join(frames_of(raw).values())  # heartbeats are not events
    after = reattach(client, thread_id, body["runId"], query={"after": "3"})
    assert ids_of(after.get_data()) == list(range(4, len(events) + 1))
    # Last-Event-ID wins over ?after=
    header = reattach(client, thread_id, body["runId"], query={"after": "1"}, headers={"Last-Event-ID": "5"})
    assert ids_of(header.get_data()) == list(range(6, len(events) + 1))
    last = reattach(client, thread_id, body["runId"], headers={"Last-Event-ID": str(len(events))})
    assert last.status_code == 200 and last.get_data() == b""  # nothing after the terminal event


def test_the_record_is_private_and_holds_only_what_the_stream_showed(
    client: FlaskClient, workspace: Path, settings: Settings
) -> None:
    thread_id = new_thread_id()
    body = run_body(thread_id, "please think [think]", workspace, ros_invocation_id="secret-ros-id")
    raw = client.post("/", json=body).get_data()
    record, _, _ = record_paths(settings.state_dir, thread_id, body["runId"])
    assert record.stat().st_mode & 0o777 == 0o600
    assert record.parent.stat().st_mode & 0o777 == 0o700
    content = record.read_bytes()
    header = parse_body_records(content)[0]  # the record opens with a comment naming the run
    assert isinstance(header, SseComment) and header.text.startswith(b"record ")
    assert b"secret-ros-id" not in header.text  # the header keeps a digest only
    assert content == b": " + header.text + b"\n\n" + b"".join(frames_of(raw).values())


@pytest.mark.parametrize("language", ["en", "de", "ja"])
def test_bad_input_gets_the_documented_status_and_a_localised_envelope(
    client: FlaskClient, workspace: Path, language: str
) -> None:
    thread_id = new_thread_id()
    body = run_body(thread_id, "hello", workspace)
    run_id = body["runId"]
    client.post("/", json=body).get_data()
    headers = {"Accept-Language": language}

    def check(response: Any, status: int, code: str, key: str) -> None:
        assert response.status_code == status, response.get_data(as_text=True)
        error = response.get_json()["error"]
        assert error["code"] == code
        assert error["message"] == translate(key, language)

    check(reattach(client, thread_id, run_id, ros=None, headers=headers), 400, "INVALID_INPUT", "reattach_ros_required")
    check(reattach(client, thread_id, run_id, ros="another", headers=headers), 404, "RUN_NOT_FOUND", "run_not_found")
    check(reattach(client, thread_id, "run-unknown", headers=headers), 404, "RUN_NOT_FOUND", "run_not_found")
    check(reattach(client, new_thread_id(), run_id, headers=headers), 404, "RUN_NOT_FOUND", "run_not_found")
    check(reattach(client, "t" * 300, run_id, headers=headers), 404, "RUN_NOT_FOUND", "run_not_found")
    for cursor in ("abc", "-1", "1.5", "", "9" * 13, "١"):
        response = reattach(client, thread_id, run_id, headers={**headers, "Last-Event-ID": cursor})
        check(response, 400, "INVALID_INPUT", "replay_cursor_invalid")
        assert response.get_json()["error"]["field"] == "/Last-Event-ID"
    response = reattach(client, thread_id, run_id, query={"after": "x"}, headers=headers)
    check(response, 400, "INVALID_INPUT", "replay_cursor_invalid")
    assert response.get_json()["error"]["field"] == "/after"
    check(
        reattach(client, thread_id, run_id, query={"after": "999"}, headers=headers),
        416, "REPLAY_CURSOR_OUT_OF_RANGE", "replay_cursor_out_of_range",
    )  # fmt: skip


def test_the_route_needs_the_same_bearer_as_a_run(settings: Settings, workspace: Path) -> None:
    client = app_with(settings, auth_token="reattach-token").test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "hello", workspace)
    auth = {"Authorization": "Bearer reattach-token"}
    with client.post("/", json=body, headers=auth) as run:  # closed: the run gives its stream place back
        assert run.status_code == 200
        run.get_data()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "garbage"}):
        response = reattach(client, thread_id, body["runId"], headers={**headers, "Accept-Language": "fr"})
        assert response.status_code == 401
        assert response.get_json()["error"] == {"code": "UNAUTHORIZED", "message": translate("unauthorized", "fr")}
    with reattach(client, thread_id, body["runId"], headers=auth) as follower:
        assert follower.status_code == 200


def test_after_retention_the_replay_is_gone_with_410(settings: Settings, workspace: Path) -> None:
    client = app_with(settings, reattach_retention_s=60.0).test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "hello", workspace)
    client.post("/", json=body).get_data()
    assert reattach(client, thread_id, body["runId"]).status_code == 200
    record, tombstone, _ = record_paths(settings.state_dir, thread_id, body["runId"])
    ended_at = time.time() - 61.0  # a record's age is its last write's (its terminal frame): it ended long ago
    os.utime(record, (ended_at, ended_at))
    response = reattach(client, thread_id, body["runId"], headers={"Accept-Language": "es"})
    assert response.status_code == 410
    assert response.get_json()["error"] == {"code": "REPLAY_EXPIRED", "message": translate("replay_expired", "es")}
    # The sweep leaves a tombstone: still 410 (not 404), and still 404 for another caller.
    report = sweep_records(settings.state_dir, retention_s=60.0, tombstone_retention_s=3600)
    assert report.tombstoned == 1
    assert not record.exists() and tombstone.exists()
    assert reattach(client, thread_id, body["runId"]).status_code == 410
    assert reattach(client, thread_id, body["runId"], ros="other").status_code == 404
    assert sweep_records(settings.state_dir, retention_s=60.0, tombstone_retention_s=0).removed == 1
    assert reattach(client, thread_id, body["runId"]).status_code == 404


def test_a_run_past_the_record_bound_is_410_truncated(settings: Settings, workspace: Path) -> None:
    client = app_with(settings, reattach_max_bytes=2000).test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "[LONG 200]", workspace)
    raw = client.post("/", json=body).get_data()
    assert_valid_agui_stream(raw)  # the client's own stream is untouched by the bound
    response = reattach(client, thread_id, body["runId"])
    assert response.status_code == 410
    assert response.get_json()["error"]["message"] == translate("replay_truncated", "en")


def test_a_run_whose_record_does_not_fit_the_replay_budget_is_410_truncated_and_runs_on(
    settings: Settings, workspace: Path
) -> None:
    client = app_with(settings, reattach_budget_bytes=1).test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "list files with a tool", workspace)
    raw = client.post("/", json=body).get_data()
    assert_valid_agui_stream(raw)  # the run and its own stream are untouched by the budget
    assert parse_sse(raw)[-1]["type"] == "RUN_FINISHED"
    response = reattach(client, thread_id, body["runId"])
    assert response.status_code == 410
    assert response.get_json()["error"]["message"] == translate("replay_truncated", "en")


def test_a_client_that_leaves_within_the_window_reattaches_and_misses_nothing(
    settings: Settings, workspace: Path, demo_url: str, demo_token: str
) -> None:
    app = app_with(settings, reattach_window_s=5.0)
    client = app.test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "slow [SLOW 3]", workspace)
    response = client.post("/", json=body, buffered=False)
    first = read_until(response, lambda events: any(e.get("type") == "TEXT_MESSAGE_CONTENT" for e in events))
    response.close()  # the client goes away mid-run: the run is detached, not cancelled
    busy = client.post("/", json=run_body(thread_id, "hello", workspace))
    assert busy.status_code == 409 and busy.get_json()["error"]["code"] == "THREAD_BUSY"  # the lease stays
    last_id = max(frames_of(first))
    second = reattach(client, thread_id, body["runId"], headers={"Last-Event-ID": str(last_id)}).get_data()
    assert min(frames_of(second)) == last_id + 1
    whole = stitched(first, second)
    events = assert_valid_agui_stream(whole, expect_terminal="success")
    assert ids_of(whole) == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count("RUN_FINISHED") == 1
    state = ThreadStore(settings.state_dir).read(thread_id)
    assert state is not None and state.active_run is None


def test_without_a_reader_the_window_cancels_the_task_and_records_run_error_cancelled(
    settings: Settings, workspace: Path, demo_url: str, demo_token: str
) -> None:
    client = app_with(settings, reattach_window_s=1.0).test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "slow [SLOW 30]", workspace)
    response = client.post("/", json=body, buffered=False)
    raw = read_until(response, lambda events: any(e.get("name") == "iac-code.session.v1" for e in events))
    task_id = next(e for e in parse_sse(raw) if e.get("name") == "iac-code.session.v1")["value"]["taskId"]
    left = time.monotonic()
    response.close()
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED", timeout_s=3.0) == (
        "TASK_STATE_CANCELED"
    )
    assert time.monotonic() - left < 1.0 + 2.0
    replay = reattach(client, thread_id, body["runId"]).get_data()
    events = assert_valid_agui_stream(replay, expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
    assert events[-1]["message"] == translate("reattach_window_expired", "en")

    def released_and_retired() -> None:
        state = ThreadStore(settings.state_dir).read(thread_id)
        assert state is not None and state.active_run is None and state.execution.task_id is None

    eventually(released_and_retired, timeout_s=5)


def test_with_window_zero_a_disconnect_cancels_at_once_and_the_record_still_ends(
    settings: Settings, workspace: Path, demo_url: str, demo_token: str
) -> None:
    client = app_with(settings, reattach_window_s=0.0).test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "slow [SLOW 20]", workspace)
    response = client.post("/", json=body, buffered=False)
    raw = read_until(response, lambda events: any(e.get("name") == "iac-code.session.v1" for e in events))
    task_id = next(e for e in parse_sse(raw) if e.get("name") == "iac-code.session.v1")["value"]["taskId"]
    response.close()
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    replay = reattach(client, thread_id, body["runId"], headers={"Accept-Language": "de"}).get_data()
    events = assert_valid_agui_stream(replay, expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
    assert events[-1]["message"] == translate("client_disconnected", "en")  # the run's language, not the reader's


def test_two_readers_at_once_both_get_the_whole_stream(settings: Settings, workspace: Path) -> None:
    app = app_with(settings, reattach_window_s=5.0)
    client = app.test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "slow [SLOW 2]", workspace)
    response = client.post("/", json=body, buffered=False)
    head = read_until(response, lambda events: bool(events))
    results: dict[str, bytes] = {}

    def read(name: str) -> None:
        results[name] = reattach(app.test_client(), thread_id, body["runId"]).get_data()

    readers = [threading.Thread(target=read, args=(name,)) for name in ("tab", "phone")]
    for reader in readers:
        reader.start()
    owner = head + b"".join(response_chunks(response))  # the original client keeps reading too
    for reader in readers:
        reader.join(30)
    whole = b"".join(frames_of(owner).values())
    assert_valid_agui_stream(whole, expect_terminal="success")
    assert results["tab"] == whole == results["phone"]


def test_a_resume_cut_after_the_answer_was_accepted_shows_the_tool_result_on_reattach(
    settings: Settings, workspace: Path
) -> None:
    client = app_with(settings, reattach_window_s=5.0).test_client()
    thread_id = new_thread_id()
    first = client.post("/", json=run_body(thread_id, "please write file", workspace)).get_data()
    interrupt = assert_valid_agui_stream(first, expect_terminal="interrupt")[-1]["outcome"]["interrupts"][0]
    resume = run_body(thread_id, "", workspace)
    resume["messages"] = []
    resume["resume"] = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
    response = client.post("/", json=resume, buffered=False)
    # The session event follows the kernel's first answer to the resume: the answer was accepted.
    raw = read_until(response, lambda events: any(e.get("name") == "iac-code.session.v1" for e in events))
    response.close()
    seen = {position: frame for position, frame in frames_of(raw).items() if position <= 2}
    cut = b"".join(seen.values())
    assert [e.get("name") for e in parse_sse(cut)] == [None, "iac-code.session.v1"]
    rest = reattach(client, thread_id, resume["runId"], headers={"Last-Event-ID": "2"})
    events = assert_valid_agui_stream(stitched(cut, rest.get_data()), expect_terminal="success")
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in events), [e["type"] for e in events]
    replayed = reattach(client, thread_id, resume["runId"]).get_data()  # and again, from the start
    assert parse_sse(replayed) == events


def test_health_says_reattach_is_supported_and_gives_the_window(settings: Settings) -> None:
    health = app_with(settings, reattach_window_s=42.0).test_client().get("/health").get_json()
    assert health["reattach"] == {"supported": True, "windowSeconds": 42}
    off = app_with(settings, reattach_max_bytes=0).test_client().get("/health").get_json()
    assert off["reattach"] == {"supported": False, "windowSeconds": 0}


@pytest.mark.parametrize(
    ("path", "query", "headers"),
    [
        ("/extensions/iac-code/v1/threads/%00/runs/..%00/events", {"rosInvocationId": "x"}, {}),
        ("/extensions/iac-code/v1/threads/a/b/c/runs/r/events", {"rosInvocationId": "x" * 5000}, {}),
        ("/extensions/iac-code/v1/threads/t/runs/r/events", {"rosInvocationId": "x"}, {"Last-Event-ID": "\u00e9"}),
        ("/extensions/iac-code/v1/threads/t/runs/r/events", {"rosInvocationId": ["a", "b"], "after": "1"}, {}),
    ],
)
def test_hostile_requests_are_clean_errors(client: FlaskClient, path: str, query: Any, headers: Any) -> None:
    response = client.get(path, query_string=query, headers=headers)
    assert response.status_code in (400, 404), response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] in ("INVALID_INPUT", "RUN_NOT_FOUND")


def test_a_follower_gets_heartbeats_while_the_run_is_quiet(settings: Settings, workspace: Path) -> None:
    app = app_with(settings, heartbeat_interval_s=0.2)
    client = app.test_client()
    thread_id = new_thread_id()
    body = run_body(thread_id, "slow [SLOW 1.5]", workspace)
    owner = client.post("/", json=body, buffered=False)
    head = read_until(owner, lambda events: bool(events))
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.append(reattach(app.test_client(), thread_id, body["runId"]).get_data())
    )
    reader.start()
    rest = b"".join(response_chunks(owner))  # the owner's client drives the run (the test client has no server loop)
    reader.join(30)
    follower = got[0]
    assert b": heartbeat\n\n" in follower
    assert b"".join(frames_of(follower).values()) == b"".join(frames_of(head + rest).values())
