"""A cancelled task's CancelTask is answered before the context gets its next turn.

The real kernel drops a context's runtime while a cancel lands; a turn sent to that context meanwhile
fails ("A2A context runtime missing", tests/kernel). So an expired or orphaned task is cancelled, and
answered, before the new run's message, and a run that ends by disconnect or error cancels its task
before it frees the thread. The fake client records the order of the calls; its CancelTask is slow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.config.settings import Settings
from agui_bridge.runs.admission import RunTicket, admit_run
from agui_bridge.runs.stream import RunStream, StreamDeps
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import run_body

TASK = "task-new"
CANCEL_S = 0.3


def status(context_id: str, state: str, text: str | None = None) -> A2AEvent:
    body: dict[str, Any] = {"taskId": TASK, "contextId": context_id, "status": {"state": state}}
    if text is not None:
        body["status"]["message"] = {"messageId": f"{TASK}-message", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    body["metadata"] = {"iac_code": {"iacCodeSessionId": "session-1"}}
    return unwrap({"result": {"statusUpdate": body}})


class Upstream:
    def __init__(self, batches: list[list[A2AEvent]], calls: list[str], hold_s: float) -> None:
        self._batches, self._calls, self._hold_s = batches, calls, hold_s

    def batches(self) -> Iterator[list[A2AEvent]]:
        self._calls.append("message")
        for batch in self._batches:
            time.sleep(self._hold_s)
            yield batch

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


class OrderedClient:
    def __init__(self, batches: list[list[A2AEvent]], task_states: dict[str, dict[str, Any]], hold_s: float = 0.0):
        self.calls: list[str] = []
        self._upstream = Upstream(batches, self.calls, hold_s)
        self._task_states = task_states

    def open_stream(self, method: str, params: dict[str, Any]) -> Upstream:
        return self._upstream

    def get_task(self, task_id: str, history_length: int = 100) -> A2AEvent:
        self.calls.append(f"get:{task_id}")
        task = {"id": task_id, "contextId": "ctx", **self._task_states[task_id]}
        return unwrap({"result": {"task": task}})

    def cancel_task(self, task_id: str) -> None:
        time.sleep(CANCEL_S)
        self.calls.append(f"cancel:{task_id}")


def make(
    tmp_path: Path,
    client_for: Any,
    *,
    expired: tuple[str, ...] = (),
    orphans: tuple[str, ...] = (),
    **changes: Any,
) -> tuple[RunStream, OrderedClient, ThreadStore, RunTicket]:
    settings = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,), **changes)
    store = ThreadStore(settings.state_dir)
    run = parse_run_input(run_body("thread-1", "hi", tmp_path))
    ticket = admit_run(
        store, run, cwd=str(tmp_path), digest="d", owner=current_owner(), now_ms=int(time.time() * 1000),
        lease_ttl_ms=20_000, is_alive=owner_is_alive,
    )  # fmt: skip
    ticket.expired_task_ids = list(expired)
    ticket.orphaned_task_ids = list(orphans)
    client = client_for(ticket.context_id)
    stream = RunStream(StreamDeps(settings, store, client, ThreadRuntime()), ticket, run, "en")
    return stream, client, store, ticket


def finished_turn(ctx: str) -> list[list[A2AEvent]]:
    return [[status(ctx, "TASK_STATE_WORKING", "hello")], [status(ctx, "TASK_STATE_INPUT_REQUIRED")]]


def test_an_expired_task_is_cancelled_before_the_new_message(tmp_path: Path) -> None:
    stream, client, _, _ = make(tmp_path, lambda ctx: OrderedClient(finished_turn(ctx), {}), expired=("old-task",))
    try:
        assert_valid_agui_stream(b"".join(stream), expect_terminal="success", capture=False)
    finally:
        stream.close()
    assert client.calls == ["cancel:old-task", "message"]


def test_a_running_orphan_is_cancelled_before_the_new_message_and_an_ended_one_is_left(tmp_path: Path) -> None:
    states = {
        "orphan-running": {"status": {"state": "TASK_STATE_WORKING"}},
        "orphan-ended": {"status": {"state": "TASK_STATE_INPUT_REQUIRED"}},
    }
    stream, client, _, _ = make(
        tmp_path,
        lambda ctx: OrderedClient(finished_turn(ctx), states),
        orphans=("orphan-running", "orphan-ended"),
    )
    try:
        assert_valid_agui_stream(b"".join(stream), expect_terminal="success", capture=False)
    finally:
        stream.close()
    assert client.calls == ["get:orphan-running", "cancel:orphan-running", "get:orphan-ended", "message"]


def test_a_disconnect_cancels_the_task_before_the_thread_is_free(tmp_path: Path) -> None:
    def slow_turn(ctx: str) -> OrderedClient:
        batches = [[status(ctx, "TASK_STATE_WORKING", f"part {i}")] for i in range(20)]
        return OrderedClient(batches, {}, hold_s=0.1)

    stream, client, store, _ = make(tmp_path, slow_turn, reattach_window_s=0.0)  # no window: a disconnect cancels
    chunks = iter(stream)
    received = b""
    while b"part 1" not in received:
        received += next(chunks)
    stream.close()  # the client went away
    assert client.calls[-1] == f"cancel:{TASK}"  # answered before close() returned
    state = store.read("thread-1")
    assert state is not None and state.active_run is None
