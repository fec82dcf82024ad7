"""The cancellation extension (behaviour.md 7, D1, D5, D6): works from any worker and after a restart.

Ownership (threadId + rosInvocationId of the *current* execution) is checked before anything is sent
to A2A; the durable part (pending cleared, execution retired, `cancelRequested` on a live lease so the
owning worker ends its stream with RUN_ERROR CANCELLED) is done under the thread's lock afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agui_bridge.errors import ExecutionNotFound, StateUnavailable
from agui_bridge.state import model
from agui_bridge.state.store import StateError, ThreadStore

CANCELLED = "cancelled"
ALREADY_TERMINAL = "already_terminal"


@dataclass(frozen=True)
class CancelTarget:
    """What a valid cancel found: the status to answer and the A2A task to cancel, if any."""

    status: str
    task_id: str | None


def read_known_thread(store: ThreadStore, thread_id: str) -> model.ThreadState:
    """The extensions' read: an unknown thread is 404 EXECUTION_NOT_FOUND, unreadable state 503 (D5)."""
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
    return CancelTarget(CANCELLED, execution.task_id)


def retire_cancelled(
    store: ThreadStore,
    execution_id: str,
    thread_id: str,
    now_ms: int,
    notify_owner: Callable[[str], None] | None = None,
) -> None:
    """Clear pending interrupts, retire the execution, flag a live run (one locked write) and tell
    its owner worker (the beacon's cancel marker), so its stream ends with RUN_ERROR CANCELLED."""
    flagged: str | None = None
    try:
        with store.transaction(thread_id) as txn:
            state = txn.state
            if state is None or state.execution.execution_id != execution_id:
                return
            lease = state.active_run
            if lease is not None and lease.execution_id == execution_id:
                lease.cancel_requested = True
                flagged = lease.run_id
            model.retire_execution(state)
            state.last_activity_ms = now_ms
            txn.commit(state)
    except StateError as exc:
        raise StateUnavailable() from exc
    if flagged is not None and notify_owner is not None:
        notify_owner(flagged)


def cancel_execution(
    store: ThreadStore,
    cancel_task: Callable[[str], None],
    execution_id: str,
    thread_id: str,
    ros_invocation_id: str,
    now_ms: int,
    notify_owner: Callable[[str], None] | None = None,
) -> str:
    target = find_target(store, execution_id, thread_id, ros_invocation_id)
    if target.status == ALREADY_TERMINAL:
        return ALREADY_TERMINAL
    if target.task_id is not None:
        cancel_task(target.task_id)
    retire_cancelled(store, execution_id, thread_id, now_ms, notify_owner)
    return CANCELLED
