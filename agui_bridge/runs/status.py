"""The thread status extension: what a client needs to pick a thread up again after a reload
(docs/design.md#decision-status-extension).

`POST /extensions/iac-code/v1/threads/{threadId}/status` answers, for the caller of the thread's
*current* execution, whether a run holds a live lease and which interrupts are pending, exactly as
RUN_FINISHED announced them. It reads one lock-free snapshot (`ThreadStore.read`), writes nothing and
sends nothing to A2A; the state file holds no message text, so neither does the answer.

Matching is the cancellation extension's (docs/design.md#cancellation): an unknown thread, or a rosInvocationId
other than the current execution's, is 404 EXECUTION_NOT_FOUND with no distinct "forbidden" answer.
"""

from __future__ import annotations

from typing import Any

from agui_bridge.errors import ExecutionNotFound
from agui_bridge.projection.interrupts import build_interrupt
from agui_bridge.runs.cancel import read_known_thread
from agui_bridge.store.lease import LeaseCheck, lease_is_live
from agui_bridge.store.model import PendingInterrupt, RunLease, ThreadState, format_rfc3339_ms
from agui_bridge.store.store import ThreadStore


def announced_interrupt(entry: PendingInterrupt) -> dict[str, Any]:
    """The AG-UI interrupt as RUN_FINISHED listed it; rebuilt from the value for entries that predate it."""
    if entry.announced is not None:
        return dict(entry.announced)
    return build_interrupt(dict(entry.value), format_rfc3339_ms(entry.expires_at_ms))


def status_of(
    state: ThreadState, ros_invocation_id: str, now_ms: int, lease_live: LeaseCheck | None = None
) -> dict[str, Any]:
    """The answer for `state`: 404 unless `ros_invocation_id` is the current execution's.

    `active` is `state.lease.lease_is_live` (through `lease_live`), the rule admission uses: a run
    past its lease's grace period is active while its worker still streams it. Without `lease_live`
    (a pure read, no beacons) only the owner and the grace period count.
    """
    execution = state.execution
    if execution.ros_invocation_id != ros_invocation_id:
        raise ExecutionNotFound()
    lease = state.active_run
    answer: dict[str, Any] = {
        "threadId": state.thread_id,
        "executionId": execution.execution_id,
        "rosInvocationId": execution.ros_invocation_id,
        "active": lease is not None and (lease_live or _grace_only)(lease, now_ms),
    }
    if execution.task_id is not None:
        answer["taskId"] = execution.task_id
    answer["pending"] = [announced_interrupt(entry) for entry in execution.pending.values()]
    return answer


def _grace_only(lease: RunLease, now_ms: int) -> bool:
    return lease_is_live(lease, now_ms)


def thread_status(
    store: ThreadStore, thread_id: str, ros_invocation_id: str, now_ms: int, lease_live: LeaseCheck | None = None
) -> dict[str, Any]:
    """Read the thread once and answer; state read errors are 503 STATE_UNAVAILABLE (docs/design.md#decision-no-500)."""
    return status_of(read_known_thread(store, thread_id), ros_invocation_id, now_ms, lease_live)
