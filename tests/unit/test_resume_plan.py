"""The pure resume decisions and the answer schema check.

See docs/design.md#resume-preflight, docs/design.md#sending-answers, docs/design.md#answer-validation and
docs/design.md#decision-applied-answer-is-already-applied.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from agui_bridge.config.limits import MAX_ANSWER_JSON_CHARS
from agui_bridge.errors import (
    BridgeError,
    ExecutionLost,
    IncompleteResume,
    ResumeAlreadyApplied,
    ResumePayloadInvalid,
    UnknownInterrupt,
)
from agui_bridge.projection.interrupts import InputRequest, build_interrupt, collect_inputs
from agui_bridge.protocol.ids import emitted_id
from agui_bridge.runs import resume_plan as plan
from agui_bridge.store.model import PendingInterrupt
from agui_bridge.validation.answers import FORMAT_CHECKER, REQUIRED_FORMATS, json_chars_exceed, payload_errors
from agui_bridge.validation.run_input import ResumeAnswer

PERM = {"kind": "permission", "inputId": "p1", "toolUseId": "t1", "required": True}
QUESTION = {
    "kind": "ask_user_question",
    "inputId": "q1",
    "toolUseId": "ask-1",
    "required": True,
    "options": [{"id": "small", "label": "Small"}, {"candidate_index": 7, "name": "Seven"}],
    "allowFreeText": True,
}
CANDIDATES = {
    "kind": "candidate_selection",
    "inputId": "c1",
    "required": True,
    "options": [{"candidate_index": 0, "name": "a"}],
}


def entry(value: dict[str, Any], sideband: bool = False) -> PendingInterrupt:
    return PendingInterrupt(value=value, sideband=sideband, expires_at_ms=10**13, announced=build_interrupt(value, "x"))


def answer(interrupt_id: str, status: str = "resolved", payload: object = None) -> ResumeAnswer:
    return ResumeAnswer(interrupt_id, status, payload, payload is not None)


def request(value: dict[str, Any], sideband: bool = False) -> InputRequest:
    return InputRequest(str(value["inputId"]), value, sideband)


def test_answer_digest_is_canonical_and_null_for_a_bare_cancel() -> None:
    assert plan.answer_digest(answer("p1", payload={"b": 1, "a": "é"})) == plan.answer_digest(
        answer("p1", payload={"a": "é", "b": 1})
    )
    bare = plan.answer_digest(answer("p1", "cancelled"))
    assert bare == plan.answer_digest(ResumeAnswer("p1", "cancelled", None, False))
    assert bare != plan.answer_digest(answer("p1", "cancelled", {}))


@pytest.mark.parametrize(
    ("answers", "applied", "error"),
    [
        ([answer("p1", payload={"decision": "deny"})], {"p1": "other"}, ResumeAlreadyApplied),
        ([answer("p9")], {"p1": "d"}, ExecutionLost),
        ([], {}, ExecutionLost),
    ],
)
def test_nothing_pending(answers: list[ResumeAnswer], applied: dict[str, str], error: type[BridgeError]) -> None:
    with pytest.raises(error):
        plan.check_nothing_pending(answers, applied)


def reconcile(
    pending: dict[str, PendingInterrupt], inputs: list[InputRequest], answers: list[ResumeAnswer], **kw: Any
) -> plan.Reconciled:
    options: dict[str, Any] = {"snapshot_lists_inputs": bool(inputs), "snapshot_terminal": False, "applied": {}}
    options.update(now_ms=0, ttl_ms=1000)
    options.update(kw)
    return plan.reconcile(pending, inputs, answers=answers, **options)


def test_reconcile_merges_when_a2a_shows_no_input_and_replaces_when_it_shows_others() -> None:
    pending = {"p1": entry(PERM)}
    kept = reconcile(pending, [], [answer("p1")], snapshot_lists_inputs=False)
    assert list(kept.pending) == ["p1"] and not kept.changed
    other = {**PERM, "inputId": "p2"}
    replaced = reconcile(pending, [request(other)], [answer("p1")])
    assert list(replaced.pending) == ["p2"] and replaced.changed and replaced.before == {"p1"}
    assert replaced.pending["p2"].expires_at_ms == 1000 and replaced.pending["p2"].announced is not None
    merged = reconcile(pending, [request(PERM), request(other, sideband=True)], [answer("p1")])
    assert list(merged.pending) == ["p1", "p2"] and merged.pending["p2"].sideband
    terminal = reconcile(pending, [], [answer("p1")], snapshot_terminal=True)
    assert terminal.pending == {}


def test_reconcile_drops_applied_interrupts_and_refuses_conflicts_and_duplicates() -> None:
    pending = {"p1": entry(PERM)}
    digest = plan.answer_digest(answer("p1", payload={"decision": "deny"}))
    dropped = reconcile(pending, [request(PERM)], [], applied={"p1": digest})
    assert dropped.pending == {}
    with pytest.raises(ResumeAlreadyApplied):
        reconcile(pending, [], [answer("p1", payload={"decision": "allow_once"})], applied={"p1": digest})
    with pytest.raises(IncompleteResume) as duplicate:
        reconcile(pending, [], [answer("p1"), answer("p1")])
    assert duplicate.value.message_key == "resume_duplicate_ids"


def test_select() -> None:
    pending = {"p1": entry(PERM)}
    base = plan.Reconciled(pending, frozenset(pending), False)
    assert [a.interrupt_id for a, _ in plan.select(base, [answer("p1")], {}).answers] == ["p1"]
    with pytest.raises(IncompleteResume):
        plan.select(base, [], {})
    with pytest.raises(UnknownInterrupt):
        plan.select(base, [answer("p1"), answer("zz")], {})
    repeated = answer("old", payload={"decision": "deny"})
    applied = {"old": plan.answer_digest(repeated)}
    assert len(plan.select(base, [answer("p1"), repeated], applied).answers) == 1  # identical repeat ignored
    with pytest.raises(ResumeAlreadyApplied):
        plan.select(base, [answer("p1"), answer("old", payload={"decision": "allow_once"})], applied)
    discovered = plan.Reconciled({"p1": entry(PERM), "p2": entry({**PERM, "inputId": "p2"})}, frozenset({"p1"}), True)
    assert plan.select(discovered, [answer("p1")], {}).new_interrupt
    with pytest.raises(ResumeAlreadyApplied):
        plan.select(plan.Reconciled({}, frozenset({"old"}), True), [repeated], applied)


@pytest.mark.parametrize(
    ("value", "ans", "expected"),
    [
        (PERM, answer("p1", payload={"decision": "allow_once"}), ("allow_once", None)),
        (PERM, answer("p1", "cancelled"), ("deny", None)),
        (PERM, answer("p1", "cancelled", {"decision": "allow_once"}), ("deny", None)),
        (QUESTION, answer("q1", payload={"selectedId": "small"}), (None, "Small")),
        (QUESTION, answer("q1", payload={"selectedId": "7"}), (None, "Seven")),
        (QUESTION, answer("q1", payload={"freeText": "medium"}), (None, "medium")),
        (CANDIDATES, answer("c1", payload={"selectedId": "0"}), (None, "a")),
        (QUESTION, answer("q1", "cancelled"), (None, None)),
    ],
)
def test_prepare_accepts(value: dict[str, Any], ans: ResumeAnswer, expected: tuple[str | None, str | None]) -> None:
    (prepared,) = plan.prepare([(ans, entry(value))])
    assert (prepared.decision, prepared.text) == expected
    assert prepared.cancelled == (ans.status == "cancelled")


@pytest.mark.parametrize(
    ("value", "ans", "key"),
    [
        (PERM, answer("p1"), "resume_payload_required"),
        (PERM, answer("p1", payload={"decision": "allow"}), "resume_payload_invalid"),
        (PERM, answer("p1", payload={"decision": "deny", "why": "x"}), "resume_payload_invalid"),
        (QUESTION, answer("q1", payload={"selectedId": "huge"}), "resume_payload_invalid"),
        (QUESTION, answer("q1", payload={"freeText": ""}), "resume_payload_invalid"),
        (QUESTION, answer("q1", payload={"selectedId": "small", "freeText": "x"}), "resume_payload_invalid"),
        (CANDIDATES, answer("c1", payload={"freeText": "own"}), "resume_payload_invalid"),
        (QUESTION, answer("q1", payload={"freeText": "x" * MAX_ANSWER_JSON_CHARS}), "resume_payload_too_large"),
        (
            QUESTION,
            answer("q1", payload={"freeText": ["x"] * (MAX_ANSWER_JSON_CHARS // 4)}),
            "resume_payload_too_large",
        ),
        (PERM, answer("p1", payload={"decision": "deny", "why": "x" * 10**7}), "resume_payload_too_large"),
    ],
)
def test_prepare_refuses(value: dict[str, Any], ans: ResumeAnswer, key: str) -> None:
    with pytest.raises(ResumePayloadInvalid) as error:
        plan.prepare([(ans, entry(value))])
    assert error.value.message_key == key


def test_a_payload_over_the_answer_bound_names_the_bound_in_its_message() -> None:
    with pytest.raises(ResumePayloadInvalid) as error:
        plan.prepare([(answer("q1", payload={"freeText": "x" * MAX_ANSWER_JSON_CHARS}), entry(QUESTION))])
    assert error.value.params == {"max": str(MAX_ANSWER_JSON_CHARS)}


@pytest.mark.parametrize(
    ("value", "chars"),
    [
        ("abc", 5),
        (12345, 1),  # numbers count from below: one character
        (None, 4),
        (True, 4),
        (False, 5),
        ([], 1),
        (["a", "b"], 3 + 3 + 3),
        ({"k": "v"}, 2 + 4 + 3),
        ({"k": [1, {"j": None}]}, 2 + 4 + 3 + 1 + 2 + 4 + 4),
    ],
)
def test_json_chars_exceed_counts_compact_json_from_below(value: object, chars: int) -> None:
    assert not json_chars_exceed(value, chars)
    assert json_chars_exceed(value, chars - 1)
    assert chars <= len(json.dumps(value, separators=(",", ":")))


def test_plan_sends() -> None:
    perm = plan.prepare([(answer("p1", payload={"decision": "allow_once"}), entry(PERM))])
    side = plan.prepare([(answer("p1", payload={"decision": "deny"}), entry(PERM, sideband=True))])
    question = plan.prepare([(answer("q1", payload={"freeText": "medium"}), entry(QUESTION))])
    plan_ids = {"run_id": "r1", "task_id": "task-1", "context_id": "ctx"}
    metadata = {"cwd": "/w"}
    streamed = plan.plan_sends(perm, **plan_ids, metadata=metadata)
    assert [(s.unary, s.params["message"]["messageId"]) for s in streamed.sends] == [(False, "agui-resume-r1-p1")]
    assert streamed.follow_task
    unary = plan.plan_sends(side, **plan_ids, metadata=metadata)
    assert [(s.unary, s.params["message"]["messageId"]) for s in unary.sends] == [(True, "agui-resume-p1")]
    mixed = plan.plan_sends(side + question, **plan_ids, metadata=metadata)
    assert [(s.unary, s.interrupt_ids) for s in mixed.sends] == [(False, ("p1",)), (False, ("q1",))]
    assert mixed.sends[-1].params["message"]["parts"] == [{"text": "medium"}] and not mixed.follow_task


def test_a_long_kernel_input_id_is_announced_bounded_and_answered_with_the_kernels_own() -> None:
    kernel_id = "perm/" + "x" * 300
    tool_use_id = "tool/" + "y" * 300
    value = {**PERM, "inputId": kernel_id, "toolUseId": tool_use_id}
    (found,) = collect_inputs({"input": value})
    announced = build_interrupt(found.value, "x")
    assert found.input_id == announced["id"] == emitted_id(kernel_id) != kernel_id
    assert announced["toolCallId"] == emitted_id(tool_use_id)
    chosen = plan.select(
        plan.Reconciled({found.input_id: entry(found.value)}, frozenset(), False),
        [answer(announced["id"], payload={"decision": "allow_once"})],
        {},
    )
    (send,) = plan.plan_sends(
        plan.prepare(chosen.answers), run_id="r1", task_id="task-1", context_id="ctx", metadata={}
    ).sends
    data = send.params["message"]["parts"][0]["data"]
    assert (data["inputId"], data["toolUseId"]) == (kernel_id, value["toolUseId"])
    assert send.interrupt_ids == (announced["id"],)


def test_every_format_we_rely_on_is_checked() -> None:
    assert set(REQUIRED_FORMATS) <= set(FORMAT_CHECKER.checkers)
    assert payload_errors({"type": "string", "format": "date-time"}, "yesterday") == [""]
    assert payload_errors({"type": "string", "format": "date-time"}, "2026-11-29T19:30:00.000Z") == []


def test_a_remote_ref_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the validator tried to open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    assert payload_errors({"$ref": "http://127.0.0.1:9/evil.json"}, {"decision": "deny"}) == [""]
    assert payload_errors({"type": 7}, {}) == [""]  # not a schema: nothing conforms
