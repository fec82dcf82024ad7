"""The per-thread state record: the one declaration of the thread file's schemaVersion 1 document.

See docs/design.md#state-record, docs/design.md#state-document and docs/design.md#state-load.

Python code works with snake_case dataclasses; each field's metadata names its camelCase key and its kind
(`store/kinds.py`), and `store/derive.py` derives loading, writing and copying from them (the end of this module).
The record has no field for message text, images, credentials or model options, and pending input
values are cut down to the allow-list of docs/design.md#interrupt-building on the way in and out, so a secret cannot
reach the file even by mistake.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from agui_bridge.config import limits
from agui_bridge.protocol.ids import emitted_id
from agui_bridge.store.derive import derive
from agui_bridge.store.keys import context_id_for
from agui_bridge.store.kinds import (
    FLAG,
    HEX64,
    NATURAL,
    OPTIONAL_JSON_OBJECT,
    OPTIONAL_TEXT,
    TEXT,
    TIMESTAMP,
    JsonObject,
    Lenient,
    Nested,
    NestedList,
    NestedMap,
    OptionalNested,
    SortedSet,
    UsableStringList,
    UsableStringMap,
    sorted_json,
    wire,
)
from agui_bridge.store.kinds import format_rfc3339_ms as format_rfc3339_ms
from agui_bridge.store.kinds import parse_rfc3339_ms as parse_rfc3339_ms

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


def allowed_value(value: Mapping[str, object]) -> dict[str, object]:
    """The allow-listed keys of a pending input value, deep-copied with sorted keys."""
    return {key: sorted_json(value[key]) for key in sorted(value) if key in PENDING_VALUE_KEYS}


# --------------------------------------------------------------------------------------------- bounded windows


def _newest_unique(items: list[str], keep: int) -> list[str]:
    """The last `keep` distinct items, in their order (a repeated item keeps its first place)."""
    unique = list(dict.fromkeys(items))
    return unique[-keep:] if len(unique) > keep else unique


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


_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def _traceparent_kept(raw: object) -> str | None:
    """Tracing is never a reason to call a thread file corrupt: anything but a valid id is dropped."""
    return raw if isinstance(raw, str) and _TRACEPARENT.fullmatch(raw) else None


def _interrupt_id_of(entry: PendingInterrupt) -> str | None:
    """The AG-UI interrupt id of the kernel's inputId, which keys the entry (docs/design.md#emitted-ids)."""
    input_id = entry.value.get("inputId")
    return emitted_id(input_id) if isinstance(input_id, str) else None


def _applied_order(applied: AppliedResume) -> tuple[str, str, str]:
    return (applied.execution_id, applied.interrupt_id, applied.digest)


def _applied_window(applied: list[AppliedResume], state: ThreadState) -> list[AppliedResume]:
    return bounded_applied(applied, state.execution.execution_id)


def _terminal_window(ids: list[str]) -> list[str]:
    return _newest_unique(ids, limits.MAX_TERMINAL_EXECUTION_IDS)


# The records. Each field's metadata (`wire`) is its one declaration in the file: key, kind (how it is checked,
# written and copied, `store/kinds.py`) and, where a file may lack it and that does not mean the field's
# default, what its absence means. `store/derive.py` derives loading, writing and copying from these (below).


@dataclass
class PendingInterrupt:
    """An interrupt waiting for an answer; `value` is the allow-listed A2A input projection."""

    value: dict[str, object] = field(metadata=wire("value", JsonObject(allowed_value)))
    sideband: bool = field(metadata=wire("sideband", FLAG, absent=False))
    #: Absent or null in files written before interrupts expired: read as already expired (0), so the next
    #: access cleans the entry up.
    expires_at_ms: int = field(metadata=wire("expiresAt", TIMESTAMP, absent=0))
    #: The AG-UI interrupt exactly as announced.
    announced: dict[str, object] | None = field(default=None, metadata=wire("announced", OPTIONAL_JSON_OBJECT))


@dataclass
class RunLease:
    """Durable busy slot (docs/design.md#decision-many-workers-one-truth): held by `owner`;
    `expires_at_ms` ends the grace period after which the
    owner's beacon (worker/beacon.py) must list the run for the lease to stay live."""

    run_id: str = field(metadata=wire("runId", TEXT))
    execution_id: str = field(metadata=wire("executionId", TEXT))
    owner: str = field(metadata=wire("owner", TEXT))
    expires_at_ms: int = field(metadata=wire("leaseUntil", NATURAL, absent=0))
    cancel_requested: bool = field(default=False, metadata=wire("cancelRequested", FLAG))


@dataclass
class Execution:
    execution_id: str = field(metadata=wire("executionId", TEXT))
    ros_invocation_id: str = field(metadata=wire("rosInvocationId", TEXT))
    task_id: str | None = field(default=None, metadata=wire("taskId", OPTIONAL_TEXT))
    pipeline_sequence: int = field(default=0, metadata=wire("pipelineSequence", NATURAL))
    pipeline_open_steps: list[str] = field(default_factory=list, metadata=wire("pipelineOpenSteps", SortedSet(TEXT)))
    text_snapshot_digests: list[str] = field(
        default_factory=list, metadata=wire("textSnapshotDigests", SortedSet(HEX64))
    )
    #: Insertion order is kept: it is the order interrupts are announced (see `to_document`).
    pending: dict[str, PendingInterrupt] = field(
        default_factory=dict,
        metadata=wire("pending", NestedMap(PendingInterrupt, _interrupt_id_of, "value.inputId must give its key")),
    )
    #: W3C traceparent of the run that started this execution, only while tracing is on (docs/design.md#observability):
    #: a resume's span links to it. An id pair, nothing else; an invalid value is dropped on read.
    traceparent: str | None = field(default=None, metadata=wire("traceparent", Lenient(_traceparent_kept)))


@dataclass
class AppliedResume:
    execution_id: str = field(metadata=wire("executionId", TEXT))
    interrupt_id: str = field(metadata=wire("interruptId", TEXT))
    digest: str = field(metadata=wire("digest", TEXT))


@dataclass
class ThreadState:
    thread_id: str = field(metadata=wire("threadId", TEXT))
    context_id: str = field(metadata=wire("contextId", TEXT))
    cwd: str = field(metadata=wire("cwd", TEXT))
    user_id: str | None = field(metadata=wire("userId", OPTIONAL_TEXT, absent=None))
    session_id: str | None = field(metadata=wire("iacCodeSessionId", OPTIONAL_TEXT, absent=None))
    execution: Execution = field(metadata=wire("execution", Nested(Execution)))
    # runDigests and terminalExecutionIds are bounded memories, not records anything depends on: an unusable
    # entry is dropped on read, only a wrong container type makes the file corrupt. Both keep their age
    # order (newest last): the file is where "newest" is remembered.
    run_digests: dict[str, str] = field(
        default_factory=dict, metadata=wire("runDigests", UsableStringMap(bounded_run_digests))
    )
    applied_resume_digests: list[AppliedResume] = field(
        default_factory=list,
        metadata=wire("appliedResumeDigests", NestedList(AppliedResume, _applied_window, _applied_order)),
    )
    terminal_execution_ids: list[str] = field(
        default_factory=list, metadata=wire("terminalExecutionIds", UsableStringList(_terminal_window))
    )
    active_run: RunLease | None = field(default=None, metadata=wire("activeRun", OptionalNested(RunLease)))
    last_activity_ms: int = field(default=0, metadata=wire("lastActivityAt", NATURAL))


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


def _add_terminal(state: ThreadState, execution_id: str) -> None:
    """Retirement order, newest last, bounded: an execution older than the newest
    MAX_TERMINAL_EXECUTION_IDS is forgotten (a cancel of it is then EXECUTION_NOT_FOUND)."""
    ids = [*state.terminal_execution_ids, execution_id]
    state.terminal_execution_ids = _newest_unique(ids, limits.MAX_TERMINAL_EXECUTION_IDS)


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


# --------------------------------------------------------------------------------------------- derived

_RECORD: Final = derive(ThreadState, version_key="schemaVersion", version=SCHEMA_VERSION)
#: The strict loader of a whole document (marshmallow; `store/document.load_document` reports its errors).
RECORD_SCHEMA: Final = _RECORD.root.schema


def to_document(state: ThreadState) -> dict[str, object]:
    """The schemaVersion 1 document of `state`.

    Keys come out sorted, except `execution.pending`, which keeps insertion order: RUN_FINISHED lists
    pending interrupts in insertion order (docs/design.md#interrupt-commit) and, since every operation
    re-reads the file (docs/design.md#decision-many-workers-one-truth), the file is the only place
    that order can live. Serialise with `sort_keys=False`. For the same reason `runDigests` and
    `terminalExecutionIds` keep their age order (newest last): they are bounded windows
    (docs/http-api.md#limits) and the file is where "newest" is remembered. A NaN or infinity raises
    `ValueError`.
    """
    document: dict[str, object] = _RECORD.root.dump(state)
    return document


def copy_state(state: ThreadState) -> ThreadState:
    """A deep copy: mutating it never touches `state` (the worker's cache hands these out,
    docs/design.md#state-cache)."""
    copy: ThreadState = _RECORD.root.copy(state)
    return copy


def stored_copy(state: ThreadState) -> ThreadState:
    """A deep copy of `state` as the file written from it reads back (bounded, sorted, cleaned), without
    writing or reading it (docs/design.md#state-cache)."""
    stored: ThreadState = _RECORD.root.stored(state)
    return stored
