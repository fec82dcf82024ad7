"""Ids the bridge emits are ids it accepts back (docs/design.md#emitted-ids).

The property: whatever the lengths of threadId, runId and the kernel's ids, every id in every event the
projection emits is bounded, printable and free of `/`, a client's history built from those events passes
the input validation, and the same source ids always give the same emitted ids.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agui_bridge import limits
from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.a2a.sse_parser import SseParser
from agui_bridge.demo import scenarios as sc
from agui_bridge.demo.pipeline import PipelineRun
from agui_bridge.projection.interrupts import build_interrupt, collect_inputs
from agui_bridge.projection.pipeline import PipelineMapper
from agui_bridge.projection.projector import RunProjector
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.wire.ids import MAX_EMITTED_ID_CHARS, emitted_id
from tests.golden import transcript_bytes
from tests.unit.test_demo_pipeline import drive

TRANSCRIPTS = (
    "iac-a-text.sse",
    "iac-b-tool-permission.sse",
    "iac-c-resume-allow.sse",
    "iac-e2-thinking-exposed.sse",
    "iac-x-llm-unreachable.sse",
)
#: Keys whose string values are kernel ids (A2A bodies, iac_code metadata, Pipeline envelopes).
KERNEL_ID_KEYS = frozenset(
    {"messageId", "toolUseId", "inputId", "taskId", "contextId", "pipelineRunId", "subPipelineId", "runId", "id"}
)
#: Members of emitted events (and interrupts) that hold ids a client may send back.
EMITTED_ID_MEMBERS = ("messageId", "toolCallId", "parentMessageId", "stepName")


def test_a_short_printable_id_is_kept() -> None:
    for source in ("m-1", "tool-1", "input-" + "a" * 100, "a" * MAX_EMITTED_ID_CHARS, "名前 with spaces"):
        assert emitted_id(source) == source


def test_a_long_id_becomes_a_bounded_digest_that_keeps_a_readable_prefix() -> None:
    long = "reasoning-pipeline-message:pipeline-" + "t" * 200
    derived = emitted_id(long)
    assert len(derived) <= MAX_EMITTED_ID_CHARS < limits.MAX_ID_CHARS
    assert derived.startswith("reasoning-pipeline-message:") and "~" in derived
    assert emitted_id(long) == derived  # deterministic: no salt, no state
    assert emitted_id(long + "x") != derived
    assert emitted_id(derived) == derived  # wrapping an emitted id again changes nothing


def test_slashes_control_characters_and_lone_surrogates_are_never_emitted() -> None:
    for source in ("a/b", "line\nbreak", "nul\x00", "del\x7f", "lone\ud800", "sep\u2028", ""):
        derived = emitted_id(source)
        assert derived != source
        assert "/" not in derived and derived.isprintable() and derived.encode("utf-8")
        assert emitted_id(derived) == derived


# ---- the property over the golden transcripts and the demo Pipeline ---------------------------


def lengthen(value: object, length: int, seen: dict[str, str]) -> object:
    """Every kernel id replaced by a distinct one of about `length` characters (with a `/`), consistently."""
    if isinstance(value, dict):
        return {
            k: (_long_id(v, length, seen) if k in KERNEL_ID_KEYS and isinstance(v, str) else lengthen(v, length, seen))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [lengthen(v, length, seen) for v in value]
    return value


def _long_id(original: str, length: int, seen: dict[str, str]) -> str:
    if original not in seen:
        seen[original] = f"{original}/{'k' * max(0, length - len(original) - 1)}"
    return seen[original]


def transcript_payloads(name: str) -> list[dict[str, Any]]:
    parser = SseParser()
    messages = parser.feed(transcript_bytes(name)) + parser.close()
    return [json.loads(m.data) for m in messages if m.event != "error"]


def kernel_input(request: sc.InputRequest, index: int) -> dict[str, Any]:
    """The kernel's input projection of a demo request (the parts the bridge reads)."""
    value: dict[str, Any] = {"kind": request.kind, "inputId": f"input-{index}", "required": True}
    value.update({"title": request.title, "prompt": request.prompt, "options": list(request.options)})
    if request.tool_use_id is not None:
        value["toolUseId"] = request.tool_use_id
    return {**value, **request.fields}


def demo_pipeline_payloads() -> list[dict[str, Any]]:
    """The demo's whole Pipeline (both waits answered) as A2A status updates, then a recovery."""
    run = PipelineRun("task-1", "ctx-1", "session-1")
    payloads: list[dict[str, Any]] = []
    for index, step in enumerate(drive("pipeline", [("0",), (sc.ALLOW_ONCE,)])):
        iac: dict[str, Any] = {}
        match step:
            case sc.PipelineEvent():
                iac["pipeline"] = run.envelope(step)
            case sc.PipelineBatch(events=events):
                iac["pipelineBatch"] = {"events": [run.envelope(event) for event in events]}
            case sc.Ask(requests=requests, pipeline=template):
                iac["input"] = kernel_input(requests[0], index)
                if template is not None:
                    iac["pipeline"] = run.envelope(template)
            case sc.WaitSideband(request=request, event=template):
                iac["pendingPermissions"] = [kernel_input(request, index)]
                iac["pipeline"] = run.envelope(template)
            case _:
                continue
        status = {"taskId": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_WORKING"}}
        payloads.append({"result": {"statusUpdate": {**status, "metadata": {"iac_code": iac}}}})
    recovery = {"snapshot": {"pipelineRunId": run.run_id, "lastSequence": run.sequence}, "events": run.events[-3:]}
    payloads.append({"recovery": recovery})
    return payloads


SOURCES: dict[str, list[dict[str, Any]]] = {name: transcript_payloads(name) for name in TRANSCRIPTS}
SOURCES["demo-pipeline"] = demo_pipeline_payloads()


def project(thread_id: str, run_id: str, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every AG-UI event and interrupt the projection makes of `payloads`."""
    projector = RunProjector(thread_id, run_id)
    pipeline = PipelineMapper(projector, thread_id, [], 0)
    projector.envelope_mapper = pipeline.live
    out: list[dict[str, Any]] = []
    for payload in payloads:
        if "recovery" in payload:
            out.extend(pipeline.recover(payload["recovery"]))
            continue
        event: A2AEvent = unwrap(payload)
        out.extend(projector.project(event))
        out.extend(build_interrupt(r.value, "2030-01-01T00:00:00.000Z") for r in collect_inputs(event.iac))
    out.extend(projector.close_all())
    return out


def emitted_ids(events: list[dict[str, Any]]) -> list[str]:
    ids = [e[m] for e in events for m in EMITTED_ID_MEMBERS if isinstance(e.get(m), str)]
    ids += [e["id"] for e in events if "reason" in e]  # interrupts
    return ids


def history(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The message history a client's reducer builds from the events, as it sends it back."""
    messages: list[dict[str, Any]] = [{"id": "user-1", "role": "user", "content": "hi"}]
    for event in events:
        kind = event.get("type")
        if kind == "TEXT_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "assistant", "content": "text"})
        elif kind == "REASONING_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "reasoning", "content": "thought"})
        elif kind == "TOOL_CALL_START":
            call = {"id": event["toolCallId"], "type": "function", "function": {"name": "t", "arguments": "{}"}}
            parent = event.get("parentMessageId", event["toolCallId"])
            messages.append({"id": parent, "role": "assistant", "toolCalls": [call]})
        elif kind == "TOOL_CALL_RESULT":
            messages.append(
                {"id": event["messageId"], "role": "tool", "toolCallId": event["toolCallId"], "content": "ok"}
            )
        elif kind == "ACTIVITY_SNAPSHOT":
            messages.append(
                {"id": event["messageId"], "role": "activity", "activityType": "a", "content": event["content"]}
            )
    return messages


def resume_body(thread_id: str, run_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    answers = [{"interruptId": e["id"], "status": "cancelled"} for e in events if "reason" in e]
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": history(events),
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": "/tmp"}},
        **({"resume": answers} if answers else {}),
    }


@settings(max_examples=25, deadline=None)
@given(
    source=st.sampled_from(sorted(SOURCES)),
    thread_chars=st.integers(1, limits.MAX_ID_CHARS),
    run_chars=st.integers(1, limits.MAX_ID_CHARS),
    kernel_chars=st.integers(1, 1000),
)
@example(source="demo-pipeline", thread_chars=200, run_chars=200, kernel_chars=1000)
@example(source="iac-e2-thinking-exposed.sse", thread_chars=200, run_chars=200, kernel_chars=300)
@example(source="iac-b-tool-permission.sse", thread_chars=200, run_chars=200, kernel_chars=199)
def test_every_emitted_id_fits_the_input_rules_and_is_stable(
    source: str, thread_chars: int, run_chars: int, kernel_chars: int
) -> None:
    thread_id, run_id = "t" * thread_chars, "r" * run_chars
    payloads = lengthen(copy.deepcopy(SOURCES[source]), kernel_chars, {})
    assert isinstance(payloads, list)
    events = project(thread_id, run_id, payloads)
    ids = emitted_ids(events)
    assert ids, "the source emits ids"
    for value in ids:
        assert 0 < len(value) <= MAX_EMITTED_ID_CHARS, value
        assert value.isprintable() and "/" not in value, value
    parse_run_input(resume_body(thread_id, run_id, events))  # the client's history and answers are accepted
    again = project(thread_id, run_id, lengthen(copy.deepcopy(SOURCES[source]), kernel_chars, {}))
    stable = [i for i in emitted_ids(again) if not i.startswith(("assistant-", "tool-", "input-"))]
    assert stable == [i for i in ids if not i.startswith(("assistant-", "tool-", "input-"))]
