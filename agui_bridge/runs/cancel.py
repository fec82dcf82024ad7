"""The cancellation extension (docs/design.md#cancellation): works from any worker and after a restart.

Ownership (threadId + rosInvocationId of the *current* execution) is checked before anything is sent
to A2A. Then, in this order: the worker that streams the run is told (directly in this process, by a
cancel marker otherwise), so it ends its stream with RUN_ERROR CANCELLED; the A2A task is cancelled;
the durable part (pending cleared, execution retired, `cancelRequested` on the lease) is written under
the thread's lock. Telling the owner first means it hears of the cancel before the task's "canceled"
state ends its stream; a marker left for a run that is no longer live is removed again at the end.
Whether a lease is live is `state.lease.lease_is_live`, the rule admission and status use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from agui_bridge.errors import ExecutionNotFound, StateUnavailable
from agui_bridge.store import model
from agui_bridge.store.lease import LeaseCheck, lease_key
from agui_bridge.store.store import StateError, ThreadStore


class OwnerChannel(Protocol):
    """How a cancel reaches the worker streaming a run (service.BridgeService implements it)."""

    def notify(self, thread_id: str, lease: model.RunLease) -> None: ...

    def withdraw(self, lease: model.RunLease) -> None: ...


CANCELLED = "cancelled"
ALREADY_TERMINAL = "already_terminal"


@dataclass(frozen=True)
class CancelTarget:
    """What a valid cancel found: the status to answer, the A2A task to cancel and the run's lease."""

    status: str
    task_id: str | None
    lease: model.RunLease | None = None


def read_known_thread(store: ThreadStore, thread_id: str) -> model.ThreadState:
    """The extensions' read: an unknown thread is 404 EXECUTION_NOT_FOUND, unreadable state 503.

    (docs/design.md#decision-no-500)
    """
    try:
        state = store.read(thread_id)
    except StateError as exc:
        raise StateUnavailable() from exc
    if state is None:
        raise ExecutionNotFound()
    return state


def find_target(store: ThreadStore, execution_id: str, thread_id: str, ros_invocation_id: str) -> CancelTarget:
    state = read_known_thread(store, thread_id)
    if execution_id in state.terminal_execution_ids:
        return CancelTarget(ALREADY_TERMINAL, None)
    execution = state.execution
    if execution.execution_id != execution_id or execution.ros_invocation_id != ros_invocation_id:
        raise ExecutionNotFound()  # another thread's or another caller's execution: no distinct answer
    lease = state.active_run
    if lease is not None and lease.execution_id != execution_id:
        lease = None
    return CancelTarget(CANCELLED, execution.task_id, lease)


def retire_cancelled(store: ThreadStore, execution_id: str, thread_id: str, now_ms: int) -> None:
    """Clear pending interrupts, retire the execution and flag its lease (one locked write)."""
    try:
        with store.transaction(thread_id) as txn:
            state = txn.state
            if state is None or state.execution.execution_id != execution_id:
                return
            lease = state.active_run
            if lease is not None and lease.execution_id == execution_id:
                lease.cancel_requested = True
            model.retire_execution(state)
            state.last_activity_ms = now_ms
            txn.commit(state)
    except StateError as exc:
        raise StateUnavailable() from exc


def cancel_execution(
    store: ThreadStore,
    cancel_task: Callable[[str], None],
    execution_id: str,
    thread_id: str,
    ros_invocation_id: str,
    now_ms: int,
    owner: OwnerChannel | None = None,
    lease_live: LeaseCheck | None = None,
) -> str:
    """Owner first, then A2A, then the durable write; a marker for a run no longer live is withdrawn."""
    target = find_target(store, execution_id, thread_id, ros_invocation_id)
    if target.status == ALREADY_TERMINAL:
        return ALREADY_TERMINAL
    lease = target.lease
    notice: tuple[OwnerChannel, model.RunLease] | None = None
    if owner is not None and lease is not None and (lease_live is None or lease_live(lease, now_ms)):
        owner.notify(thread_id, lease)
        notice = (owner, lease)
    try:
        if target.task_id is not None:
            cancel_task(target.task_id)
        retire_cancelled(store, execution_id, thread_id, now_ms)
    finally:
        if notice is not None:
            withdraw_if_ended(store, thread_id, notice[1], notice[0], lease_live)
    return CANCELLED


def withdraw_if_ended(
    store: ThreadStore,
    thread_id: str,
    lease: model.RunLease,
    owner: OwnerChannel,
    lease_live: LeaseCheck | None,
) -> None:
    """Remove the notice unless the thread still records that run as live.

    The owner removes its marker when its run ends, after releasing the lease; this check runs after
    the marker was written. So whichever comes last sees the other's work, and no marker outlives
    its run.
    """
    try:
        state = store.read(thread_id)
    except StateError:
        return  # unreadable now: the owner's clean-up or the retention sweep removes the marker
    current = state.active_run if state is not None else None
    now_ms = int(time.time() * 1000)
    live = (
        current is not None
        and lease_key(current) == lease_key(lease)
        and (lease_live is None or lease_live(current, now_ms))
    )
    if not live:
        owner.withdraw(lease)
