"""The thread file's schemaVersion 1 document, declared (docs/design.md#state-load).

Each schema names its fields (wire names as `data_key`) and the rule of each (`validate`), and its
`post_load` builds the record of `store.model`. A missing optional field takes the record's default.
Anything else wrong makes the file corrupt (`StateCorrupt`, naming the first problem), except where a
field says it is read leniently and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, validate

from agui_bridge.protocol.ids import emitted_id
from agui_bridge.store.errors import StateCorrupt
from agui_bridge.store.model import (
    SCHEMA_VERSION,
    AppliedResume,
    Execution,
    PendingInterrupt,
    RunLease,
    ThreadState,
    allowed_value,
    parse_rfc3339_ms,
)

__all__ = ["load_document", "traceparent_kept"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def _errors(text: str) -> dict[str, Any]:
    return {"required": "is required", "null": text, "invalid": text, "type": text}


def _text(**options: Any) -> fields.String:
    """A non-empty string."""
    text = "must be a non-empty string"
    return fields.String(validate=validate.Length(min=1, error=text), error_messages=_errors(text), **options)


def _optional_text(**options: Any) -> fields.String:
    return fields.String(
        allow_none=True, load_default=None, error_messages=_errors("must be a string or null"), **options
    )


def _natural(**options: Any) -> fields.Integer:
    """An integer >= 0 (strict: no floats, no booleans); 0 when absent."""
    return fields.Integer(
        strict=True,
        load_default=0,
        validate=validate.Range(min=0, error="must be an integer >= 0"),
        error_messages=_errors("must be an integer >= 0"),
        **options,
    )


class _Flag(fields.Boolean):
    """JSON true/false only; false when absent."""

    def __init__(self, **options: Any) -> None:
        super().__init__(load_default=False, error_messages=_errors("must be a boolean"), **options)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


def _array(item: fields.Field[Any], **options: Any) -> fields.List[Any]:
    return fields.List(item, load_default=list, error_messages=_errors("must be an array"), **options)


def _object(**options: Any) -> fields.Dict:
    return fields.Dict(error_messages=_errors("must be an object"), **options)


class _Expiry(fields.Field[int]):
    """`expiresAt`: an RFC 3339 timestamp. Absent or null in files written before interrupts expired:
    read as already expired (0), so the next access cleans the entry up."""

    def __init__(self, **options: Any) -> None:
        super().__init__(allow_none=True, load_default=0, **options)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int:
        try:
            if not isinstance(value, str):
                raise ValueError("not a string")
            return parse_rfc3339_ms(value)
        except ValueError:
            raise ValidationError("must be an RFC 3339 timestamp") from None

    def deserialize(
        self, value: Any, attr: str | None = None, data: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        return 0 if value is None else super().deserialize(value, attr, data, **kwargs)


class _Lenient(fields.Field[object]):
    """Any JSON value, cleaned by `keep` instead of refused (what may be dropped without harm)."""

    def __init__(self, keep: Callable[[object], object], **options: Any) -> None:
        super().__init__(allow_none=True, **options)
        self.keep = keep

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> object:
        return self.keep(value)


def traceparent_kept(raw: object) -> str | None:
    """Tracing is never a reason to call a thread file corrupt: anything but a valid id is dropped."""
    return raw if isinstance(raw, str) and _TRACEPARENT.fullmatch(raw) else None


_traceparent = traceparent_kept


def _usable(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _is_hex64(value: str) -> None:
    if _HEX64.fullmatch(value) is None:
        raise ValidationError("must be 64-char lowercase hex")


def _supported_version(value: object) -> None:
    if isinstance(value, bool) or value != SCHEMA_VERSION:
        raise ValidationError("unsupported schemaVersion")


class _Part(Schema):
    class Meta:
        unknown = EXCLUDE


class _PendingSchema(_Part):
    value = _object(required=True)
    sideband = _Flag()
    expires_at_ms = _Expiry(data_key="expiresAt")
    announced = _object(allow_none=True, load_default=None)

    @post_load
    def _record(self, data: dict[str, Any], **kwargs: Any) -> PendingInterrupt:
        return PendingInterrupt(
            value=allowed_value(data["value"]),
            sideband=data["sideband"],
            expires_at_ms=data["expires_at_ms"],
            announced=data["announced"],
        )


class _ExecutionSchema(_Part):
    execution_id = _text(data_key="executionId", required=True)
    ros_invocation_id = _text(data_key="rosInvocationId", required=True)
    task_id = _optional_text(data_key="taskId")
    pipeline_sequence = _natural(data_key="pipelineSequence")
    pipeline_open_steps = _array(_text(), data_key="pipelineOpenSteps")
    text_snapshot_digests = _array(
        fields.String(
            validate=_is_hex64,
            error_messages=_errors("must be a string"),
        ),
        data_key="textSnapshotDigests",
    )
    pending = fields.Dict(
        keys=fields.String(validate=validate.Length(min=1)),
        values=fields.Nested(_PendingSchema()),
        load_default=dict,
        error_messages=_errors("must be an object"),
    )
    traceparent = _Lenient(_traceparent, load_default=None)

    @post_load
    def _record(self, data: dict[str, Any], **kwargs: Any) -> Execution:
        pending: dict[str, PendingInterrupt] = data["pending"]
        if any(_interrupt_id_of(entry) != input_id for input_id, entry in pending.items()):
            raise ValidationError({"pending": ["value.inputId must give its key"]})
        data["pipeline_open_steps"] = sorted(set(data["pipeline_open_steps"]))
        data["text_snapshot_digests"] = sorted(set(data["text_snapshot_digests"]))
        return Execution(**data)


def _interrupt_id_of(entry: PendingInterrupt) -> str | None:
    """The AG-UI interrupt id of the kernel's inputId, which keys the entry (docs/design.md#emitted-ids)."""
    input_id = entry.value.get("inputId")
    return emitted_id(input_id) if isinstance(input_id, str) else None


class _LeaseSchema(_Part):
    run_id = _text(data_key="runId", required=True)
    execution_id = _text(data_key="executionId", required=True)
    owner = _text(required=True)
    expires_at_ms = _natural(data_key="leaseUntil")
    cancel_requested = _Flag(data_key="cancelRequested")

    @post_load
    def _record(self, data: dict[str, Any], **kwargs: Any) -> RunLease:
        return RunLease(**data)


class _AppliedSchema(_Part):
    execution_id = _text(data_key="executionId", required=True)
    interrupt_id = _text(data_key="interruptId", required=True)
    digest = _text(required=True)

    @post_load
    def _record(self, data: dict[str, Any], **kwargs: Any) -> AppliedResume:
        return AppliedResume(**data)


class _ThreadSchema(_Part):
    """The whole document (docs/design.md#state-load); `threadId` is checked against the request first."""

    schema_version = fields.Raw(
        data_key="schemaVersion",
        required=True,
        validate=_supported_version,
        error_messages={"required": "unsupported schemaVersion"},
    )
    thread_id = _text(data_key="threadId", required=True)
    context_id = _text(data_key="contextId", required=True)
    cwd = _text(required=True)
    user_id = _optional_text(data_key="userId")
    session_id = _optional_text(data_key="iacCodeSessionId")
    execution = fields.Nested(_ExecutionSchema(), required=True, error_messages=_errors("must be an object"))
    # runDigests and terminalExecutionIds are bounded memories, not records anything depends on: an
    # unusable entry is dropped, only a wrong container type makes the file corrupt.
    run_digests = _object(data_key="runDigests", load_default=dict)
    applied_resume_digests = _array(
        fields.Nested(_AppliedSchema(), error_messages=_errors("must be an object")), data_key="appliedResumeDigests"
    )
    terminal_execution_ids = _array(fields.Raw(allow_none=True), data_key="terminalExecutionIds")
    active_run = fields.Nested(_LeaseSchema(), data_key="activeRun", allow_none=True, load_default=None)
    last_activity_ms = _natural(data_key="lastActivityAt")

    @post_load
    def _record(self, data: dict[str, Any], **kwargs: Any) -> ThreadState:
        data.pop("schema_version")
        data["applied_resume_digests"].sort(key=lambda a: (a.execution_id, a.interrupt_id, a.digest))
        data["run_digests"] = {k: v for k, v in data["run_digests"].items() if _usable(k) and _usable(v)}
        data["terminal_execution_ids"] = list(dict.fromkeys(t for t in data["terminal_execution_ids"] if _usable(t)))
        return ThreadState(**data)


_THREAD_SCHEMA: Final = _ThreadSchema()


def _first_problem(messages: object, where: str = "") -> str:
    """`execution.pipelineSequence: must be an integer >= 0` for the first leaf of an error tree."""
    if isinstance(messages, dict):
        key, child = next(iter(messages.items()))
        name = where if key == "_schema" else f"{where}.{key}" if where else str(key)
        return _first_problem(child, name)
    if isinstance(messages, list) and messages:
        return _first_problem(messages[0], where)
    return f"{where or 'document'}: {messages}"


def load_document(doc: object, thread_id: str) -> ThreadState:
    """Validate a parsed document strictly (docs/design.md#state-load) and build the record.

    Raises `StateCorrupt` naming the first problem.
    """
    if not isinstance(doc, dict):
        raise StateCorrupt("document must be an object")
    if doc.get("threadId") != thread_id:
        raise StateCorrupt("threadId does not match the requested thread")
    try:
        state: ThreadState = _THREAD_SCHEMA.load(doc)
    except ValidationError as err:
        raise StateCorrupt(_first_problem(err.messages)) from None
    except RecursionError:
        raise StateCorrupt("document is nested too deeply") from None
    return state
