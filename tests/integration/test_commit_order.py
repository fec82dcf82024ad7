"""Fail-closed order with the batched writer held back: nothing that depends on a commit reaches the
client before that commit has completed (docs/design.md#commit-points, #commit-durability).
Demo agent, Flask test client."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from agui_bridge.store.store import ThreadStore
from agui_bridge.store.writer import Durability, state_writer
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import custom, new_thread_id, run_body
from tests.support.sse import SseEvents, response_chunks

HOLD_S = 0.3


def on_disk(store: ThreadStore, thread_id: str) -> dict[str, Any] | None:
    """The thread's document as the file holds it now (what a restarted worker would read)."""
    path = store.path_for(thread_id)
    if not path.exists():
        return None
    document: dict[str, Any] = json.loads(path.read_bytes())
    return document


def test_no_event_overtakes_the_commit_it_depends_on(client: FlaskClient, workspace: Path, state_dir: Path) -> None:
    writer = state_writer()
    store = ThreadStore(state_dir)
    received: list[dict[str, Any]] = []
    #: For each batch the writer was held on: what the client had received by then, and the batch.
    held: list[tuple[list[str], list[Durability]]] = []
    #: The thread file as it was on disk when the client received each event.
    file_when_received: list[dict[str, Any] | None] = []

    def hold(batch: list[Any]) -> None:
        time.sleep(HOLD_S)  # a slow disk; the client must see nothing new meanwhile
        held.append(([e["type"] for e in received], [job.durability for job in batch]))

    writer.before_batch = hold
    try:
        thread_id = new_thread_id()
        response = client.post("/", json=run_body(thread_id, "say hi", workspace), buffered=False)
        assert response.status_code == 200
        reader = SseEvents()
        for chunk in response_chunks(response):
            for event in reader.feed(chunk):
                received.append(event)
                file_when_received.append(on_disk(store, thread_id))
        raw = reader.raw
        response.close()
    finally:
        writer.before_batch = None
    events = assert_valid_agui_stream(raw, expect_terminal="success")
    assert custom(events, "iac-code.session.v1")

    # Three commits, in three batches: admission (C1), identity (C3), release (C7).
    # One job per batch: admission (C1, crash), the identity (C3, crash: the task id and the session
    # id may arrive in two events, so one or two commits), the release (C7, crash). None is power class,
    # so a turn without an interrupt pays no fsync on its path (docs/design.md#commit-durability).
    classes = [durabilities for _, durabilities in held]
    assert classes[0] == [Durability.CRASH] and classes[-1] == [Durability.CRASH]
    assert 1 <= len(classes[1:-1]) <= 2 and all(c == [Durability.CRASH] for c in classes[1:-1])
    types = [e["type"] for e in received]
    session_at = next(i for i, e in enumerate(received) if e["type"] == "CUSTOM" and "session" in e["name"])
    # While admission was held, the client had nothing (not even RUN_STARTED, i.e. no 200 yet) ...
    assert held[0][0] == []
    # ... while an identity commit was held, it had RUN_STARTED but not the session event carrying it ...
    for seen, _ in held[1:-1]:
        assert seen == ["RUN_STARTED"]
    # ... and while the release was held, the terminal event had not been sent.
    assert "RUN_FINISHED" not in held[-1][0] and "RUN_ERROR" not in held[-1][0]
    # Each dependent event arrived only when the file already held its commit: the admission's lease
    # with RUN_STARTED, the identity the session event announces with it, the lease released with RUN_FINISHED.
    admitted = file_when_received[types.index("RUN_STARTED")]
    assert admitted is not None and admitted["activeRun"]["runId"] == received[0]["runId"]
    identity = file_when_received[session_at]
    session = received[session_at]["value"]
    assert identity is not None and identity["execution"]["taskId"] == session["taskId"]
    assert identity["iacCodeSessionId"] == session["sessionId"]
    released = file_when_received[types.index("RUN_FINISHED")]
    assert released is not None and released.get("activeRun") is None
