"""The thread file's declared schema: what it refuses, what it reads leniently, what it builds."""

from __future__ import annotations

import copy

import pytest

from agui_bridge.store.document import load_document
from agui_bridge.store.errors import StateCorrupt
from agui_bridge.store.model import ThreadState, new_thread, to_document

DIGEST = "b" * 64


def _document() -> dict[str, object]:
    state = new_thread("thread-1", "/w", "user-1", "ros-1", "exec-1")
    state.execution.text_snapshot_digests = [DIGEST]
    return to_document(state)


def test_a_written_document_loads_back_to_the_same_record() -> None:
    state = new_thread("thread-1", "/w", None, "ros-1", "exec-1")
    state.run_digests = {"run-1": "d1", "run-2": "d2"}
    assert load_document(to_document(state), "thread-1") == state


def test_absent_optional_fields_take_the_record_defaults() -> None:
    doc = _document()
    for key in ("runDigests", "appliedResumeDigests", "terminalExecutionIds", "activeRun", "lastActivityAt", "userId"):
        doc.pop(key, None)
    execution = doc["execution"]
    assert isinstance(execution, dict)
    for key in ("pending", "pipelineSequence", "pipelineOpenSteps", "taskId"):
        execution.pop(key, None)
    state = load_document(doc, "thread-1")
    assert isinstance(state, ThreadState)
    assert (state.run_digests, state.applied_resume_digests, state.terminal_execution_ids) == ({}, [], [])
    assert (state.active_run, state.last_activity_ms, state.user_id) == (None, 0, None)
    assert (state.execution.pending, state.execution.pipeline_sequence, state.execution.task_id) == ({}, 0, None)


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d.update(schemaVersion=1.5), "schemaVersion: unsupported schemaVersion"),
        (lambda d: d.update(cwd=""), "cwd: must be a non-empty string"),
        (lambda d: d["execution"].update(pipelineSequence=-1), "execution.pipelineSequence: must be an integer >= 0"),
        (lambda d: d["execution"].update(textSnapshotDigests=["B" * 64]), "must be 64-char lowercase hex"),
        (lambda d: d.update(activeRun={"runId": "r", "executionId": "e", "owner": ""}), "activeRun.owner"),
    ],
)
def test_a_broken_document_names_its_first_problem(mutate: object, problem: str) -> None:
    doc = copy.deepcopy(_document())
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(StateCorrupt) as info:
        load_document(doc, "thread-1")
    assert problem in str(info.value)


def test_the_requested_thread_is_checked_first() -> None:
    with pytest.raises(StateCorrupt, match="does not match"):
        load_document(_document(), "thread-2")


def test_unusable_bounded_memory_entries_are_dropped_not_fatal() -> None:
    doc = _document()
    doc["runDigests"] = {"run-1": "d", "": "x", "run-2": 3}
    doc["terminalExecutionIds"] = ["e1", "", None, 4, "e1", "e2"]
    doc["execution"]["traceparent"] = "not-a-traceparent"  # type: ignore[index]
    state = load_document(doc, "thread-1")
    assert state.run_digests == {"run-1": "d"}
    assert state.terminal_execution_ids == ["e1", "e2"]
    assert state.execution.traceparent is None


def test_a_pending_entry_without_expiry_reads_as_expired_and_keeps_only_allowed_keys() -> None:
    doc = _document()
    doc["execution"]["pending"] = {  # type: ignore[index]
        "in-1": {"value": {"inputId": "in-1", "kind": "question", "apiKey": "secret"}, "sideband": False}
    }
    entry = load_document(doc, "thread-1").execution.pending["in-1"]
    assert entry.expires_at_ms == 0
    assert entry.value == {"inputId": "in-1", "kind": "question"}
