"""Admission of one POST / under the thread's file lock (docs/design.md#admission).

Every decision re-reads the thread file under its lock; nothing in process memory decides whether a
thread is busy, so N gunicorn workers behave like one process.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from agui_bridge.errors import (
    DuplicateRunId,
    ExecutionLost,
    ResumeRequired,
    RunIdConflict,
    StateUnavailable,
    ThreadBindingConflict,
    ThreadBusy,
)
from agui_bridge.observability import tracing
from agui_bridge.store import model
from agui_bridge.store.lease import HoldsRun, lease_is_live, run_key
from agui_bridge.store.store import Durability, StateError, ThreadStore
from agui_bridge.validation.run_input import RunInput


@dataclass
class RunTicket:
    """Everything a stream needs about its admitted run; a snapshot, not a cache."""

    thread_id: str
    run_id: str
    parent_run_id: str | None
    execution_id: str
    context_id: str
    ros_invocation_id: str
    cwd: str
    task_id: str | None
    session_id: str | None
    is_resume: bool
    owner: str
    text_digests: set[str] = field(default_factory=set)
    pending: dict[str, model.PendingInterrupt] = field(default_factory=dict)
    applied: dict[str, str] = field(default_factory=dict)  # interruptId -> accepted answer digest
    pipeline_sequence: int = 0
    pipeline_open_steps: list[str] = field(default_factory=list)
    orphaned_task_ids: list[str] = field(default_factory=list)
    expired_task_ids: list[str] = field(default_factory=list)
    trace_link: str | None = (
        None  # a resume: the traceparent its execution's first run stored, so the resumed run joins the same trace
    )

    @property
    def key(self) -> str:
        """The run key the registry, the beacon and cancel markers know this run by (never runId alone)."""
        return run_key(self.execution_id, self.run_id)


def _reclaim_dead_lease(state: model.ThreadState, ticket_orphans: list[str]) -> None:
    """A run whose owner died: cancel its task (after the lock), retire its execution (docs/design.md#lease-reclaim)."""
    lease = state.active_run
    state.active_run = None
    if lease is None or lease.execution_id != state.execution.execution_id:
        return
    if state.execution.pending:
        return  # an announced interrupt survives its owner
    if state.execution.task_id:
        ticket_orphans.append(state.execution.task_id)
    model.retire_execution(state)


def _drop_expired_pending(state: model.ThreadState, now_ms: int, expired_tasks: list[str]) -> bool:
    """A new run on a thread whose pending interrupts all expired cleans them up first.

    (docs/design.md#interrupt-expiry)
    """
    pending = state.execution.pending
    if not pending or any(p.expires_at_ms > now_ms for p in pending.values()):
        return False
    if state.execution.task_id:
        expired_tasks.append(state.execution.task_id)
    model.retire_execution(state)
    return True


def _admission_attributes(_store: ThreadStore, run: RunInput, **_kwargs: object) -> dict[str, str | bool]:
    return {"agui.thread_id": run.thread_id, "agui.run_id": run.run_id, "agui.resume": run.resume is not None}


@tracing.traced("agui.admission", _admission_attributes)
def admit_run(
    store: ThreadStore,
    run: RunInput,
    *,
    cwd: str,
    digest: str,
    owner: str,
    now_ms: int,
    lease_ttl_ms: int,
    is_alive: Callable[[str], bool],
    holds_run: HoldsRun | None = None,
) -> RunTicket:
    is_resume = run.resume is not None
    orphans: list[str] = []
    expired: list[str] = []
    try:
        if is_resume and not store.exists(run.thread_id):
            raise ExecutionLost("execution_lost")  # refused before the lock: no lock file for it
        with store.transaction(run.thread_id) as txn:
            state = txn.state
            if state is None:
                if is_resume:
                    raise ExecutionLost("execution_lost")
                state = model.new_thread(
                    run.thread_id, cwd, run.props.user_id, run.props.ros_invocation_id, str(uuid.uuid4())
                )
                fresh = True
            else:
                fresh = False
            previous = state.run_digests.get(run.run_id)
            if previous is not None:
                raise DuplicateRunId() if previous == digest else RunIdConflict()
            if lease_is_live(state.active_run, now_ms, is_alive=is_alive, holds_run=holds_run):
                raise ThreadBusy()
            if state.active_run is not None:
                _reclaim_dead_lease(state, orphans)
            if state.cwd != cwd or state.user_id != run.props.user_id:
                raise ThreadBindingConflict()
            if is_resume:
                if run.props.ros_invocation_id != state.execution.ros_invocation_id:
                    raise ExecutionLost("resume_mismatch")
            else:
                if state.execution.pending and not _drop_expired_pending(state, now_ms, expired):
                    raise ResumeRequired()
                if not fresh:
                    model.rotate_execution(state, run.props.ros_invocation_id, str(uuid.uuid4()))
                state.execution.traceparent = tracing.current_traceparent()
            execution = state.execution
            state.active_run = model.RunLease(
                run_id=run.run_id,
                execution_id=execution.execution_id,
                owner=owner,
                expires_at_ms=now_ms + lease_ttl_ms,
            )
            state.run_digests[run.run_id] = digest
            state.last_activity_ms = now_ms
            txn.commit(state, Durability.CRASH)  # C1/C2, docs/design.md#commit-durability
            return RunTicket(
                thread_id=run.thread_id,
                run_id=run.run_id,
                parent_run_id=run.parent_run_id,
                execution_id=execution.execution_id,
                context_id=state.context_id,
                ros_invocation_id=execution.ros_invocation_id,
                cwd=state.cwd,
                task_id=execution.task_id,
                session_id=state.session_id,
                is_resume=is_resume,
                owner=owner,
                text_digests=set(execution.text_snapshot_digests),
                pending=dict(execution.pending),
                applied={
                    a.interrupt_id: a.digest
                    for a in state.applied_resume_digests
                    if a.execution_id == execution.execution_id
                },
                pipeline_sequence=execution.pipeline_sequence,
                pipeline_open_steps=list(execution.pipeline_open_steps),
                orphaned_task_ids=orphans,
                expired_task_ids=expired,
                trace_link=execution.traceparent if is_resume else None,
            )
    except StateError as exc:
        raise StateUnavailable() from exc


@dataclass(frozen=True)
class GuidanceTicket:
    """An admitted guidance request: an extra user message into the thread's running Pipeline task."""

    thread_id: str
    run_id: str
    parent_run_id: str | None
    context_id: str
    task_id: str
    cwd: str
    #: The execution the guidance joins (the running one), sent in the `Agui-Execution-Id` header.
    execution_id: str


@tracing.traced("agui.admission", _admission_attributes)
def admit_guidance(store: ThreadStore, run: RunInput, *, cwd: str, digest: str, now_ms: int) -> GuidanceTicket:
    """No busy check, no lease, no rotation; only the run digest is recorded (docs/design.md#guidance)."""
    try:
        if not store.exists(run.thread_id):
            raise ExecutionLost("execution_lost")  # refused before the lock: no lock file for it
        with store.transaction(run.thread_id) as txn:
            state = txn.state
            if state is None:
                raise ExecutionLost("execution_lost")
            previous = state.run_digests.get(run.run_id)
            if previous is not None:
                raise DuplicateRunId() if previous == digest else RunIdConflict()
            if state.cwd != cwd or state.user_id != run.props.user_id:
                raise ThreadBindingConflict()
            task_id = state.execution.task_id
            if run.resume is not None or run.props.run_mode != "pipeline" or task_id is None:
                raise ExecutionLost("execution_lost")
            if state.execution.pending:
                raise ResumeRequired()
            state.run_digests[run.run_id] = digest
            state.last_activity_ms = now_ms
            txn.commit(state, Durability.CRASH)  # C1/C2, docs/design.md#commit-durability
            return GuidanceTicket(
                run.thread_id, run.run_id, run.parent_run_id, state.context_id, task_id, state.cwd,
                state.execution.execution_id,
            )  # fmt: skip
    except StateError as exc:
        raise StateUnavailable() from exc
