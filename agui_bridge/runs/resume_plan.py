"""What a resume may do, decided before anything reaches A2A (pure; docs/design.md#resume-preflight).

The stream feeds these functions the durable pending set, the `GetTask` snapshot's inputs and the
resume list; they answer with the reconciled pending set, the answers to send, or the error that
ends the run. Nothing here does I/O, so every row of the resume matrix is a table test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from agui_bridge.a2a import messages as a2a_messages
from agui_bridge.config.limits import MAX_ANSWER_JSON_CHARS
from agui_bridge.errors import (
    ExecutionLost,
    IncompleteResume,
    ResumeAlreadyApplied,
    ResumePayloadInvalid,
    UnknownInterrupt,
)
from agui_bridge.i18n.message_keys import MessageKey
from agui_bridge.projection.interrupts import InputRequest, build_interrupt, option_title, response_schema
from agui_bridge.projection.values import non_empty_str
from agui_bridge.store import model
from agui_bridge.validation.answers import conforms, json_chars_exceed
from agui_bridge.validation.run_input import ResumeAnswer

PERMISSION = "permission"
CANCELLED = "cancelled"
DENY = "deny"


def answer_digest(answer: ResumeAnswer) -> str:
    """SHA-256 of the canonical `{"status", "payload"}` (raw payload, null when absent; docs/design.md#exactly-once):
    the one the answer was validated with, never computed here (this runs on the hub)."""
    return answer.digest


def check_nothing_pending(answers: Sequence[ResumeAnswer], applied: Mapping[str, str]) -> NoReturn:
    """No task or nothing pending always ends the resume (docs/design.md#decision-applied-answer-is-already-applied)."""
    if any(answer.interrupt_id in applied for answer in answers):
        raise ResumeAlreadyApplied()
    raise ExecutionLost("task_unavailable")


def expired(pending: Mapping[str, model.PendingInterrupt], now_ms: int) -> bool:
    """A resume of an execution with an expired interrupt cannot be applied (docs/design.md#interrupt-expiry)."""
    return any(entry.expires_at_ms <= now_ms for entry in pending.values())


def dismisses_all(answers: Sequence[ResumeAnswer]) -> bool:
    """Every entry cancels its interrupt (the only answer a client may give an expired one)."""
    return bool(answers) and all(answer.status == CANCELLED for answer in answers)


@dataclass(frozen=True)
class Reconciled:
    pending: dict[str, model.PendingInterrupt]
    before: frozenset[str]  # ids that were pending before the snapshot was consulted
    changed: bool


def _new_entry(request: InputRequest, now_ms: int, ttl_ms: int) -> model.PendingInterrupt:
    expires_at_ms = now_ms + ttl_ms
    return model.PendingInterrupt(
        value=request.value,
        sideband=request.sideband,
        expires_at_ms=expires_at_ms,
        announced=build_interrupt(request.value, model.format_rfc3339_ms(expires_at_ms)),
    )


def reconcile(
    pending: Mapping[str, model.PendingInterrupt],
    snapshot_inputs: Sequence[InputRequest],
    *,
    snapshot_lists_inputs: bool,
    snapshot_terminal: bool,
    answers: Sequence[ResumeAnswer],
    applied: Mapping[str, str],
    now_ms: int,
    ttl_ms: int,
) -> Reconciled:
    """The pending set after consulting A2A's view of the task.

    Replaced when the task is terminal, or when A2A lists inputs and none of them is being answered;
    merged otherwise, so a snapshot without any input projection never erases a durable interrupt.
    """
    answered_ids = [answer.interrupt_id for answer in answers]
    snapshot_ids = {request.input_id for request in snapshot_inputs}
    replace = snapshot_terminal or (snapshot_lists_inputs and not snapshot_ids.intersection(answered_ids))
    result: dict[str, model.PendingInterrupt] = {} if replace else dict(pending)
    for request in snapshot_inputs:
        existing = result.get(request.input_id) or pending.get(request.input_id)
        if existing is None:
            result[request.input_id] = _new_entry(request, now_ms, ttl_ms)
        else:
            result[request.input_id] = model.PendingInterrupt(
                value=existing.value,
                sideband=existing.sideband or request.sideband,
                expires_at_ms=existing.expires_at_ms,
                announced=existing.announced,
            )
    if len(set(answered_ids)) != len(answered_ids):
        raise IncompleteResume("resume_duplicate_ids")
    digests = {answer.interrupt_id: answer_digest(answer) for answer in answers}
    for input_id in [i for i in result if i in applied]:
        if input_id in digests and digests[input_id] != applied[input_id]:
            raise ResumeAlreadyApplied()
        del result[input_id]  # an accepted answer is authoritative even if GetTask is stale
    changed = list(result) != list(pending) or any(
        result[i].sideband != pending[i].sideband for i in result if i in pending
    )
    return Reconciled(result, frozenset(pending), changed)


@dataclass(frozen=True)
class Selection:
    answers: tuple[tuple[ResumeAnswer, model.PendingInterrupt], ...]  # in resume-list order
    new_interrupt: bool  # only newly discovered interrupts are unanswered: announce, send nothing


def select(reconciled: Reconciled, answers: Sequence[ResumeAnswer], applied: Mapping[str, str]) -> Selection:
    """Which answers go to A2A, or why none may (docs/design.md#resume-preflight)."""
    chosen: list[tuple[ResumeAnswer, model.PendingInterrupt]] = []
    for answer in answers:
        entry = reconciled.pending.get(answer.interrupt_id)
        if entry is not None:
            chosen.append((answer, entry))
            continue
        previous = applied.get(answer.interrupt_id)
        if previous is None:
            raise UnknownInterrupt()
        if previous != answer_digest(answer):
            raise ResumeAlreadyApplied()
    answered = {answer.interrupt_id for answer, _ in chosen}
    unanswered = [input_id for input_id in reconciled.pending if input_id not in answered]
    if any(input_id in reconciled.before for input_id in unanswered):
        raise IncompleteResume("resume_incomplete")
    if unanswered:
        return Selection(tuple(chosen), new_interrupt=True)
    if not chosen:
        raise ResumeAlreadyApplied()  # every entry repeats an accepted answer: nothing is sent again
    return Selection(tuple(chosen), new_interrupt=False)


@dataclass(frozen=True)
class PreparedAnswer:
    """A validated answer, ready to be sent (permission decision or question text).

    `interrupt_id` is the AG-UI id the client answered; `input_id` the kernel's own (docs/design.md#emitted-ids).
    """

    interrupt_id: str
    input_id: str
    digest: str
    permission: bool
    cancelled: bool
    sideband: bool
    decision: str | None
    text: str | None
    tool_use_id: str | None
    request_task_id: str | None


def _schema_of(entry: model.PendingInterrupt) -> dict[str, Any]:
    announced = entry.announced
    schema = announced.get("responseSchema") if announced is not None else None
    return schema if isinstance(schema, dict) else response_schema(entry.value)


def answer_text(value: dict[str, Any], payload: object) -> str:
    """The answer text: free text, else the selected option's title, else the selected id ('' if none).

    (docs/design.md#answer-validation)
    """
    if not isinstance(payload, dict):
        return ""
    free = payload.get("freeText", payload.get("free_text"))
    if isinstance(free, str) and free:
        return free
    selected = payload.get("selectedId", payload.get("selected_id"))
    if not isinstance(selected, str) or not selected:
        return ""
    return option_title(value, selected) or selected


def prepare(chosen: Iterable[tuple[ResumeAnswer, model.PendingInterrupt]]) -> list[PreparedAnswer]:
    """Check every answer before anything is sent, so a bad one leaves A2A's wait untouched.

    A payload over MAX_ANSWER_JSON_CHARS is refused before its schema is looked at. The preflight calls this
    off the hub: a large valid answer costs a native thread's time, not every stream's
    (docs/design.md#answer-validation).
    """
    prepared: list[PreparedAnswer] = []
    for answer, entry in chosen:
        value = entry.value
        permission = value.get("kind") == PERMISSION
        cancelled = answer.status == CANCELLED
        decision: str | None = None
        text: str | None = None
        if permission or not cancelled:
            payload: object = {"decision": DENY} if permission and cancelled else answer.payload
            if not cancelled and not answer.has_payload:
                raise ResumePayloadInvalid("resume_payload_required")
            if json_chars_exceed(payload, MAX_ANSWER_JSON_CHARS):
                raise ResumePayloadInvalid(
                    MessageKey.RESUME_PAYLOAD_TOO_LARGE, params={"max": str(MAX_ANSWER_JSON_CHARS)}
                )
            if not conforms(_schema_of(entry), payload):
                raise ResumePayloadInvalid("resume_payload_invalid")
            if permission:
                decision = str(payload["decision"]) if isinstance(payload, dict) else DENY
            else:
                text = answer_text(value, payload)
                if not text:
                    raise ResumePayloadInvalid("resume_no_answer")
        prepared.append(
            PreparedAnswer(
                interrupt_id=answer.interrupt_id,
                input_id=non_empty_str(value.get("inputId")) or answer.interrupt_id,
                digest=answer_digest(answer),
                permission=permission,
                cancelled=cancelled,
                sideband=entry.sideband,
                decision=decision,
                text=text,
                tool_use_id=non_empty_str(value.get("toolUseId")),
                request_task_id=non_empty_str(value.get("requestTaskId")),
            )
        )
    return prepared


@dataclass(frozen=True)
class Send:
    """One A2A call carrying answers; `unary` is the sideband `SendMessage` (docs/design.md#sending-answers)."""

    interrupt_ids: tuple[str, ...]
    unary: bool
    params: dict[str, Any]
    not_accepted_key: str


@dataclass(frozen=True)
class SendPlan:
    sends: tuple[Send, ...]
    follow_task: bool  # permission answers: subscribe (or re-read the task) until a final state


def plan_sends(
    prepared: Sequence[PreparedAnswer],
    *,
    run_id: str,
    task_id: str,
    context_id: str,
    metadata: dict[str, Any],
) -> SendPlan:
    """Permission answers one message each (unary when all are sideband), then one question text.

    The reference drops permission answers that share a resume with a question answer; here they are
    sent first, so no answered interrupt is left waiting in A2A
    (docs/design.md#decision-permissions-before-question, docs/design.md#sending-answers).
    """
    permissions = [p for p in prepared if p.permission]
    questions = [p for p in prepared if not p.permission]
    unary = bool(permissions) and not questions and all(p.sideband for p in permissions)
    sends: list[Send] = []
    for answer in permissions:
        part = a2a_messages.permission_answer_part(
            task_id, answer.input_id, answer.tool_use_id or "", answer.decision or DENY
        )
        message_id = f"agui-resume-{answer.interrupt_id}" if unary else f"agui-resume-{run_id}-{answer.interrupt_id}"
        message = a2a_messages.user_message(message_id, [part], metadata, context_id, task_id)
        sends.append(
            Send((answer.interrupt_id,), unary, a2a_messages.send_params(message), "a2a_permission_not_accepted")
        )
    if questions:
        text = questions[-1].text or ""
        message = a2a_messages.user_message(f"agui-resume-{run_id}", [{"text": text}], metadata, context_id, task_id)
        ids = tuple(q.interrupt_id for q in questions)
        sends.append(Send(ids, False, a2a_messages.send_params(message), "a2a_answer_not_accepted"))
    return SendPlan(tuple(sends), follow_task=bool(permissions) and not questions)


__all__ = [
    "PreparedAnswer",
    "Reconciled",
    "Selection",
    "Send",
    "SendPlan",
    "answer_digest",
    "answer_text",
    "check_nothing_pending",
    "dismisses_all",
    "expired",
    "plan_sends",
    "prepare",
    "reconcile",
    "select",
]
