"""SIGTERM to gunicorn drains instead of cutting streams (docs/design.md#shutdown-drain).

An active run gets RUN_ERROR (CANCELLED, "shutting down") before its stream ends and its A2A task is
cancelled; a thread parked on an interrupt is untouched and resumes on the next server.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import (
    BridgeServer,
    StreamReader,
    bridge_server,
    custom,
    new_thread_id,
    run_body,
    wait_for_task_state,
)

pytestmark = pytest.mark.e2e

#: graceful_timeout 12 s leaves 2 s for active runs to finish before the drain stops them.
DRAIN_ENV = {"IAC_CODE_AGUI_GRACEFUL_TIMEOUT": "12"}


def test_sigterm_ends_active_runs_with_run_error_and_keeps_interrupts(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    state = tmp_path / "state"
    server = BridgeServer(demo_url, demo_token, state, tmp_path, workers=2, env=dict(DRAIN_ENV)).start()
    try:
        parked_thread = new_thread_id()
        parked = server.run(run_body(parked_thread, "please write file", tmp_path), expect="interrupt")
        (interrupt,) = parked[-1]["outcome"]["interrupts"]
        reader = StreamReader(server.post(run_body(new_thread_id(), "slow [SLOW 60]", tmp_path)))
        events = reader.until(lambda evs: bool(custom(evs, "iac-code.session.v1")))
        task_id = custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
        result: dict[str, Any] = {}
        finished = threading.Thread(target=lambda: result.update(raw=reader.rest(), at=time.monotonic()))
        finished.start()
        sent_at = time.monotonic()
        server.stop(signal.SIGTERM, group=False)
        finished.join(30)
    finally:
        server.stop(signal.SIGKILL)
    events = assert_valid_agui_stream(result["raw"], expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
    assert events[-1]["message"] == "The AG-UI server is shutting down; the execution was cancelled."
    assert result["at"] - sent_at < 10  # stopped by the drain, not by gunicorn's kill at 12 s
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    with bridge_server(demo_url, demo_token, state, tmp_path, workers=2) as restarted:
        body = run_body(parked_thread, "", tmp_path)
        body["resume"] = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
        restarted.run(body, expect="success")
