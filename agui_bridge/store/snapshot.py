"""Copies of a thread record for the worker's document cache (docs/design.md#state-cache).

`stored_copy` is the record exactly as reading back the file it was written to yields it: the document
keeps bounded windows and sorted sets (`model.to_document`) and reading it drops what the schema drops
(`state.document`), so what a later transaction gets from the cache equals what it would have read.
`copy_state` copies a record already in that form. Both are written out field by field (several times
cheaper than `copy.deepcopy`); tests/unit/test_state_snapshot.py fails when a record gains a field they
do not copy, or when a copy differs from the round trip through the file.
"""

from __future__ import annotations

from agui_bridge.config import limits
from agui_bridge.store.document import traceparent_kept
from agui_bridge.store.model import (
    AppliedResume,
    Execution,
    PendingInterrupt,
    RunLease,
    ThreadState,
    _newest_unique,
    _sorted_json,
    allowed_value,
    bounded_applied,
    bounded_run_digests,
)

__all__ = ["copy_state", "stored_copy"]


def _copy_json(value: object) -> object:
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value  # str, int, float, bool, None: immutable


def _copy_lease(lease: RunLease | None) -> RunLease | None:
    if lease is None:
        return None
    return RunLease(
        run_id=lease.run_id,
        execution_id=lease.execution_id,
        owner=lease.owner,
        expires_at_ms=lease.expires_at_ms,
        cancel_requested=lease.cancel_requested,
    )


def _with(state: ThreadState, execution: Execution, **fields: object) -> ThreadState:
    return ThreadState(
        thread_id=state.thread_id,
        context_id=state.context_id,
        cwd=state.cwd,
        user_id=state.user_id,
        session_id=state.session_id,
        execution=execution,
        active_run=_copy_lease(state.active_run),
        last_activity_ms=state.last_activity_ms,
        **fields,  # type: ignore[arg-type]
    )


def copy_state(state: ThreadState) -> ThreadState:
    """A deep copy: mutating it never touches `state`."""
    execution = state.execution
    return _with(
        state,
        Execution(
            execution_id=execution.execution_id,
            ros_invocation_id=execution.ros_invocation_id,
            task_id=execution.task_id,
            pipeline_sequence=execution.pipeline_sequence,
            pipeline_open_steps=list(execution.pipeline_open_steps),
            text_snapshot_digests=list(execution.text_snapshot_digests),
            pending={
                key: PendingInterrupt(
                    value=_copy_json(entry.value),  # type: ignore[arg-type]
                    sideband=entry.sideband,
                    expires_at_ms=entry.expires_at_ms,
                    announced=_copy_json(entry.announced),  # type: ignore[arg-type]
                )
                for key, entry in execution.pending.items()
            },
            traceparent=execution.traceparent,
        ),
        run_digests=dict(state.run_digests),
        applied_resume_digests=[
            AppliedResume(execution_id=a.execution_id, interrupt_id=a.interrupt_id, digest=a.digest)
            for a in state.applied_resume_digests
        ],
        terminal_execution_ids=list(state.terminal_execution_ids),
    )


def _usable(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def stored_copy(state: ThreadState) -> ThreadState:
    """A deep copy of `state` as the file written from it reads back (bounded, sorted, cleaned)."""
    execution = state.execution
    applied = bounded_applied(state.applied_resume_digests, execution.execution_id)
    applied.sort(key=lambda a: (a.execution_id, a.interrupt_id, a.digest))
    terminal = _newest_unique(state.terminal_execution_ids, limits.MAX_TERMINAL_EXECUTION_IDS)
    return _with(
        state,
        Execution(
            execution_id=execution.execution_id,
            ros_invocation_id=execution.ros_invocation_id,
            task_id=execution.task_id,
            pipeline_sequence=execution.pipeline_sequence,
            pipeline_open_steps=sorted(set(execution.pipeline_open_steps)),
            text_snapshot_digests=sorted(set(execution.text_snapshot_digests)),
            pending={
                key: PendingInterrupt(
                    value=allowed_value(entry.value),
                    sideband=bool(entry.sideband),
                    expires_at_ms=entry.expires_at_ms,
                    announced=None if entry.announced is None else _sorted_json(entry.announced),  # type: ignore[arg-type]
                )
                for key, entry in execution.pending.items()
            },
            traceparent=traceparent_kept(execution.traceparent),
        ),
        run_digests={k: v for k, v in bounded_run_digests(state.run_digests).items() if _usable(k) and _usable(v)},
        applied_resume_digests=[
            AppliedResume(execution_id=a.execution_id, interrupt_id=a.interrupt_id, digest=a.digest) for a in applied
        ],
        terminal_execution_ids=list(dict.fromkeys(t for t in terminal if _usable(t))),
    )
