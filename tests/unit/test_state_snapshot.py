"""Copies for the document cache equal what reading the written file back gives (docs/design.md#state-cache)."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agui_bridge.store.document import load_document
from agui_bridge.store.model import (
    AppliedResume,
    Execution,
    PendingInterrupt,
    RunLease,
    ThreadState,
    copy_state,
    new_thread,
    stored_copy,
    to_document,
)
from tests.support.thread_records import DIGEST, full_thread_state


def _round_trip(state: ThreadState) -> ThreadState:
    text = json.dumps(to_document(state), indent=2, ensure_ascii=False, allow_nan=False)
    return load_document(json.loads(text), state.thread_id)


def _same(copy: ThreadState, read: ThreadState) -> bool:
    """Equal, and in the same order where order means something (dict equality ignores it)."""
    return (
        copy == read
        and list(copy.run_digests) == list(read.run_digests)
        and list(copy.execution.pending) == list(read.execution.pending)
        and to_document(copy) == to_document(read)
    )


def test_every_field_of_every_record_is_known() -> None:
    """The declared fields, pinned: a new one is declared once (`store/model.py`, with a kind) and listed here."""
    names = {
        record.__name__: [f.name for f in dataclasses.fields(record)]
        for record in (ThreadState, Execution, PendingInterrupt, RunLease, AppliedResume)
    }
    assert names == {
        "ThreadState": [
            "thread_id",
            "context_id",
            "cwd",
            "user_id",
            "session_id",
            "execution",
            "run_digests",
            "applied_resume_digests",
            "terminal_execution_ids",
            "active_run",
            "last_activity_ms",
        ],
        "Execution": [
            "execution_id",
            "ros_invocation_id",
            "task_id",
            "pipeline_sequence",
            "pipeline_open_steps",
            "text_snapshot_digests",
            "pending",
            "traceparent",
        ],
        "PendingInterrupt": ["value", "sideband", "expires_at_ms", "announced"],
        "RunLease": ["run_id", "execution_id", "owner", "expires_at_ms", "cancel_requested"],
        "AppliedResume": ["execution_id", "interrupt_id", "digest"],
    }


def test_stored_copy_equals_the_round_trip_through_the_file() -> None:
    state = full_thread_state()
    assert _same(stored_copy(state), _round_trip(state))
    state.execution.traceparent = "not a traceparent"
    state.active_run = None
    assert _same(stored_copy(state), _round_trip(state))


def test_copy_state_is_equal_and_shares_nothing_mutable() -> None:
    original = stored_copy(full_thread_state())
    copy = copy_state(original)
    assert copy == original
    copy.execution.pending["input-2"].value["options"][0]["id"] = "changed"  # type: ignore[index]
    copy.execution.pending["input-2"].announced["a"]["y"].append(3)  # type: ignore[index]
    copy.execution.pipeline_open_steps.append("c")
    copy.run_digests["new"] = DIGEST
    copy.applied_resume_digests[0].digest = "changed"
    copy.terminal_execution_ids.clear()
    assert copy.active_run is not None
    copy.active_run.cancel_requested = False
    copy.execution.task_id = None
    assert original == stored_copy(full_thread_state())


_ids = st.text(alphabet="abcxyz-0123", min_size=0, max_size=6)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(_ids, max_size=6),
    digests=st.lists(_ids, max_size=6),
    terminal=st.lists(_ids, max_size=8),
    applied=st.lists(st.tuples(st.sampled_from(["exec-1", "exec-2"]), _ids.filter(bool)), max_size=6),
    sideband=st.booleans(),
)
def test_stored_copy_matches_the_round_trip_for_any_record(
    steps: list[str], digests: list[str], terminal: list[str], applied: list[tuple[str, str]], sideband: bool
) -> None:
    state = new_thread("t", "/w", None, "ros", "exec-1")
    state.execution.pipeline_open_steps = [s for s in steps if s]
    state.run_digests = dict.fromkeys(digests, "d")
    state.terminal_execution_ids = terminal
    state.applied_resume_digests = [AppliedResume(e, i, "d") for e, i in applied]
    state.execution.pending = {"i": PendingInterrupt({"inputId": "i", "kind": "k", "x": 1}, sideband, 5)}
    assert _same(stored_copy(state), _round_trip(state))
