"""The demo agent's Pipeline scenario as a pure script, and the per-task envelope bookkeeping."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agui_bridge.demo import scenarios as sc
from agui_bridge.demo.executor import PIPELINE_EXTENSION_URI, PipelineRun
from tests.support.emitted_streams import drive


def envelopes(steps: list[sc.Step]) -> list[sc.PipelineEvent]:
    """Every Pipeline event of a script, batches flattened, ``Ask``/``WaitSideband`` templates included."""
    out: list[sc.PipelineEvent] = []
    for step in steps:
        match step:
            case sc.PipelineEvent():
                out.append(step)
            case sc.PipelineBatch(events=events):
                out.extend(events)
            case sc.Ask(pipeline=template) if template is not None:
                out.append(template)
            case sc.WaitSideband(event=template):
                out.append(template)
    return out


def types(steps: list[sc.Step]) -> list[str]:
    return [e.event_type for e in envelopes(steps)]


@pytest.mark.parametrize(
    ("text", "run_mode", "expected"),
    [
        ("run the pipeline", None, "pipeline"),
        ("PIPELINE please", None, "pipeline"),
        ("pipeline [FAIL_DEPLOY]", None, "pipeline"),  # before `fail`
        ("this will fail", "pipeline", "pipeline"),  # run_mode wins over every keyword
        ("say hi", "pipeline", "pipeline"),
        ("say hi", "normal", "plain"),
        ("choose a pipeline", "normal", "pipeline"),
        ("[LONG 3] pipeline", None, "long"),
        ("say hi", None, "plain"),
    ],
)
def test_pipeline_selection(text: str, run_mode: str | None, expected: str) -> None:
    assert sc.select_scenario(text, run_mode).name == expected


def test_pipeline_is_an_interrupt_scenario() -> None:
    assert "pipeline" in sc.INTERRUPT_SCENARIOS


def test_script_run_mode_parameter() -> None:
    first = next(sc.script_for("hello", run_mode="pipeline"))
    assert first == sc.PipelineEvent(
        "pipeline_started", "pipeline", {"steps": list(sc.PIPELINE_STEPS), "request": "hello"}
    )


def test_first_turn_runs_requirements_then_parallel_candidates_then_asks() -> None:
    script = sc.script_for("pipeline")
    steps: list[sc.Step] = []
    for step in script:
        steps.append(step)
        if isinstance(step, sc.Ask):
            break
    kinds = types(steps)
    assert kinds[:2] == ["pipeline_started", "step_started"]
    requirements = kinds[: kinds.index("step_completed") + 1]
    assert requirements.count("text_delta") == 4
    assert "usage" in requirements
    assert kinds[len(requirements)] == "step_started"
    assert kinds.count("candidate_started") == kinds.count("candidate_completed") == 2
    assert kinds.count("candidate_step_started") == kinds.count("candidate_step_completed") == 2
    for kind in ("thinking_delta", "tool_started", "tool_result"):
        assert kinds.count(kind) == 2
    assert kinds[-1] == "input_required"
    # Both kinds of delivery are used: batches and single envelopes.
    assert any(isinstance(s, sc.PipelineBatch) for s in steps)
    assert any(isinstance(s, sc.PipelineEvent) for s in steps)
    ask = steps[-1]
    assert isinstance(ask, sc.Ask)
    (request,) = ask.requests
    assert request.kind == sc.CANDIDATE_SELECTION
    assert request.fields["allowFreeText"] is False
    assert [o["candidate_index"] for o in request.options] == [0, 1]
    assert all({"candidate_index", "name", "summary"} <= set(o) for o in request.options)
    assert ask.pipeline is not None
    assert ask.pipeline.step == sc.pipeline_step("candidates")


def test_candidates_run_in_parallel() -> None:
    steps = drive("pipeline", [("0",), (sc.ALLOW_ONCE,)])
    candidate_events = [e for e in envelopes(steps) if e.candidate_step == sc.CANDIDATE_STEP]
    order = [e.candidate for e in candidate_events]
    # Interleaved: candidate-0 and candidate-1 alternate instead of running one after the other.
    first_done = order.index("candidate-1")
    assert first_done == 1
    assert order.count("candidate-0") == order.count("candidate-1")
    for event in candidate_events:
        assert event.scope == "candidate_step"
        assert event.step == sc.pipeline_step("candidates")
    text = [e for e in candidate_events if e.event_type == "text_delta"]
    assert {e.candidate for e in text} == {"candidate-0", "candidate-1"}
    tools = {e.candidate: e.data for e in candidate_events if e.event_type == "tool_started"}
    results = {e.candidate: e.data for e in candidate_events if e.event_type == "tool_result"}
    for cid, started in tools.items():
        assert set(started) == {"toolUseId", "toolName", "input"}
        assert results[cid]["toolUseId"] == started["toolUseId"]
        assert results[cid]["isError"] is False
    assert len({d["toolUseId"] for d in tools.values()}) == 2


def test_allow_path_deploys_with_a_sideband_permission() -> None:
    steps = drive("pipeline", [("web-ha-slb",), (sc.ALLOW_ONCE,)])
    (wait,) = [s for s in steps if isinstance(s, sc.WaitSideband)]
    request = wait.request
    assert request.kind == sc.PERMISSION
    assert request.fields["scope"] == "candidate"
    assert request.fields["subPipelineId"] == "candidate-1"
    assert request.tool_use_id == "call_candidate-1_deploy"
    assert [o["id"] for o in request.options] == [sc.ALLOW_ONCE, sc.DENY]
    assert wait.event.event_type == "permission_requested"
    assert wait.event.candidate == "candidate-1"
    assert wait.event.candidate_step == sc.DEPLOY_STEP
    kinds = types(steps)
    after = kinds[kinds.index("input_required") + 1 :]
    assert after[:4] == ["candidate_selected", "step_completed", "step_started", "candidate_step_started"]
    assert after[after.index("permission_requested") + 1 :] == [
        "stack_progress",
        "stack_progress",
        "candidate_step_completed",
        "step_completed",
        "pipeline_completed",
    ]
    selected = next(e for e in envelopes(steps) if e.event_type == "candidate_selected")
    assert selected.candidate == "candidate-1"
    assert selected.data["name"] == "web-ha-slb"
    tail = steps[-4:]
    assert [type(s).__name__ for s in tail] == ["Text", "Text", "Usage", "Final"]
    assert (
        "".join(s.delta for s in steps if isinstance(s, sc.Text)) == "Deployed web-ha-slb as stack selling-web-ha-slb."
    )


def test_deny_path_skips_the_deployment() -> None:
    steps = drive("pipeline", [("1",), (sc.DENY,)])
    kinds = types(steps)
    assert "stack_progress" in kinds
    assert kinds[-3:] == ["candidate_step_completed", "step_completed", "pipeline_completed"]
    assert "".join(s.delta for s in steps if isinstance(s, sc.Text)).startswith("Deployment skipped")
    assert isinstance(steps[-1], sc.Final)


def test_unknown_candidate_warns_and_uses_the_first() -> None:
    steps = drive("pipeline", [("the cheap one",), (sc.ALLOW_ONCE,)])
    events = envelopes(steps)
    warning = next(e for e in events if e.event_type == "pipeline_warning")
    assert "the cheap one" in warning.data["message"]
    assert next(e for e in events if e.event_type == "candidate_selected").candidate == "candidate-0"


def test_fail_deploy_variant_rolls_back_and_fails() -> None:
    steps = drive("pipeline [FAIL_DEPLOY]", [("0",)])
    assert not any(isinstance(s, sc.WaitSideband) for s in steps)
    kinds = types(steps)
    assert kinds[-5:] == [
        "candidate_step_failed",
        "step_failed",
        "rollback_triggered",
        "rollback_completed",
        "pipeline_error",
    ]
    assert isinstance(steps[-1], sc.Fail)
    assert "Stack creation failed" in steps[-1].message
    assert not any(isinstance(s, sc.Final) for s in steps)


def test_opened_steps_are_all_closed_on_every_path() -> None:
    for text, answers in (
        ("pipeline", [("0",), (sc.ALLOW_ONCE,)]),
        ("pipeline", [("1",), (sc.DENY,)]),
        ("pipeline [FAIL_DEPLOY]", [("1",)]),
    ):
        open_keys: set[tuple[str | None, str]] = set()
        for event in envelopes(drive(text, answers)):
            if event.event_type == "step_started":
                assert event.step is not None
                open_keys.add((None, event.step.id))
            elif event.event_type in ("step_completed", "step_failed"):
                assert event.step is not None
                open_keys.remove((None, event.step.id))
            elif event.event_type == "candidate_step_started":
                assert event.candidate_step is not None
                open_keys.add((event.candidate, event.candidate_step))
            elif event.event_type in ("candidate_step_completed", "candidate_step_failed"):
                assert event.candidate_step is not None
                open_keys.remove((event.candidate, event.candidate_step))
        assert open_keys == set(), text


def test_pipeline_usage_is_the_kernel_usage_object() -> None:
    usage = next(e for e in envelopes(drive("pipeline", [("0",), (sc.ALLOW_ONCE,)])) if e.event_type == "usage")
    assert set(usage.data) == {"inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "provider", "model"}
    assert usage.data["totalTokens"] == usage.data["inputTokens"] + usage.data["outputTokens"]
    assert sc.Usage().fields()["totalTokens"] == 110


@pytest.mark.parametrize(
    ("answer", "index"),
    [("0", 0), ("1", 1), (" web-ha-slb ", 1), ("web-single-ecs", 0), ("candidate-1", 1), ("2", None), ("x", None)],
)
def test_pipeline_candidate(answer: str, index: int | None) -> None:
    found = sc.pipeline_candidate(answer)
    assert (found["candidate_index"] if found else None) == index


@pytest.mark.parametrize(
    ("event_type", "status"),
    [
        ("pipeline_started", "running"),
        ("step_completed", "completed"),
        ("candidate_step_failed", "failed"),
        ("pipeline_error", "failed"),
        ("input_required", "waiting_input"),
        ("permission_requested", "waiting_permission"),
        ("candidate_selected", "completed"),
        ("rollback_triggered", "rolling_back"),
        ("text_delta", "running"),
    ],
)
def test_default_status(event_type: str, status: str) -> None:
    assert sc.default_status(event_type) == status


# ---- PipelineRun: numbering, coordinates, snapshot --------------------------------------------


def run_all(run: PipelineRun, steps: list[sc.Step]) -> list[dict[str, Any]]:
    return [run.envelope(event) for event in envelopes(steps)]


def test_envelopes_are_numbered_and_complete() -> None:
    run = PipelineRun("task-1", "ctx-1", "session-1")
    sent = run_all(run, drive("pipeline", [("1",), (sc.ALLOW_ONCE,)]))
    assert [e["sequence"] for e in sent] == list(range(1, len(sent) + 1))
    assert len({e["eventId"] for e in sent}) == len(sent)
    assert all(re.fullmatch(r"evt-[0-9a-f]{32}", e["eventId"]) for e in sent)
    assert {e["pipelineRunId"] for e in sent} == {run.run_id}
    assert run.run_id.startswith("prun-")
    for envelope in sent:
        assert envelope["schemaVersion"] == 1
        assert envelope["extensionUri"] == PIPELINE_EXTENSION_URI
        assert (envelope["taskId"], envelope["contextId"], envelope["iacCodeSessionId"]) == (
            "task-1",
            "ctx-1",
            "session-1",
        )
        assert envelope["pipelineName"] == "selling"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", envelope["createdAt"])
        assert envelope["scope"] in ("pipeline", "step", "candidate", "candidate_step")
        assert isinstance(envelope["data"], dict)
    started = next(e for e in sent if e["eventType"] == "step_started")
    assert started["step"] == {
        "id": "requirements",
        "runId": started["step"]["runId"],
        "attempt": 1,
        "index": 1,
        "total": 3,
    }
    # Every envelope of one step run carries the same step runId; candidate coordinates are stable.
    deploy = [e for e in sent if e.get("step", {}).get("id") == "deploy"]
    assert len({e["step"]["runId"] for e in deploy}) == 1
    cand = [e for e in sent if e.get("candidate", {}).get("id") == "candidate-1"]
    assert len({e["candidate"]["runId"] for e in cand}) == 1
    assert all(set(e["candidate"]) == {"id", "runId"} for e in cand)
    assert {e["candidateStep"]["id"] for e in cand if "candidateStep" in e} == {sc.CANDIDATE_STEP, sc.DEPLOY_STEP}


def test_state_is_every_envelope_after_the_cursor() -> None:
    run = PipelineRun("task-1", "ctx-1", "session-1")
    sent = run_all(run, drive("pipeline", [("0",), (sc.ALLOW_ONCE,)]))
    state = run.state(10)
    assert [e["eventId"] for e in state["events"]] == [e["eventId"] for e in sent[10:]]
    assert run.state(0)["events"] == sent
    assert run.state(len(sent))["events"] == []
    snapshot = state["snapshot"]
    assert snapshot["pipelineRunId"] == run.run_id
    assert snapshot["lastSequence"] == len(sent)
    assert snapshot["status"] == "completed"
    assert snapshot["pipelineName"] == "selling"
    assert snapshot["openSteps"] == []
    assert snapshot["selectedCandidate"] == "candidate-0"
    assert [s["status"] for s in snapshot["steps"]] == ["completed", "completed", "completed"]


def test_snapshot_while_waiting_lists_open_steps_in_bridge_key_order() -> None:
    run = PipelineRun("task-1", "ctx-1", "session-1")
    steps = drive("pipeline", [("1",), (sc.ALLOW_ONCE,)])
    events = envelopes(steps)
    stop = next(i for i, e in enumerate(events) if e.event_type == "permission_requested")
    for event in events[:stop]:
        run.envelope(event)
    run.envelope(events[stop], data={"inputId": "permission-1"})
    snapshot = run.snapshot()
    assert snapshot["status"] == "waiting_permission"
    assert snapshot["pendingInputs"] == ["permission-1"]
    assert [s["key"] for s in snapshot["openSteps"]] == ["candidate:candidate-1:stack_deploying", "step:deploy"]
    assert snapshot["currentStep"] == "deploy"


def test_a_restarted_step_gets_a_new_run_and_attempt() -> None:
    run = PipelineRun("t", "c", "s")
    step = sc.pipeline_step("deploy")
    first = run.envelope(sc.PipelineEvent("step_started", "step", step=step))
    run.envelope(sc.PipelineEvent("step_failed", "step", step=step))
    second = run.envelope(sc.PipelineEvent("step_started", "step", step=step))
    assert second["step"]["attempt"] == 2
    assert second["step"]["runId"] != first["step"]["runId"]
    assert [s["key"] for s in run.snapshot()["openSteps"]] == ["step:deploy"]


def test_envelope_extra_merges_data_and_adds_keys() -> None:
    run = PipelineRun("t", "c", "s")
    event = sc.PipelineEvent("input_required", "step", {"kind": "x"}, step=sc.pipeline_step("candidates"))
    envelope = run.envelope(event, data={"inputId": "selection-1"}, input={"inputId": "selection-1"})
    assert envelope["data"] == {"kind": "x", "inputId": "selection-1"}
    assert envelope["input"] == {"inputId": "selection-1"}
    assert envelope["status"] == "waiting_input"
    # The returned envelope is a copy: changing it does not change what the run keeps.
    envelope["data"]["kind"] = "changed"
    assert run.events[0]["data"]["kind"] == "x"
