"""The identity commit (C3) waits past an event with nothing to show, so the task id and the session id of one
kernel turn cost one write, and still nothing that follows them is shown before they are written
(docs/design.md#identity-commit-deferred)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.runs.admission import admit_run
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.turn import shows_nothing
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import StateWriteFailed, ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from tests.support.agui_checks import assert_valid_agui_stream, event_types
from tests.support.eventually import eventually
from tests.support.harness import run_body
from tests.support.scripted_runs import SESSION, TASK, collect, make_stream, status


def task_snapshot(context_id: str) -> A2AEvent:
    """The kernel's first event: the Task, SUBMITTED, with the user's message in its history, no session id."""
    user = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"id": TASK, "contextId": context_id, "status": {"state": "TASK_STATE_SUBMITTED"}, "history": [user]}
    return unwrap({"result": {"task": body}})


def script(ctx: str) -> list[list[A2AEvent]]:
    return [
        [
            task_snapshot(ctx),
            status(ctx, "TASK_STATE_SUBMITTED"),  # brings the session id
            status(ctx, text="hello"),
            status(ctx, "TASK_STATE_INPUT_REQUIRED"),
        ]
    ]


def counting_identity_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, str | None]]:
    writes: list[tuple[str | None, str | None]] = []
    real = RunLedger.record_identity

    def record(self: RunLedger, task_id: str | None, session_id: str | None) -> None:
        writes.append((task_id, session_id))
        real(self, task_id, session_id)

    monkeypatch.setattr(RunLedger, "record_identity", record)
    return writes


def test_task_and_session_ids_of_one_turn_are_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = counting_identity_writes(monkeypatch)
    stream, _, store = make_stream(tmp_path, script)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="success", capture=False)
    assert writes == [(TASK, SESSION)]
    assert "TEXT_MESSAGE_CONTENT" in event_types(events)
    state = store.read("thread-1")
    assert state is not None and state.session_id == SESSION


def test_ids_are_written_at_once_when_their_event_shows_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = counting_identity_writes(monkeypatch)

    def texts_first(ctx: str) -> list[list[A2AEvent]]:
        return [[status(ctx, text="hello"), status(ctx, "TASK_STATE_INPUT_REQUIRED")]]

    stream, _, _ = make_stream(tmp_path, texts_first)
    assert_valid_agui_stream(collect(stream), expect_terminal="success", capture=False)
    assert writes == [(TASK, SESSION)]


def test_a_failed_deferred_write_fails_closed_before_anything_that_follows_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: RunLedger, task_id: str | None, session_id: str | None) -> None:
        raise StateWriteFailed("disk full")

    monkeypatch.setattr(RunLedger, "record_identity", refuse)
    stream, client, store = make_stream(tmp_path, script)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="RUN_ERROR", capture=False)
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "STATE_PERSISTENCE_FAILED"
    assert events[-1]["message"] == "The execution mapping could not be committed."  # task_mapping_failed

    def task_cancelled() -> None:
        assert client.cancelled == [TASK]  # the ticket knew the task although its write failed

    eventually(task_cancelled, timeout_s=5)
    state = store.read("thread-1")
    assert state is not None and state.session_id is None and state.active_run is None


def test_an_ending_write_carries_ids_not_yet_written(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    run = parse_run_input(run_body("thread-1", "hi", tmp_path))
    ticket = admit_run(
        store, run, cwd=str(tmp_path), digest="d", owner=current_owner(), now_ms=int(time.time() * 1000),
        lease_ttl_ms=20_000, is_alive=owner_is_alive,
    )  # fmt: skip
    ledger = RunLedger(store, ticket)
    ledger.note_identity(TASK, None)
    ledger.note_identity(None, SESSION)
    assert (ticket.task_id, ticket.session_id) == (TASK, SESSION)  # known at once: a cancel finds the task
    assert ledger.unwritten_identity == (TASK, SESSION)
    on_disk = store.read("thread-1")
    assert on_disk is not None and on_disk.session_id is None and on_disk.execution.task_id is None
    ledger.finish(int(time.time() * 1000), retire=False)  # the client left: release, keep the execution
    assert ledger.unwritten_identity is None
    state = store.read("thread-1")
    assert state is not None and state.active_run is None
    assert state.session_id == SESSION and state.execution.task_id == TASK


def _event(kind: str, body: dict[str, Any]) -> A2AEvent:
    return unwrap({"result": {kind: body}})


@pytest.mark.parametrize(
    ("kind", "body", "expected"),
    [
        ("statusUpdate", {"taskId": TASK, "status": {"state": "TASK_STATE_WORKING"}}, True),
        ("statusUpdate", {"taskId": TASK, "status": {"message": {"role": "ROLE_AGENT"}}}, False),
        ("task", {"id": TASK, "history": [{"role": "ROLE_USER"}]}, True),
        ("task", {"id": TASK, "history": [{"role": "ROLE_USER"}, {"role": "ROLE_AGENT"}]}, False),
        ("artifactUpdate", {"taskId": TASK, "artifact": {"artifactId": "a"}}, False),
        ("statusUpdate", {"taskId": TASK, "metadata": {"iac_code": {"tool": {"id": "t"}}}}, False),
        ("statusUpdate", {"taskId": TASK, "metadata": {"iac_code": {"thinking": {"type": "raw_thinking"}}}}, False),
        ("statusUpdate", {"taskId": TASK, "metadata": {"iac_code": {"pipeline": {}}}}, False),
    ],
)  # fmt: skip
def test_shows_nothing_is_conservative(kind: str, body: dict[str, Any], expected: bool) -> None:
    assert shows_nothing(_event(kind, body)) is expected
