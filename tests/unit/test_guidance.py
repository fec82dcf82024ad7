"""Active guidance (docs/design.md#guidance): admission rules and a stream that validates, never projects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agui_bridge.a2a.signals import A2ARpcError
from agui_bridge.config.settings import Settings
from agui_bridge.errors import (
    BridgeError,
    DuplicateRunId,
    ExecutionLost,
    ResumeRequired,
    ThreadBindingConflict,
)
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.guidance import GuidanceStream
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.agui_checks import assert_valid_agui_stream, event_types
from tests.support.fakes import ScriptedA2A
from tests.support.runtimes import SettlingRuntime
from tests.support.scripted_runs import TASK, THREAD, admit, guidance_body, status, thread


@pytest.mark.parametrize(
    ("setup", "change", "error"),
    [
        ({"exists": False}, {}, ExecutionLost),
        ({}, {"runMode": "normal"}, ExecutionLost),
        ({}, {"resume": []}, ExecutionLost),
        ({"task": None}, {}, ExecutionLost),
        ({"pending": True}, {}, ResumeRequired),
        ({}, {"userId": "someone-else"}, ThreadBindingConflict),
    ],
)
def test_admission_rules(
    tmp_path: Path, setup: dict[str, Any], change: dict[str, Any], error: type[BridgeError]
) -> None:
    store = ThreadStore(tmp_path / "state")
    if setup.pop("exists", True):
        thread(store, tmp_path, **setup)
    resume = change.pop("resume", None)
    body = guidance_body(tmp_path, **change)
    if resume is not None:
        body["resume"] = resume
    with pytest.raises(error):
        admit(store, body, tmp_path)


def test_guidance_bypasses_the_busy_run_and_takes_no_lease(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    thread(store, tmp_path)
    body = guidance_body(tmp_path)
    ticket = admit(store, body, tmp_path)
    assert (ticket.task_id, ticket.thread_id) == (TASK, THREAD)
    state = store.read(THREAD)
    assert state is not None and state.active_run is not None and state.active_run.run_id == "run-main"
    assert body["runId"] in state.run_digests and state.execution.execution_id == "exec-1"
    with pytest.raises(DuplicateRunId):
        admit(store, body, tmp_path)


def run_guidance(tmp_path: Path, reply: Any) -> tuple[list[dict[str, Any]], ScriptedA2A]:
    store = ThreadStore(tmp_path / "state")
    context_id = thread(store, tmp_path)
    body = guidance_body(tmp_path)
    ticket = admit(store, body, tmp_path)
    client = ScriptedA2A()
    client.streams["SendStreamingMessage"] = [reply(context_id) if callable(reply) else reply]
    settings = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,))
    runtime = SettlingRuntime()
    deps = StreamDeps(settings, store, client, runtime)
    stream = GuidanceStream(deps, ticket, parse_run_input(body), "en")
    try:
        raw = b"".join(stream)
    finally:
        stream.close()
    message = client.calls[0][1]["message"]
    assert message["taskId"] == TASK and message["contextId"] == context_id
    assert message["messageId"] == body["messages"][-1]["id"] and message["parts"] == [
        {"text": "also add a NAT gateway"}
    ]
    runtime.settle()  # everything the stream did off the caller's thread has finished
    assert "CancelTask" not in client.methods()  # guidance never cancels the task it talks to
    state = store.read(THREAD)
    assert state is not None and state.execution.task_id == TASK and state.active_run is not None
    return assert_valid_agui_stream(raw, capture=False), client


def test_guidance_validates_and_shows_nothing(tmp_path: Path) -> None:
    events, _ = run_guidance(tmp_path, lambda ctx: [[status(ctx, text="guidance noted")], [status(ctx)]])
    assert event_types(events) == ["RUN_STARTED", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "success"} and "usage" not in events[-1]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (lambda ctx: [[status(ctx, "TASK_STATE_FAILED")]], "A2A_EXECUTION_FAILED"),
        (lambda ctx: [[status(ctx, "TASK_STATE_REJECTED")]], "A2A_EXECUTION_FAILED"),
        (lambda ctx: [[status(ctx, "TASK_STATE_CANCELED")]], "CANCELLED"),
        (lambda ctx: [[status("another-context")]], "A2A_PROTOCOL_ERROR"),
        (A2ARpcError(-32602, "nope"), "A2A_UNAVAILABLE"),
        (A2ARpcError(-32603, "x", {"code": "SESSION_BACKUP_NOT_READY"}), "SESSION_BACKUP_NOT_READY"),
    ],
)
def test_guidance_errors(tmp_path: Path, reply: Any, code: str) -> None:
    events, _ = run_guidance(tmp_path, reply)
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == code


def test_shutdown_ends_guidance_with_run_error_and_leaves_the_task_alone(tmp_path: Path) -> None:
    import threading

    from tests.support.fakes import ScriptedStream

    store = ThreadStore(tmp_path / "state")
    thread(store, tmp_path)
    body = guidance_body(tmp_path)
    ticket = admit(store, body, tmp_path)
    client = ScriptedA2A()
    client.streams["SendStreamingMessage"] = [ScriptedStream([], gate=threading.Event())]
    settings = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,))
    stream = GuidanceStream(StreamDeps(settings, store, client, ThreadRuntime()), ticket, parse_run_input(body), "en")
    chunks = iter(stream)
    raw = next(chunks)
    threading.Timer(0.2, stream.request_stop).start()
    raw += b"".join(chunks)
    stream.close()
    events = assert_valid_agui_stream(raw, expect_terminal="RUN_ERROR", capture=False)
    assert events[-1]["code"] == "CANCELLED" and "CancelTask" not in client.methods()
