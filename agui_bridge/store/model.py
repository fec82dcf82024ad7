"""The per-thread state record and its schemaVersion 1 document.

See docs/design.md#state-document and docs/design.md#state-load.

Python code works with snake_case dataclasses; camelCase exists only in `to_document` and `store/document.py`.
The record has no field for message text, images, credentials or model options, and pending input
values are cut down to the allow-list of docs/design.md#interrupt-building on the way in and out, so a secret cannot
reach the file even by mistake.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agui_bridge.config import limits
from agui_bridge.store.keys import context_id_for

SCHEMA_VERSION = 1

#: Input keys that may be persisted/projected (docs/design.md#interrupt-building); everything else is dropped.
PENDING_VALUE_KEYS = frozenset(
    {
        "schemaVersion",
        "kind",
        "requestTaskId",
        "contextId",
        "inputId",
        "toolUseId",
        "toolName",
        "title",
        "purpose",
        "effect",
        "target",
        "isReadOnly",
        "prompt",
        "safeSummary",
        "options",
        "language",
        "deploymentSummary",
        "scope",
        "subPipelineId",
        "operation",
        "displayParameters",
        "allowFreeText",
        "freeTextPrompt",
        "required",
    }
)

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


@dataclass
class PendingInterrupt:
    """An interrupt waiting for an answer; `value` is the allow-listed A2A input projection."""

    value: dict[str, object]
    sideband: bool
    expires_at_ms: int
    announced: dict[str, object] | None = None  # the AG-UI interrupt exactly as announced


@dataclass
class RunLease:
    """Durable busy slot (docs/design.md#decision-many-workers-one-truth): held by `owner`;
    `expires_at_ms` ends the grace period after which the
    owner's beacon (worker/beacon.py) must list the run for the lease to stay live."""

    run_id: str
    execution_id: str
    owner: str
    expires_at_ms: int
    cancel_requested: bool = False


@dataclass
class Execution:
    execution_id: str
    ros_invocation_id: str
    task_id: str | None = None
    pipeline_sequence: int = 0
    pipeline_open_steps: list[str] = field(default_factory=list)
    text_snapshot_digests: list[str] = field(default_factory=list)
    pending: dict[str, PendingInterrupt] = field(default_factory=dict)
    #: W3C traceparent of the run that started this execution, only while tracing is on (docs/design.md#observability):
    #: a resume's span links to it. An id pair, nothing else; an invalid value is dropped on read.
    traceparent: str | None = None


@dataclass
class AppliedResume:
    execution_id: str
    interrupt_id: str
    digest: str


@dataclass
class ThreadState:
    thread_id: str
    context_id: str
    cwd: str
    user_id: str | None
    session_id: str | None
    execution: Execution
    run_digests: dict[str, str] = field(default_factory=dict)
    applied_resume_digests: list[AppliedResume] = field(default_factory=list)
    terminal_execution_ids: list[str] = field(default_factory=list)
    active_run: RunLease | None = None
    last_activity_ms: int = 0


# --------------------------------------------------------------------------------------------- mutations


def new_thread(thread_id: str, cwd: str, user_id: str | None, ros_invocation_id: str, execution_id: str) -> ThreadState:
    """A freshly bound thread with its first execution and no task yet (docs/design.md#admission)."""
    return ThreadState(
        thread_id=thread_id,
        context_id=context_id_for(thread_id),
        cwd=cwd,
        user_id=user_id,
        session_id=None,
        execution=Execution(execution_id=execution_id, ros_invocation_id=ros_invocation_id),
    )


def _newest_unique(items: list[str], keep: int) -> list[str]:
    """The last `keep` distinct items, in their order (a repeated item keeps its first place)."""
    unique = list(dict.fromkeys(items))
    return unique[-keep:] if len(unique) > keep else unique


def _add_terminal(state: ThreadState, execution_id: str) -> None:
    """Retirement order, newest last, bounded: an execution older than the newest
    MAX_TERMINAL_EXECUTION_IDS is forgotten (a cancel of it is then EXECUTION_NOT_FOUND)."""
    ids = [*state.terminal_execution_ids, execution_id]
    state.terminal_execution_ids = _newest_unique(ids, limits.MAX_TERMINAL_EXECUTION_IDS)


def bounded_run_digests(run_digests: Mapping[str, str]) -> dict[str, str]:
    """The newest MAX_RUN_DIGESTS runIds in admission order; an older runId sent again is a new run
    (neither DUPLICATE_RUN_ID nor RUN_ID_CONFLICT): the window keeps the thread file bounded."""
    items = list(run_digests.items())
    return dict(items[-limits.MAX_RUN_DIGESTS :])


def bounded_applied(applied: list[AppliedResume], current_execution_id: str) -> list[AppliedResume]:
    """At most MAX_APPLIED_RESUME_DIGESTS entries: other executions' go first (only the current
    execution's digests are ever consulted), then the current one's oldest in stored order."""
    cap = limits.MAX_APPLIED_RESUME_DIGESTS
    if len(applied) <= cap:
        return list(applied)
    current = [a for a in applied if a.execution_id == current_execution_id]
    others = [a for a in applied if a.execution_id != current_execution_id]
    if len(current) >= cap:
        return current[-cap:]
    return others[len(others) - (cap - len(current)) :] + current


def rotate_execution(state: ThreadState, ros_invocation_id: str, new_execution_id: str) -> None:
    """Start a new turn (docs/design.md#admission): the old execution is recorded as terminal only if it had a task."""
    if state.execution.task_id is not None:
        _add_terminal(state, state.execution.execution_id)
    state.execution = Execution(execution_id=new_execution_id, ros_invocation_id=ros_invocation_id)


def retire_execution(state: ThreadState) -> None:
    """Mark the current execution finished: terminal, no task, nothing pending.

    This is "retire" of docs/design.md#commit-points.
    """
    _add_terminal(state, state.execution.execution_id)
    state.execution.task_id = None
    state.execution.pending = {}


# --------------------------------------------------------------------------------------------- time


def format_rfc3339_ms(ms: int) -> str:
    """Epoch milliseconds → `2026-11-29T19:30:00.000Z` (integer arithmetic, no float rounding)."""
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= _MAX_MS:
        raise ValueError("timestamp out of range")
    seconds, millis = divmod(ms, 1000)
    moment = _EPOCH + timedelta(seconds=seconds)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{millis:03d}Z"


def parse_rfc3339_ms(text: str) -> int:
    """RFC 3339 timestamp with an explicit offset → epoch milliseconds (sub-ms digits truncated)."""
    if _RFC3339.fullmatch(text) is None:
        raise ValueError("not an RFC 3339 timestamp")
    moment = datetime.fromisoformat(text)
    ms = (moment - _EPOCH) // _ONE_MS
    if not 0 <= ms <= _MAX_MS:
        raise ValueError("timestamp out of range")
    return ms


# --------------------------------------------------------------------------------------------- to document


def _sorted_json(value: object) -> object:
    """Deep copy with object keys sorted, so the file is stable without `sort_keys` (see `to_document`)."""
    if isinstance(value, Mapping):
        return {str(key): _sorted_json(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_json(item) for item in value]
    return value


def allowed_value(value: Mapping[str, object]) -> dict[str, object]:
    """The allow-listed keys of a pending input value, deep-copied with sorted keys."""
    return {key: _sorted_json(value[key]) for key in sorted(value) if key in PENDING_VALUE_KEYS}


def _pending_document(entry: PendingInterrupt) -> dict[str, object]:
    doc: dict[str, object] = {}
    if entry.announced is not None:
        doc["announced"] = _sorted_json(entry.announced)
    doc["expiresAt"] = format_rfc3339_ms(entry.expires_at_ms)
    doc["sideband"] = bool(entry.sideband)
    doc["value"] = allowed_value(entry.value)
    return doc


def to_document(state: ThreadState) -> dict[str, object]:
    """The schemaVersion 1 document of `state`.

    Keys come out sorted, except `execution.pending`, which keeps insertion order: RUN_FINISHED lists
    pending interrupts in insertion order (docs/design.md#interrupt-commit) and, since every operation
    re-reads the file (docs/design.md#decision-many-workers-one-truth), the file is the only place
    that order can live. Serialise with `sort_keys=False`. For the same reason
        `runDigests` and `terminalExecutionIds` keep their age order (newest last): they are bounded
        windows (docs/http-api.md#limits) and the file is where "newest" is remembered.
    """
    execution = state.execution
    execution_doc: dict[str, object] = {
        "executionId": execution.execution_id,
        "pending": {key: _pending_document(entry) for key, entry in execution.pending.items()},
        "pipelineOpenSteps": sorted(set(execution.pipeline_open_steps)),
        "pipelineSequence": execution.pipeline_sequence,
        "rosInvocationId": execution.ros_invocation_id,
        "taskId": execution.task_id,
        "textSnapshotDigests": sorted(set(execution.text_snapshot_digests)),
    }
    if execution.traceparent is not None:
        execution_doc["traceparent"] = execution.traceparent
    doc: dict[str, object] = {}
    if state.active_run is not None:
        lease = state.active_run
        doc["activeRun"] = {
            "cancelRequested": lease.cancel_requested,
            "executionId": lease.execution_id,
            "leaseUntil": lease.expires_at_ms,
            "owner": lease.owner,
            "runId": lease.run_id,
        }
    applied = bounded_applied(state.applied_resume_digests, execution.execution_id)
    applied.sort(key=lambda a: (a.execution_id, a.interrupt_id, a.digest))
    doc["appliedResumeDigests"] = [
        {"digest": a.digest, "executionId": a.execution_id, "interruptId": a.interrupt_id} for a in applied
    ]
    doc["contextId"] = state.context_id
    doc["cwd"] = state.cwd
    doc["execution"] = execution_doc
    doc["iacCodeSessionId"] = state.session_id
    doc["lastActivityAt"] = state.last_activity_ms
    doc["runDigests"] = bounded_run_digests(state.run_digests)  # admission order, newest last
    doc["schemaVersion"] = SCHEMA_VERSION
    doc["terminalExecutionIds"] = _newest_unique(state.terminal_execution_ids, limits.MAX_TERMINAL_EXECUTION_IDS)
    doc["threadId"] = state.thread_id
    doc["userId"] = state.user_id
    return doc
