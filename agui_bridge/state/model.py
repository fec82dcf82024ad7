"""The per-thread state record and its schemaVersion 1 document.

See docs/design.md#state-document and docs/design.md#state-load.

Python code works with snake_case dataclasses; camelCase exists only in `to_document`/`from_document`.
The record has no field for message text, images, credentials or model options, and pending input
values are cut down to the allow-list of docs/design.md#interrupt-building on the way in and out, so a secret cannot
reach the file even by mistake.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agui_bridge import limits
from agui_bridge.state.errors import StateCorrupt
from agui_bridge.state.keys import context_id_for

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

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
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
    owner's beacon (state/beacon.py) must list the run for the lease to stay live."""

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
    #: W3C traceparent of the run that started this execution, only while tracing is on (issue 16):
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
    (no longer DUPLICATE_RUN_ID or RUN_ID_CONFLICT)."""
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


def _allowed_value(value: Mapping[str, object]) -> dict[str, object]:
    return {key: _sorted_json(value[key]) for key in sorted(value) if key in PENDING_VALUE_KEYS}


def _pending_document(entry: PendingInterrupt) -> dict[str, object]:
    doc: dict[str, object] = {}
    if entry.announced is not None:
        doc["announced"] = _sorted_json(entry.announced)
    doc["expiresAt"] = format_rfc3339_ms(entry.expires_at_ms)
    doc["sideband"] = bool(entry.sideband)
    doc["value"] = _allowed_value(entry.value)
    return doc


def to_document(state: ThreadState) -> dict[str, object]:
    """The schemaVersion 1 document of `state`.

        Keys come out sorted, except `execution.pending`, which keeps insertion order: RUN_FINISHED lists
        pending interrupts in insertion order (docs/design.md#interrupt-commit) and, since every operation re-reads
    the file (docs/design.md#decision-many-workers-one-truth), the
        file is the only place that order can live. Serialise with `sort_keys=False`. For the same reason
        `runDigests` and `terminalExecutionIds` keep their age order (newest last): they are bounded
        windows (README "Limits") and the file is where "newest" is remembered.
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


# --------------------------------------------------------------------------------------------- from document


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise StateCorrupt(f"{where} must be an object")
    return value


def _text(doc: Mapping[str, object], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise StateCorrupt(f"{where}{key} must be a non-empty string")
    return value


def _optional_text(doc: Mapping[str, object], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise StateCorrupt(f"{where}{key} must be a string or null")
    return value


def _natural(doc: Mapping[str, object], key: str, where: str) -> int:
    value = doc.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StateCorrupt(f"{where}{key} must be an integer >= 0")
    return value


def _flag(doc: Mapping[str, object], key: str, where: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise StateCorrupt(f"{where}{key} must be a boolean")
    return value


def _list(doc: Mapping[str, object], key: str, where: str) -> list[object]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise StateCorrupt(f"{where}{key} must be an array")
    return value


def _pending_from(doc: Mapping[str, object]) -> dict[str, PendingInterrupt]:
    raw = _object(doc.get("pending", {}), "execution.pending")
    pending: dict[str, PendingInterrupt] = {}
    for input_id, entry_raw in raw.items():
        entry = _object(entry_raw, "execution.pending entry")
        value = _object(entry.get("value"), "execution.pending[].value")
        if value.get("inputId") != input_id or not input_id:
            raise StateCorrupt("execution.pending[].value.inputId must equal its key")
        expires_raw = entry.get("expiresAt")
        if expires_raw is None:
            # Written before interrupts expired: treat as already expired so the next access cleans up.
            expires_at_ms = 0
        elif isinstance(expires_raw, str):
            try:
                expires_at_ms = parse_rfc3339_ms(expires_raw)
            except ValueError:
                raise StateCorrupt("execution.pending[].expiresAt must be an RFC 3339 timestamp") from None
        else:
            raise StateCorrupt("execution.pending[].expiresAt must be an RFC 3339 timestamp")
        announced_raw = entry.get("announced")
        announced = None
        if announced_raw is not None:
            announced = _object(announced_raw, "execution.pending[].announced")
        pending[input_id] = PendingInterrupt(
            value=_allowed_value(value),
            sideband=_flag(entry, "sideband", "execution.pending[]."),
            expires_at_ms=expires_at_ms,
            announced=announced,
        )
    return pending


def _execution_from(raw: object) -> Execution:
    doc = _object(raw, "execution")
    steps = _list(doc, "pipelineOpenSteps", "execution.")
    if not all(isinstance(step, str) and step for step in steps):
        raise StateCorrupt("execution.pipelineOpenSteps must hold non-empty strings")
    digests = _list(doc, "textSnapshotDigests", "execution.")
    if not all(isinstance(d, str) and _HEX64.fullmatch(d) for d in digests):
        raise StateCorrupt("execution.textSnapshotDigests must hold 64-char lowercase hex strings")
    return Execution(
        execution_id=_text(doc, "executionId", "execution."),
        ros_invocation_id=_text(doc, "rosInvocationId", "execution."),
        task_id=_optional_text(doc, "taskId", "execution."),
        pipeline_sequence=_natural(doc, "pipelineSequence", "execution."),
        pipeline_open_steps=sorted({str(step) for step in steps}),
        text_snapshot_digests=sorted({str(d) for d in digests}),
        pending=_pending_from(doc),
        traceparent=_traceparent(doc.get("traceparent")),
    )


def _traceparent(raw: object) -> str | None:
    """Tracing is never a reason to call a thread file corrupt: anything but a valid id is dropped."""
    return raw if isinstance(raw, str) and _TRACEPARENT.fullmatch(raw) else None


def _lease_from(raw: object) -> RunLease:
    doc = _object(raw, "activeRun")
    return RunLease(
        run_id=_text(doc, "runId", "activeRun."),
        execution_id=_text(doc, "executionId", "activeRun."),
        owner=_text(doc, "owner", "activeRun."),
        expires_at_ms=_natural(doc, "leaseUntil", "activeRun."),
        cancel_requested=_flag(doc, "cancelRequested", "activeRun."),
    )


def _applied_from(doc: Mapping[str, object]) -> list[AppliedResume]:
    applied: list[AppliedResume] = []
    for raw in _list(doc, "appliedResumeDigests", ""):
        entry = _object(raw, "appliedResumeDigests entry")
        applied.append(
            AppliedResume(
                execution_id=_text(entry, "executionId", "appliedResumeDigests[]."),
                interrupt_id=_text(entry, "interruptId", "appliedResumeDigests[]."),
                digest=_text(entry, "digest", "appliedResumeDigests[]."),
            )
        )
    applied.sort(key=lambda a: (a.execution_id, a.interrupt_id, a.digest))
    return applied


def _from_document(doc: object, thread_id: str) -> ThreadState:
    top = _object(doc, "document")
    version = top.get("schemaVersion")
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise StateCorrupt("unsupported schemaVersion")
    if top.get("threadId") != thread_id:
        raise StateCorrupt("threadId does not match the requested thread")
    run_digests_raw = _object(top.get("runDigests", {}), "runDigests")
    run_digests = {
        run_id: digest
        for run_id, digest in run_digests_raw.items()
        if isinstance(run_id, str) and run_id and isinstance(digest, str) and digest
    }
    terminal = _list(top, "terminalExecutionIds", "")
    active_raw = top.get("activeRun")
    return ThreadState(
        thread_id=_text(top, "threadId", ""),
        context_id=_text(top, "contextId", ""),
        cwd=_text(top, "cwd", ""),
        user_id=_optional_text(top, "userId", ""),
        session_id=_optional_text(top, "iacCodeSessionId", ""),
        execution=_execution_from(top.get("execution")),
        run_digests=run_digests,
        applied_resume_digests=_applied_from(top),
        terminal_execution_ids=list(dict.fromkeys(t for t in terminal if isinstance(t, str) and t)),
        active_run=None if active_raw is None else _lease_from(active_raw),
        last_activity_ms=_natural(top, "lastActivityAt", ""),
    )


def from_document(doc: object, thread_id: str) -> ThreadState:
    """Validate a parsed document strictly (docs/design.md#state-load) and build the record; raises `StateCorrupt`."""
    try:
        return _from_document(doc, thread_id)
    except RecursionError:
        raise StateCorrupt("document is nested too deeply") from None
