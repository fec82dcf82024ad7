"""RunStream with a scripted upstream (no network): batching, interrupts, fail-closed, task cancelling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agui_bridge.a2a.signals import A2AEvent
from agui_bridge.config.settings import Settings
from agui_bridge.protocol.sse_parser import parse_body
from agui_bridge.runs.stream import RunStream
from agui_bridge.store.store import StateWriteFailed
from tests.support.agui_checks import assert_valid_agui_stream, event_types
from tests.support.eventually import eventually
from tests.support.fakes import ScriptedA2A
from tests.support.runtimes import SettlingRuntime
from tests.support.scripted_runs import TASK, collect, make_stream, status


def test_interrupt_in_the_same_batch_keeps_the_text_shown_before_it(tmp_path: Path) -> None:
    permission = {
        "kind": "permission",
        "inputId": "perm-1",
        "toolUseId": "tool-1",
        "required": True,
        "prompt": "Allow?",
    }

    def script(ctx: str) -> list[list[A2AEvent]]:
        return [
            [
                status(ctx, text="Let me write it."),
                status(ctx, "TASK_STATE_INPUT_REQUIRED", input=permission),
            ]
        ]

    stream, client, store = make_stream(tmp_path, script)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="interrupt", capture=False)
    assert event_types(events)[-4:] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    interrupt = events[-1]["outcome"]["interrupts"][0]
    assert (interrupt["id"], interrupt["reason"], interrupt["toolCallId"]) == ("perm-1", "tool_call", "tool-1")
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["allow_once", "deny"]
    assert interrupt["expiresAt"].endswith("Z")
    state = store.read("thread-1")
    assert state is not None and list(state.execution.pending) == ["perm-1"] and state.active_run is None
    assert client.cancelled == []  # an interrupted task keeps waiting


def test_failed_task_commit_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def script(ctx: str) -> list[list[A2AEvent]]:
        return [[status(ctx, text="hello")], [status(ctx, "TASK_STATE_INPUT_REQUIRED")]]

    stream, client, _ = make_stream(tmp_path, script)

    def refuse(self: Any, task_id: str | None, session_id: str | None) -> None:
        raise StateWriteFailed("disk full")

    monkeypatch.setattr("agui_bridge.runs.ledger.RunLedger.record_identity", refuse)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="RUN_ERROR", capture=False)
    assert events[-1]["code"] == "STATE_PERSISTENCE_FAILED"

    def task_cancelled() -> None:
        assert client.cancelled == [TASK]

    eventually(task_cancelled, timeout_s=5)


def test_a_failed_task_is_not_cancelled_again(tmp_path: Path) -> None:
    def script(ctx: str) -> list[list[A2AEvent]]:
        return [[status(ctx, text="oops")], [status(ctx, "TASK_STATE_FAILED")]]

    runtime = SettlingRuntime()
    stream, client, _ = make_stream(tmp_path, script, runtime=runtime)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="RUN_ERROR", capture=False)
    assert events[-1]["code"] == "A2A_EXECUTION_FAILED"
    runtime.settle()  # everything the run did off the caller's thread has finished
    assert client.cancelled == []


def test_a_stream_that_ends_while_working_cancels_its_task(tmp_path: Path) -> None:
    def script(ctx: str) -> list[list[A2AEvent]]:
        return [[status(ctx, text="half an answer")]]

    stream, client, _ = make_stream(tmp_path, script)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="RUN_ERROR", capture=False)
    assert events[-1]["code"] == "A2A_EXECUTION_FAILED"

    def task_cancelled() -> None:
        assert client.cancelled == [TASK]

    eventually(task_cancelled, timeout_s=5)


# ---- the parts of a run, seen through a whole stream -----------------------------------------


def recorded_frames(stream: RunStream) -> bytes:
    """The frames the run's record holds (its sink, given at construction): after the record's header."""
    record = stream.record
    assert record is not None
    recorded: bytes = record.path.read_bytes()
    header = record.head.encode()
    assert recorded.startswith(header)
    return recorded[len(header) :]


def frame_positions(frames: bytes) -> list[int]:
    return [int(message.event_id or b"0") for message in parse_body(frames)]


def test_every_event_shown_passes_through_the_emitter_numbered_from_one(tmp_path: Path) -> None:
    from agui_bridge.protocol.sse import HEARTBEAT_FRAME

    def script(ctx: str) -> list[list[A2AEvent]]:
        return [
            [status(ctx, text="one")],
            [status(ctx, text=" two")],
            [status(ctx, "TASK_STATE_INPUT_REQUIRED")],
        ]

    settings = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,), heartbeat_interval_s=0.02)
    stream, _, _ = make_stream(tmp_path, script, settings, delay_s=0.06)  # silent gaps: heartbeats
    raw = collect(stream)
    events = assert_valid_agui_stream(raw, expect_terminal="success", capture=False)
    assert HEARTBEAT_FRAME in raw  # heartbeats went out, but are not events
    frames = recorded_frames(stream)  # what the emitter offered its sink, the run's record
    assert raw.replace(HEARTBEAT_FRAME, b"") == frames
    assert frame_positions(frames) == list(range(1, len(events) + 1))
    assert stream.emitter.position == len(events)


@pytest.mark.parametrize(
    ("failure", "code", "message"),
    [
        (
            "rpc-backup",
            "SESSION_BACKUP_NOT_READY",
            "Session backup is still synchronizing. Retry after 3 seconds.",
        ),
        ("rpc", "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
        ("transport", "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
    ],
)
def test_a_new_run_maps_kernel_failures_like_resumes_and_guidance(
    tmp_path: Path, failure: str, code: str, message: str
) -> None:
    """One mapping (runs/failures.py): a JSON-RPC error's own text is never shown, on a new run either."""
    from agui_bridge.a2a.errors import A2ARpcError, A2ATransportError

    errors = {
        "rpc-backup": A2ARpcError(-32603, "kernel internals", {"code": "SESSION_BACKUP_NOT_READY"}),
        "rpc": A2ARpcError(-32602, "kernel internals"),
        "transport": A2ATransportError("refused"),
    }

    failing = ScriptedA2A(streams={"SendStreamingMessage": [errors[failure]]})
    stream, _, store = make_stream(tmp_path, lambda ctx: [], client=failing)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="RUN_ERROR", capture=False)
    assert (events[-1]["code"], events[-1]["message"]) == (code, message)
    state = store.read("thread-1")
    assert state is not None and state.active_run is None
