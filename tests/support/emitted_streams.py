"""A2A sources the projection is run over in tests, and what a client makes of the events it emits.

The golden transcripts (tests/fixtures/a2a-transcripts) and the demo's whole Pipeline as A2A payloads,
the projection of such payloads as one run, and the message history an AG-UI client's reducer builds
from the events (which it sends back on the next run).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.demo import scenarios as sc
from agui_bridge.demo.pipeline import PipelineRun
from agui_bridge.projection.interrupts import build_interrupt, collect_inputs
from agui_bridge.projection.pipeline import run_projection
from agui_bridge.protocol.sse_parser import SseParser
from tests.support.golden import transcript_bytes

#: Keys whose string values are kernel ids (A2A bodies, iac_code metadata, Pipeline envelopes).
KERNEL_ID_KEYS = frozenset(
    {"messageId", "toolUseId", "inputId", "taskId", "contextId", "pipelineRunId", "subPipelineId", "runId", "id"}
)


def drive(text: str, answers: Sequence[tuple[str, ...]]) -> list[sc.Step]:
    """Run a demo script, answering each ``Ask``/``WaitSideband`` with the next tuple of ``answers``."""
    answers = list(answers)
    script = sc.script_for(text)
    steps: list[sc.Step] = []
    outcome: object = None
    while True:
        try:
            step = script.send(outcome)
        except StopIteration:
            return steps
        steps.append(step)
        outcome = answers.pop(0) if isinstance(step, sc.Ask | sc.WaitSideband) else None


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


def project(thread_id: str, run_id: str, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every AG-UI event and interrupt the projection makes of `payloads`."""
    pipeline = run_projection(thread_id, run_id, set(), [], 0)
    projector = pipeline.projector
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


def history(events: list[dict[str, Any]], before: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The message history a client's reducer builds from the events (after `before`), as it sends it back."""
    messages: list[dict[str, Any]] = list(before or [{"id": "user-1", "role": "user", "content": "hi"}])
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
