"""ThreadState <-> schemaVersion 1 document.

See docs/design.md#state-document, docs/design.md#state-load, docs/design.md#decision-interrupts-expire and
docs/design.md#decision-many-workers-one-truth.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_bridge.protocol.ids import emitted_id
from agui_bridge.store.document import load_document as from_document
from agui_bridge.store.errors import StateCorrupt
from agui_bridge.store.keys import context_id_for
from agui_bridge.store.model import (
    AppliedResume,
    Execution,
    PendingInterrupt,
    RunLease,
    ThreadState,
    format_rfc3339_ms,
    new_thread,
    parse_rfc3339_ms,
    retire_execution,
    rotate_execution,
    to_document,
)

DIGEST_A = "a" * 64
DIGEST_B = "0123456789abcdef" * 4


def _sample() -> ThreadState:
    state = new_thread("thread-1", "/work/ws", "user-1", "ros-1", "exec-1")
    state.session_id = "session-1"
    state.execution.task_id = "task-1"
    state.execution.pipeline_sequence = 7
    state.execution.pipeline_open_steps = ["plan", "deploy"]
    state.execution.text_snapshot_digests = [DIGEST_B, DIGEST_A]
    state.execution.pending = {
        "input-b": PendingInterrupt(
            value={"inputId": "input-b", "kind": "permission", "prompt": "Allow once?"},
            sideband=False,
            expires_at_ms=1_795_000_000_123,
            announced={"id": "input-b", "reason": "tool_call", "message": "Allow once?"},
        ),
        "input-a": PendingInterrupt(
            value={"inputId": "input-a", "kind": "ask_user_question", "options": [{"id": "x"}]},
            sideband=True,
            expires_at_ms=1_795_000_000_000,
        ),
    }
    state.run_digests = {"run-2": DIGEST_B, "run-1": DIGEST_A}
    state.applied_resume_digests = [
        AppliedResume("exec-1", "input-z", DIGEST_B),
        AppliedResume("exec-0", "input-y", DIGEST_A),
    ]
    state.terminal_execution_ids = ["exec-0", "exec-00"]
    state.active_run = RunLease("run-2", "exec-1", "host:12:345", 1_795_000_001_000, cancel_requested=True)
    state.last_activity_ms = 1_795_000_000_999
    return state


def _json_round_trip(doc: dict[str, object]) -> object:
    return json.loads(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))


def test_document_has_spec_field_names() -> None:
    doc = to_document(_sample())
    assert doc["schemaVersion"] == 1
    assert doc["threadId"] == "thread-1"
    assert doc["contextId"] == context_id_for("thread-1")
    assert doc["iacCodeSessionId"] == "session-1"
    assert doc["userId"] == "user-1"
    assert doc["lastActivityAt"] == 1_795_000_000_999
    assert doc["activeRun"] == {
        "runId": "run-2",
        "executionId": "exec-1",
        "owner": "host:12:345",
        "leaseUntil": 1_795_000_001_000,
        "cancelRequested": True,
    }
    execution = doc["execution"]
    assert isinstance(execution, dict)
    assert execution["executionId"] == "exec-1"
    assert execution["rosInvocationId"] == "ros-1"
    assert execution["taskId"] == "task-1"
    assert execution["pipelineSequence"] == 7
    assert execution["pipelineOpenSteps"] == ["deploy", "plan"]
    assert execution["textSnapshotDigests"] == [DIGEST_B, DIGEST_A]
    assert execution["pending"]["input-b"] == {
        "value": {"inputId": "input-b", "kind": "permission", "prompt": "Allow once?"},
        "sideband": False,
        "expiresAt": "2026-11-18T11:06:40.123Z",
        "announced": {"id": "input-b", "reason": "tool_call", "message": "Allow once?"},
    }
    assert "announced" not in execution["pending"]["input-a"]
    assert doc["appliedResumeDigests"] == [
        {"executionId": "exec-0", "interruptId": "input-y", "digest": DIGEST_A},
        {"executionId": "exec-1", "interruptId": "input-z", "digest": DIGEST_B},
    ]
    assert doc["terminalExecutionIds"] == ["exec-0", "exec-00"]
    assert list(doc["runDigests"]) == ["run-2", "run-1"]  # type: ignore[call-overload]  # admission order


def test_document_omits_active_run_when_idle() -> None:
    state = _sample()
    state.active_run = None
    assert "activeRun" not in to_document(state)


def test_round_trip_keeps_everything_and_pending_insertion_order() -> None:
    state = _sample()
    loaded = from_document(_json_round_trip(to_document(state)), "thread-1")
    assert list(loaded.execution.pending) == ["input-b", "input-a"]
    assert to_document(loaded) == to_document(state)
    state.execution.pipeline_open_steps.sort()
    state.execution.text_snapshot_digests.sort()
    state.applied_resume_digests.sort(key=lambda a: (a.execution_id, a.interrupt_id))
    assert loaded == state


def test_document_keys_are_sorted_except_pending() -> None:
    doc = to_document(_sample())
    assert list(doc) == sorted(doc)
    execution = doc["execution"]
    assert isinstance(execution, dict)
    assert list(execution) == sorted(execution)


def test_pending_value_is_cut_to_the_allow_list_both_ways() -> None:
    state = _sample()
    state.execution.pending["input-a"].value["llmApiKey"] = "sk-secret-123"
    state.execution.pending["input-a"].value["question"] = "private question"
    text = json.dumps(to_document(state))
    assert "sk-secret-123" not in text
    assert "private question" not in text
    doc = to_document(_sample())
    doc["execution"]["pending"]["input-a"]["value"]["accessKeySecret"] = "AK-SECRET"  # type: ignore[index]
    loaded = from_document(doc, "thread-1")
    assert "accessKeySecret" not in loaded.execution.pending["input-a"].value


def test_document_has_no_field_for_secrets_or_text() -> None:
    names = set(ThreadState.__dataclass_fields__) | set(Execution.__dataclass_fields__)
    for forbidden in ("messages", "content", "llm_api_key", "llm_headers", "forwarded_props", "model"):
        assert forbidden not in names


def test_missing_optional_fields_take_defaults() -> None:
    doc = {
        "schemaVersion": 1,
        "threadId": "t",
        "contextId": "ctx",
        "cwd": "/w",
        "execution": {"executionId": "e", "rosInvocationId": "r"},
    }
    state = from_document(doc, "t")
    assert state.user_id is None and state.session_id is None
    assert state.execution == Execution("e", "r")
    assert state.run_digests == {} and state.applied_resume_digests == []
    assert state.terminal_execution_ids == [] and state.active_run is None and state.last_activity_ms == 0


def test_lenient_entries_are_dropped() -> None:
    doc = to_document(_sample())
    doc["runDigests"] = {"run-1": DIGEST_A, "": DIGEST_B, "run-3": "", "run-4": 5}
    doc["terminalExecutionIds"] = ["e1", "", 3, None, "e0"]
    state = from_document(doc, "thread-1")
    assert state.run_digests == {"run-1": DIGEST_A}
    assert state.terminal_execution_ids == ["e1", "e0"]  # age order is kept


def test_pending_without_expiry_is_treated_as_expired() -> None:
    doc = to_document(_sample())
    del doc["execution"]["pending"]["input-a"]["expiresAt"]  # type: ignore[index]
    assert from_document(doc, "thread-1").execution.pending["input-a"].expires_at_ms == 0


def _set(path: str, value: object) -> Callable[[dict[str, object]], None]:
    def mutate(doc: dict[str, object]) -> None:
        *parents, last = path.split("/")
        target: object = doc
        for part in parents:
            target = target[part]  # type: ignore[index]
        target[last] = value  # type: ignore[index]

    return mutate


def _delete(path: str) -> Callable[[dict[str, object]], None]:
    def mutate(doc: dict[str, object]) -> None:
        *parents, last = path.split("/")
        target: object = doc
        for part in parents:
            target = target[part]  # type: ignore[index]
        del target[last]  # type: ignore[attr-defined]

    return mutate


REJECTIONS: list[tuple[str, Callable[[dict[str, object]], None]]] = [
    ("schemaVersion 2", _set("schemaVersion", 2)),
    ("schemaVersion true", _set("schemaVersion", True)),
    ("schemaVersion string", _set("schemaVersion", "1")),
    ("schemaVersion missing", _delete("schemaVersion")),
    ("threadId mismatch", _set("threadId", "thread-2")),
    ("threadId missing", _delete("threadId")),
    ("empty contextId", _set("contextId", "")),
    ("contextId number", _set("contextId", 5)),
    ("missing cwd", _delete("cwd")),
    ("empty cwd", _set("cwd", "")),
    ("userId number", _set("userId", 3)),
    ("iacCodeSessionId object", _set("iacCodeSessionId", {})),
    ("execution missing", _delete("execution")),
    ("execution array", _set("execution", [])),
    ("empty executionId", _set("execution/executionId", "")),
    ("missing rosInvocationId", _delete("execution/rosInvocationId")),
    ("taskId number", _set("execution/taskId", 1)),
    ("bool pipelineSequence", _set("execution/pipelineSequence", True)),
    ("negative pipelineSequence", _set("execution/pipelineSequence", -1)),
    ("float pipelineSequence", _set("execution/pipelineSequence", 1.0)),
    ("pipelineOpenSteps not list", _set("execution/pipelineOpenSteps", "plan")),
    ("empty open step", _set("execution/pipelineOpenSteps", ["plan", ""])),
    ("digests not list", _set("execution/textSnapshotDigests", DIGEST_A)),
    ("bad digest hex", _set("execution/textSnapshotDigests", ["g" * 64])),
    ("upper-case digest", _set("execution/textSnapshotDigests", ["A" * 64])),
    ("short digest", _set("execution/textSnapshotDigests", ["a" * 63])),
    ("pending array", _set("execution/pending", [])),
    ("pending entry not object", _set("execution/pending/input-a", "x")),
    ("pending value not object", _set("execution/pending/input-a/value", [])),
    ("pending key != inputId", _set("execution/pending/input-a/value/inputId", "input-b")),
    ("pending inputId missing", _delete("execution/pending/input-a/value/inputId")),
    ("pending sideband not bool", _set("execution/pending/input-a/sideband", 1)),
    ("pending expiresAt number", _set("execution/pending/input-a/expiresAt", 5)),
    ("pending expiresAt not RFC 3339", _set("execution/pending/input-a/expiresAt", "tomorrow")),
    ("pending expiresAt no offset", _set("execution/pending/input-a/expiresAt", "2026-01-01T00:00:00")),
    ("pending announced not object", _set("execution/pending/input-a/announced", "x")),
    ("runDigests array", _set("runDigests", [])),
    ("appliedResumeDigests object", _set("appliedResumeDigests", {})),
    ("applied entry not object", _set("appliedResumeDigests", ["x"])),
    (
        "applied empty digest",
        _set("appliedResumeDigests", [{"executionId": "e", "interruptId": "i", "digest": ""}]),
    ),
    ("applied missing interruptId", _set("appliedResumeDigests", [{"executionId": "e", "digest": "d"}])),
    ("terminalExecutionIds object", _set("terminalExecutionIds", {})),
    ("activeRun not object", _set("activeRun", "run")),
    ("activeRun empty owner", _set("activeRun/owner", "")),
    ("activeRun leaseUntil bool", _set("activeRun/leaseUntil", False)),
    ("activeRun leaseUntil string", _set("activeRun/leaseUntil", "1")),
    ("activeRun cancelRequested string", _set("activeRun/cancelRequested", "yes")),
    ("lastActivityAt negative", _set("lastActivityAt", -5)),
    ("lastActivityAt bool", _set("lastActivityAt", True)),
]


@pytest.mark.parametrize(("case", "mutate"), REJECTIONS, ids=[case for case, _ in REJECTIONS])
def test_from_document_rejects_when_structure_is_broken(case: str, mutate: Callable[[dict[str, object]], None]) -> None:
    doc = copy.deepcopy(to_document(_sample()))
    mutate(doc)
    with pytest.raises(StateCorrupt):
        from_document(doc, "thread-1")


@pytest.mark.parametrize("doc", [None, [], "x", 1, True])
def test_from_document_rejects_when_not_an_object(doc: object) -> None:
    with pytest.raises(StateCorrupt):
        from_document(doc, "thread-1")


def test_rotate_execution_retires_old_one_only_if_it_had_a_task() -> None:
    state = _sample()
    state.execution.pending = {}
    rotate_execution(state, "ros-2", "exec-2")
    assert "exec-1" in state.terminal_execution_ids
    assert state.execution == Execution("exec-2", "ros-2")
    rotate_execution(state, "ros-3", "exec-3")  # exec-2 never got a task
    assert "exec-2" not in state.terminal_execution_ids
    assert state.terminal_execution_ids[-1] == "exec-1"  # newest last


def test_retire_execution_clears_task_and_pending() -> None:
    state = _sample()
    retire_execution(state)
    retire_execution(state)
    assert state.execution.task_id is None and state.execution.pending == {}
    assert state.terminal_execution_ids == ["exec-0", "exec-00", "exec-1"]
    assert state.execution.pipeline_sequence == 7


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "1970-01-01T00:00:00.000Z"), (1_795_000_000_123, "2026-11-18T11:06:40.123Z")],
)
def test_rfc3339_ms_round_trip(ms: int, text: str) -> None:
    assert format_rfc3339_ms(ms) == text
    assert parse_rfc3339_ms(text) == ms


def test_parse_rfc3339_accepts_offsets() -> None:
    assert parse_rfc3339_ms("1970-01-01T01:00:00.5+01:00") == 500


_text = st.text(min_size=1, max_size=12)
_hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
_ms = st.integers(min_value=0, max_value=253402300799999)
_json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)

_announced: st.SearchStrategy[dict[str, object] | None] = st.none() | st.dictionaries(
    st.text(max_size=5), _json, max_size=3
)


@st.composite
def _states(draw: st.DrawFn) -> ThreadState:
    thread_id = draw(_text)
    pending_ids = draw(st.lists(_text, unique=True, max_size=3))
    pending = {  # keyed by the AG-UI interrupt id of the kernel's inputId
        emitted_id(input_id): PendingInterrupt(
            value={"inputId": input_id, "options": draw(_json), "prompt": draw(_json)},
            sideband=draw(st.booleans()),
            expires_at_ms=draw(_ms),
            announced=draw(_announced),
        )
        for input_id in pending_ids
    }
    execution = Execution(
        execution_id=draw(_text),
        ros_invocation_id=draw(_text),
        task_id=draw(st.none() | st.text(max_size=5)),
        pipeline_sequence=draw(st.integers(min_value=0)),
        pipeline_open_steps=sorted(draw(st.sets(_text, max_size=3))),
        text_snapshot_digests=sorted(draw(st.sets(_hex64, max_size=3))),
        pending=pending,
    )
    applied = [AppliedResume(e, i, d) for e, i, d in draw(st.sets(st.tuples(_text, _text, _text), max_size=3))]
    applied.sort(key=lambda a: (a.execution_id, a.interrupt_id, a.digest))
    return ThreadState(
        thread_id=thread_id,
        context_id=draw(_text),
        cwd=draw(_text),
        user_id=draw(st.none() | st.text(max_size=5)),
        session_id=draw(st.none() | st.text(max_size=5)),
        execution=execution,
        run_digests=draw(st.dictionaries(_text, _text, max_size=3)),
        applied_resume_digests=applied,
        terminal_execution_ids=sorted(draw(st.sets(_text, max_size=3))),
        active_run=draw(st.none() | st.builds(RunLease, _text, _text, _text, st.integers(min_value=0), st.booleans())),
        last_activity_ms=draw(st.integers(min_value=0)),
    )


@given(_states())
def test_round_trip_property(state: ThreadState) -> None:
    loaded = from_document(_json_round_trip(to_document(state)), state.thread_id)
    assert loaded == state
