"""Thread records built field by field for the tests of the record's copies and codecs."""

from __future__ import annotations

from agui_bridge.config import limits
from agui_bridge.store.model import AppliedResume, PendingInterrupt, RunLease, ThreadState, new_thread

DIGEST = "ab" * 32


def full_thread_state() -> ThreadState:
    """A thread record with every field set, ordered maps out of order and lists at and over their bounds."""
    state = new_thread("thread-1", "/work/ws", "user-1", "ros-1", "exec-1")
    state.session_id = "session-1"
    state.execution.task_id = "task-1"
    state.execution.pipeline_sequence = 3
    state.execution.pipeline_open_steps = ["b", "a", "b"]
    state.execution.text_snapshot_digests = [DIGEST, "0" * 64, DIGEST]
    state.execution.traceparent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    state.execution.pending = {
        "input-2": PendingInterrupt(
            value={"inputId": "input-2", "kind": "permission", "secret": "dropped", "options": [{"id": "x"}]},
            sideband=True,
            expires_at_ms=1_795_000_000_123,
            announced={"z": 1, "a": {"y": [1, {"b": 2, "a": 1}]}},
        ),
        "input-1": PendingInterrupt(value={"inputId": "input-1"}, sideband=False, expires_at_ms=1_795_000_000_000),
    }
    state.run_digests = {f"run-{i}": DIGEST for i in range(limits.MAX_RUN_DIGESTS + 5)}
    state.run_digests[""] = DIGEST
    state.applied_resume_digests = [AppliedResume(f"exec-{i % 3}", f"i-{i}", "d") for i in range(40)]
    state.terminal_execution_ids = [f"exec-{i}" for i in range(limits.MAX_TERMINAL_EXECUTION_IDS + 3)] + ["exec-5"]
    state.active_run = RunLease("run-1", "exec-1", "owner-1", 1_795_000_000_000, cancel_requested=True)
    state.last_activity_ms = 1_795_000_000_999
    return state
