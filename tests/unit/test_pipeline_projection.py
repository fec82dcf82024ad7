"""Pipeline envelopes -> AG-UI (docs/design.md#pipelines) as tables of cases."""

from __future__ import annotations

from typing import Any

import pytest

from agui_bridge.demo import scenarios as sc
from agui_bridge.projection.pipeline import (
    CUSTOM_EVENT_TYPES,
    PipelineMapper,
    integer_of,
    name_of,
    run_projection,
    step_of,
)
from agui_bridge.projection.projector import RunProjector
from tests.support.agui_checks import event_types
from tests.support.emitted_streams import demo_pipeline_payloads, project

THREAD = "thread-1"


def envelope(
    event_type: str, sequence: int | float | None = None, event_id: str | None = None, **fields: Any
) -> dict[str, Any]:
    env: dict[str, Any] = {"schemaVersion": 1, "eventType": event_type, "pipelineRunId": "prun-1", **fields}
    if sequence is not None:
        env["sequence"] = sequence
    if event_id is not None:
        env["eventId"] = event_id
    return env


def mapper(durable: list[str] | None = None, sequence: int = 0) -> tuple[PipelineMapper, RunProjector]:
    pipeline = run_projection(THREAD, "run-1", set(), durable or [], sequence)
    return pipeline, pipeline.projector


def live(pipeline: PipelineMapper, *envelopes: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for env in envelopes:
        out.extend(pipeline.live({"pipeline": env}))
    return out


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"step": {"id": "requirements"}}, ("step:requirements", "requirements")),
        ({"step": {"id": "deploy"}, "candidate": {"id": "c0"}}, ("candidate:c0:deploy", "candidate:c0:deploy")),
        (
            {"candidateStep": {"id": "tpl"}, "step": {"id": "s"}, "candidate": {"id": "c1"}},
            ("candidate:c1:tpl", "candidate:c1:tpl"),
        ),
        (
            {"candidateStep": {"id": "tpl"}, "candidate": {"subPipelineId": "sub-2"}},
            ("candidate:sub-2:tpl", "candidate:sub-2:tpl"),
        ),
        (
            {"candidateStep": {"id": "tpl"}, "candidate": {"runId": "run-9"}},
            ("candidate:run-9:tpl", "candidate:run-9:tpl"),
        ),
        ({"candidateStep": {"id": "tpl"}, "candidate": {}}, ("step:tpl", "tpl")),
        ({"step": {"runId": "x"}}, None),
        ({"step": "requirements"}, None),
        ({}, None),
    ],
)
def test_step_keys(fields: dict[str, Any], expected: tuple[str, str] | None) -> None:
    assert step_of(fields) == expected
    if expected is not None:
        assert name_of(expected[0]) == expected[1]


@pytest.mark.parametrize(
    ("value", "expected"), [(3, 3), (3.0, 3), (3.5, None), (True, None), ("3", None), (None, None)]
)
def test_sequences(value: object, expected: int | None) -> None:
    assert integer_of(value) == expected


@pytest.mark.parametrize("event_type", sorted(CUSTOM_EVENT_TYPES))
def test_every_allow_listed_type_is_a_custom_event_with_the_envelope_unchanged(event_type: str) -> None:
    pipeline, _ = mapper()
    env = envelope(event_type, 1, "evt-1", data={"n": 1.0}, step={"id": "s"})
    out = live(pipeline, env)
    customs = [e for e in out if e["type"] == "CUSTOM"]
    assert len(customs) == 1 and customs[0]["name"] == "iac-code.pipeline.v1" and customs[0]["value"] == env


@pytest.mark.parametrize(
    "event_type",
    ["text_delta", "thinking_delta", "tool_started", "tool_result", "usage", "step_started", "step_completed",
     "candidate_step_started", "candidate_step_completed", "message_started", "context_usage",
     "permission_requested", "backup_committed", "input_required", "input_received", "something_new"],
)  # fmt: skip
def test_other_types_produce_no_custom_event(event_type: str) -> None:
    pipeline, _ = mapper()
    assert not [e for e in live(pipeline, envelope(event_type, 1, "evt-1")) if e["type"] == "CUSTOM"]


def test_standard_mappings() -> None:
    pipeline, projector = mapper()
    candidate = {"candidate": {"id": "c0", "runId": "crun-0"}, "scope": "candidate"}
    out = live(
        pipeline,
        envelope("text_delta", 1, "e1", data={"text": "hello "}),
        envelope("text_delta", 2, "e2", data={"text": "from c0"}, **candidate),
        envelope("thinking_delta", 3, "e3", data={"text": "hmm"}, **candidate),
        envelope("tool_started", 4, "e4", data={"toolUseId": "t1", "toolName": "ros", "input": {"b": 1, "a": "é"}}),
        envelope("tool_result", 5, "e5", data={"toolUseId": "t1", "result": {"ok": True}, "isError": False}),
        envelope("usage", 6, "e6", data={"inputTokens": 3.0, "outputTokens": 4, "provider": "p", "model": "m"}),
    )
    messages = [e["messageId"] for e in out if e["type"] == "TEXT_MESSAGE_START"]
    assert messages == [
        "pipeline-message:pipeline-thread-1:pipeline",
        "pipeline-message:pipeline-thread-1:candidate:crun-0",
    ]
    assert "TEXT_MESSAGE_END" not in event_types(out)  # parallel Pipeline text keeps other messages open
    reasoning = [e for e in out if e["type"] == "REASONING_START"]
    assert reasoning[0]["messageId"] == "reasoning-pipeline-message:pipeline-thread-1:candidate:crun-0"
    args = [e for e in out if e["type"] == "TOOL_CALL_ARGS"]
    assert args[0]["delta"] == '{"a":"é","b":1}'
    assert [e["content"] for e in out if e["type"] == "TOOL_CALL_RESULT"] == ['{"ok":true}']
    assert projector.usage_entries()[0]["inputTokens"] == 3
    closing = projector.close_all()
    assert event_types(closing).count("TEXT_MESSAGE_END") == 2


def test_step_lifecycle_durable_and_run_local() -> None:
    pipeline, projector = mapper()
    out = live(
        pipeline,
        envelope("step_started", 1, "e1", step={"id": "requirements"}),
        envelope("step_started", 2, "e2", step={"id": "requirements"}),  # already open: nothing
        envelope("candidate_step_started", 3, "e3", candidate={"id": "c0"}, candidateStep={"id": "tpl"}),
        envelope("step_completed", 4, "e4", step={"id": "requirements"}),
        envelope("step_completed", 5, "e5", step={"id": "never-started"}),  # not durable: nothing
    )
    assert [(e["type"], e["stepName"]) for e in out] == [
        ("STEP_STARTED", "requirements"),
        ("STEP_STARTED", "candidate:c0:tpl"),
        ("STEP_FINISHED", "requirements"),
    ]
    assert pipeline.durable_steps == {"candidate:c0:tpl"}
    assert [e["stepName"] for e in projector.close_all()] == ["candidate:c0:tpl"]  # run-local only
    assert pipeline.durable_steps == {"candidate:c0:tpl"}  # closing a run keeps the durable step


def test_resume_reopens_sorted_and_a_step_completed_while_not_open_is_a_zero_length_pair() -> None:
    pipeline, projector = mapper(durable=["step:deploy", "candidate:c1:tpl", "step:approve"], sequence=7)
    assert [e["stepName"] for e in pipeline.reopen()] == ["candidate:c1:tpl", "approve", "deploy"]
    projector.open_steps.pop("step:deploy")
    out = live(pipeline, envelope("step_failed", 8, "e8", step={"id": "deploy"}))
    assert [(e["type"], e["stepName"]) for e in out[:2]] == [("STEP_STARTED", "deploy"), ("STEP_FINISHED", "deploy")]
    assert out[0]["timestamp"] == out[1]["timestamp"] and out[2]["type"] == "CUSTOM"  # step_failed is both


def test_live_dedupe_by_event_id_and_cursor_and_the_persisted_sequence() -> None:
    pipeline, _ = mapper(sequence=40)
    assert live(pipeline, envelope("stack_progress", 1, "e1"))
    assert not live(pipeline, envelope("stack_progress", 1, "e1"))  # same eventId
    assert not live(pipeline, envelope("stack_progress", 1, "other"))  # sequence <= cursor
    assert live(pipeline, envelope("stack_progress", None, "e-no-seq"))
    assert live(pipeline, envelope("stack_progress", 2.0, None))
    assert (pipeline.cursor, pipeline.sequence) == (2, 40)  # the run cursor starts at 0 every run


def test_recovery_snapshot_then_missed_events() -> None:
    pipeline, _ = mapper(sequence=2)
    pipeline.live({"pipeline": envelope("stack_progress", 2, "seen")})
    response = {
        "snapshot": {"pipelineRunId": "prun-7", "lastSequence": 9, "status": "running"},
        "events": [
            envelope("stack_progress", 2, "seen"),  # seen in this run
            envelope("stack_progress", 1, None),  # no eventId, below the cursor
            envelope("stack_progress", 1, "gap-filler"),  # unseen eventId below the cursor: applied
            envelope("text_delta", 5, "e5", data={"text": "caught up"}),
        ],
    }
    out = pipeline.recover(response)
    assert out[0]["type"] == "ACTIVITY_SNAPSHOT"
    assert out[0]["messageId"] == "pipeline:prun-7" and out[0]["activityType"] == "iac-code.pipeline.v1"
    assert out[0]["content"] == {"schemaVersion": 1, "pipelineRunId": "prun-7", "snapshot": response["snapshot"]}
    assert [e["value"]["eventId"] for e in out if e["type"] == "CUSTOM"] == ["gap-filler"]
    assert [e["messageId"] for e in out if e["type"] == "TEXT_MESSAGE_START"] == ["pipeline-message:prun-7:pipeline"]
    assert (pipeline.cursor, pipeline.sequence) == (9, 9)
    assert pipeline.recover(None) == [] and pipeline.recover({"snapshot": "x"}) == []


def test_parallel_candidates_tool_calls_hang_off_their_own_candidates_message() -> None:
    pipeline, _ = mapper()
    c0 = {"candidate": {"id": "c0", "runId": "crun-0"}, "scope": "candidate_step"}
    c1 = {"candidate": {"id": "c1", "runId": "crun-1"}, "scope": "candidate_step"}
    out = live(
        pipeline,
        envelope("text_delta", 1, "e1", data={"text": "zero"}, **c0),
        envelope("text_delta", 2, "e2", data={"text": "one"}, **c1),
        envelope("tool_started", 3, "e3", data={"toolUseId": "t0", "toolName": "write_file"}, **c0),
        envelope("tool_started", 4, "e4", data={"toolUseId": "t1", "toolName": "write_file"}, **c1),
    )
    messages = {e["delta"]: e["messageId"] for e in out if e["type"] == "TEXT_MESSAGE_CONTENT"}
    parents = {e["toolCallId"]: e["parentMessageId"] for e in out if e["type"] == "TOOL_CALL_START"}
    assert parents == {"t0": messages["zero"], "t1": messages["one"]}


def test_every_demo_pipeline_tool_call_names_the_message_of_the_candidate_that_called_it() -> None:
    events = project(THREAD, "run-1", demo_pipeline_payloads())
    text: dict[str, str] = {}
    for event in events:
        if event.get("type") == "TEXT_MESSAGE_CONTENT":
            text[event["messageId"]] = text.get(event["messageId"], "") + event["delta"]
    writes = [e for e in events if e.get("type") == "TOOL_CALL_START" and e["toolCallId"].endswith("_write")]
    assert len(writes) == len(sc.PIPELINE_CANDIDATES) > 1
    for candidate in sc.PIPELINE_CANDIDATES:
        (start,) = [
            e for e in writes if e["toolCallId"] == f"call_{sc.candidate_id(candidate['candidate_index'])}_write"
        ]
        assert text[start["parentMessageId"]].startswith(f"Drafting {candidate['name']}: ")


def spans(out: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, id) of every span boundary: message ids, or step names."""
    kept = {"TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "REASONING_START", "REASONING_END"}
    kept |= {"STEP_STARTED", "STEP_FINISHED"}
    return [(e["type"], e.get("messageId") or e["stepName"]) for e in out if e["type"] in kept]


C0 = {"candidate": {"id": "c0", "runId": "crun-0"}, "candidateStep": {"id": "tpl", "runId": "crun-0-tpl-1"}}
C1 = {"candidate": {"id": "c1", "runId": "crun-1"}, "candidateStep": {"id": "tpl", "runId": "crun-1-tpl-1"}}
C0_TEXT = "pipeline-message:pipeline-thread-1:candidate_step:crun-0:crun-0-tpl-1"
C1_TEXT = "pipeline-message:pipeline-thread-1:candidate_step:crun-1:crun-1-tpl-1"
C0_IN_CANDIDATES = {**C0, "step": {"id": "candidates"}}
C0_IN_CANDIDATES_TEXT = "pipeline-message:pipeline-thread-1:candidate_step:crun-0:crun-0-tpl-1:candidates"
REQUIREMENTS = {"step": {"id": "requirements", "runId": "step-requirements-1"}}
REQUIREMENTS_TEXT = "pipeline-message:pipeline-thread-1:step:step-requirements-1"


@pytest.mark.parametrize(
    ("envelopes", "expected"),
    [
        pytest.param(
            [
                envelope("step_started", 1, "e1", scope="step", **REQUIREMENTS),
                envelope("text_delta", 2, "e2", scope="step", data={"text": "needs"}, **REQUIREMENTS),
                envelope("step_completed", 3, "e3", scope="step", **REQUIREMENTS),
            ],
            [
                ("STEP_STARTED", "requirements"),
                ("TEXT_MESSAGE_START", REQUIREMENTS_TEXT),
                ("TEXT_MESSAGE_END", REQUIREMENTS_TEXT),
                ("STEP_FINISHED", "requirements"),
            ],
            id="a step's text ends just before its STEP_FINISHED",
        ),
        pytest.param(
            [
                envelope("candidate_step_started", 1, "e1", scope="candidate_step", **C0),
                envelope("candidate_step_started", 2, "e2", scope="candidate_step", **C1),
                envelope("text_delta", 3, "e3", scope="candidate_step", data={"text": "zero"}, **C0),
                envelope("text_delta", 4, "e4", scope="candidate_step", data={"text": "one"}, **C1),
                envelope("thinking_delta", 5, "e5", scope="candidate_step", data={"text": "hmm"}, **C0),
                envelope("candidate_step_completed", 6, "e6", scope="candidate_step", **C0),
            ],
            [
                ("STEP_STARTED", "candidate:c0:tpl"),
                ("STEP_STARTED", "candidate:c1:tpl"),
                ("TEXT_MESSAGE_START", C0_TEXT),
                ("TEXT_MESSAGE_START", C1_TEXT),
                ("REASONING_START", "reasoning-" + C0_TEXT),
                ("REASONING_END", "reasoning-" + C0_TEXT),
                ("TEXT_MESSAGE_END", C0_TEXT),
                ("STEP_FINISHED", "candidate:c0:tpl"),
            ],
            id="a candidate step ends its reasoning then its text, and leaves the parallel candidate open",
        ),
        pytest.param(
            [
                envelope("step_started", 1, "e1", scope="step", step={"id": "candidates"}),
                envelope(
                    "text_delta",
                    2,
                    "e2",
                    scope="candidate",
                    data={"text": "c0"},
                    candidate={"id": "c0"},
                    step={"id": "candidates"},
                ),
                envelope("step_completed", 3, "e3", scope="step", step={"id": "candidates"}),
            ],
            [
                ("STEP_STARTED", "candidates"),
                ("TEXT_MESSAGE_START", "pipeline-message:pipeline-thread-1:candidate:c0:candidates"),
                ("TEXT_MESSAGE_END", "pipeline-message:pipeline-thread-1:candidate:c0:candidates"),
                ("STEP_FINISHED", "candidates"),
            ],
            id="a parent step's end ends the candidate messages inside it",
        ),
        pytest.param(
            [
                envelope("step_started", 1, "e1", scope="step", **REQUIREMENTS),
                envelope("text_delta", 2, "e2", scope="step", data={"text": "needs"}, **REQUIREMENTS),
                envelope("step_completed", 3, "e3", scope="step", **REQUIREMENTS),
                # The kernel attributes text between steps to the last step started.
                envelope("text_delta", 4, "e4", scope="step", data={"text": "more"}, **REQUIREMENTS),
            ],
            [
                ("STEP_STARTED", "requirements"),
                ("TEXT_MESSAGE_START", REQUIREMENTS_TEXT),
                ("TEXT_MESSAGE_END", REQUIREMENTS_TEXT),
                ("STEP_FINISHED", "requirements"),
                ("TEXT_MESSAGE_START", REQUIREMENTS_TEXT),
            ],
            id="text for a step after its end reopens the same message",
        ),
        pytest.param(
            [
                envelope("text_delta", 1, "e1", scope="pipeline", data={"text": "planning"}),
                envelope("step_started", 2, "e2", scope="step", **REQUIREMENTS),
                envelope("text_delta", 3, "e3", scope="step", data={"text": "needs"}, **REQUIREMENTS),
                envelope("step_completed", 4, "e4", scope="step", **REQUIREMENTS),
                envelope("text_delta", 5, "e5", scope="step", data={"text": "more"}, **REQUIREMENTS),
                envelope("step_started", 6, "e6", scope="step", step={"id": "candidates"}),
            ],
            [
                ("TEXT_MESSAGE_START", "pipeline-message:pipeline-thread-1:pipeline"),
                ("TEXT_MESSAGE_END", "pipeline-message:pipeline-thread-1:pipeline"),
                ("STEP_STARTED", "requirements"),
                ("TEXT_MESSAGE_START", REQUIREMENTS_TEXT),
                ("TEXT_MESSAGE_END", REQUIREMENTS_TEXT),
                ("STEP_FINISHED", "requirements"),
                ("TEXT_MESSAGE_START", REQUIREMENTS_TEXT),
                ("TEXT_MESSAGE_END", REQUIREMENTS_TEXT),
                ("STEP_STARTED", "candidates"),
            ],
            id="a parent step's start ends the Pipeline-level text and an earlier step's reopened text",
        ),
        pytest.param(
            [
                envelope("step_started", 1, "e1", scope="step", step={"id": "candidates"}),
                envelope("text_delta", 2, "e2", scope="candidate_step", data={"text": "zero"}, **C0_IN_CANDIDATES),
                envelope("candidate_step_started", 3, "e3", scope="candidate_step", **C1),
            ],
            [
                ("STEP_STARTED", "candidates"),
                ("TEXT_MESSAGE_START", C0_IN_CANDIDATES_TEXT),
                ("STEP_STARTED", "candidate:c1:tpl"),
            ],
            id="a candidate step's start leaves the parallel candidates open",
        ),
    ],
)
def test_a_steps_messages_end_with_the_step(envelopes: list[dict[str, Any]], expected: list[tuple[str, str]]) -> None:
    pipeline, _ = mapper()
    assert spans(live(pipeline, *envelopes)) == expected


def test_every_demo_pipeline_message_ends_in_the_order_it_started() -> None:
    """A client's replay puts each message where it ended: ending in start order keeps the live order."""
    events = project(THREAD, "run-1", demo_pipeline_payloads())
    started = [e["messageId"] for e in events if e.get("type") == "TEXT_MESSAGE_START"]
    ended = [e["messageId"] for e in events if e.get("type") == "TEXT_MESSAGE_END"]
    assert len(started) > len(sc.PIPELINE_CANDIDATES) and started == ended


def test_a_projectors_envelope_mapper_is_given_at_construction_and_cannot_be_replaced() -> None:
    pipeline, projector = mapper()
    assert projector.envelope_mapper == pipeline.live
    assert RunProjector(THREAD, "run-2").envelope_mapper is None  # no mapper: envelopes show nothing
    attribute = "envelope_mapper"  # set by name: a type checker refuses the assignment itself
    with pytest.raises(AttributeError):
        setattr(projector, attribute, None)
    assert projector.envelope_mapper == pipeline.live
