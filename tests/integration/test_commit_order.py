"""Fail-closed order with the batched writer held back: nothing that depends on a commit reaches the
client before that commit has completed (docs/design.md#commit-points, #commit-durability).
Demo agent, Flask test client."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from agui_bridge.store.writer import Durability, state_writer
from tests.support.agui_checks import assert_valid_agui_stream, parse_sse
from tests.support.harness import custom, new_thread_id, run_body
from tests.support.sse import response_chunks

HOLD_S = 0.3


def test_no_event_overtakes_the_commit_it_depends_on(client: FlaskClient, workspace: Path) -> None:
    writer = state_writer()
    received: list[dict[str, Any]] = []
    #: For each batch the writer was held on: what the client had received by then, and the batch.
    held: list[tuple[list[str], list[Durability]]] = []
    completed: list[int] = []  # len(received) when each batch had completed
    real_write_batch = writer._write_batch

    def hold(batch: list[Any]) -> None:
        time.sleep(HOLD_S)  # a slow disk; the client must see nothing new meanwhile
        held.append(([e["type"] for e in received], [job.durability for job in batch]))

    def write_batch(batch: list[Any]) -> None:
        real_write_batch(batch)
        completed.append(len(received))

    writer.before_batch = hold
    writer._write_batch = write_batch  # type: ignore[method-assign]
    try:
        thread_id = new_thread_id()
        response = client.post("/", json=run_body(thread_id, "say hi", workspace), buffered=False)
        assert response.status_code == 200
        raw = b""
        for chunk in response_chunks(response):
            raw += chunk
            received[:] = parse_sse(raw[: raw.rfind(b"\n\n") + 2])
        response.close()
    finally:
        writer.before_batch = None
        del writer._write_batch
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
    # Each dependent event arrived only after its commit completed.
    assert completed[0] <= types.index("RUN_STARTED")
    assert completed[-2] <= session_at
    assert completed[-1] <= types.index("RUN_FINISHED")
