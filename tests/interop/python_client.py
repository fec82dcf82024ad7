"""A Python AG-UI client built on the ``ag-ui-protocol`` 1.0 models, as a Python app would write one.

The request is a ``RunAgentInput`` serialised with ``by_alias=True, exclude_none=True`` (unset
``tools``/``context``/``state`` are left out); every SSE record is parsed by the models' event
adapter, with Python warnings as errors; the history grows from the events the way @ag-ui/client's
reducer grows it (text, tool calls and their results, reasoning) and goes back on every run; a
resume answers each interrupt from its ``responseSchema``. What the models read is compared with the
wire: a member outside an event's schema, or one the models drop, is reported as a problem.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from ag_ui.core import PROTOCOL_VERSION, Event, ResumeEntry, RunAgentInput
from pydantic import BaseModel, TypeAdapter

from agui_bridge.protocol.sse_parser import iter_messages

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)
MAX_RUNS = 6


@dataclass
class Run:
    events: list[Any] = field(default_factory=list)  # the parsed models
    problems: list[str] = field(default_factory=list)
    status: int = 0
    reattached: int = 0

    @property
    def terminal(self) -> Any:
        return self.events[-1] if self.events else None

    @property
    def outcome(self) -> str:
        """As the scenario table names it: success, interrupt, cancelled or error:<code>."""
        last = self.terminal
        if last is None:
            return f"http:{self.status}"
        if last.type == "RUN_ERROR":
            return f"error:{last.code}"
        return str(last.outcome.type) if last.outcome is not None else "success"


def answer_from_schema(schema: dict[str, Any], prefer: dict[str, Any]) -> dict[str, Any]:
    """The answer a generic client builds from a ``responseSchema`` (the same rule as drive.mjs)."""
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches:
        fitting = [
            b
            for b in branches
            if all(
                name not in prefer or "const" not in sub or sub["const"] == prefer[name]
                for name, sub in b.get("properties", {}).items()
            )
        ]
        return answer_from_schema((fitting or branches)[0], prefer)
    answer: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for name in schema.get("required", list(properties)):
        sub = properties.get(name, {})
        if "const" in sub:
            answer[name] = sub["const"]
        elif "enum" in sub:
            answer[name] = prefer[name] if prefer.get(name) in sub["enum"] else sub["enum"][0]
        else:
            answer[name] = prefer.get(name, "medium")
    return answer


def extra_members(model: Any, path: str = "") -> list[str]:
    """Members the models keep only as extras: outside the event's schema."""
    if isinstance(model, BaseModel):
        found = [f"{path}/{name}" for name in (model.model_extra or {})]
        for name in type(model).model_fields:
            found += extra_members(getattr(model, name), f"{path}/{name}")
        return found
    if isinstance(model, list):
        return [p for i, item in enumerate(model) for p in extra_members(item, f"{path}/{i}")]
    return []


def sse_records(response: requests.Response) -> Iterator[bytes]:
    """The data of each SSE record, as it arrives (the repository's one SSE reader does the framing)."""
    for message in iter_messages(response.iter_content(chunk_size=None)):
        yield message.data


class History:
    """The conversation as @ag-ui/client's default reducer builds it, as camelCase message dicts."""

    def __init__(self, text: str) -> None:
        self.messages: list[dict[str, Any]] = [{"id": f"message-{uuid.uuid4()}", "role": "user", "content": text}]

    def _find(self, message_id: str) -> dict[str, Any] | None:
        return next((m for m in self.messages if m["id"] == message_id), None)

    def _assistant(self, message_id: str) -> dict[str, Any]:
        message = self._find(message_id)
        if message is None:
            message = {"id": message_id, "role": "assistant"}
            self.messages.append(message)
        return message

    def apply(self, event: Any) -> None:
        kind = event.type
        if kind == "TEXT_MESSAGE_START":
            self._assistant(event.message_id).setdefault("content", "")
        elif kind == "TEXT_MESSAGE_CONTENT":
            message = self._assistant(event.message_id)
            message["content"] = message.get("content", "") + event.delta
        elif kind == "TOOL_CALL_START":
            owner = self._assistant(event.parent_message_id or event.tool_call_id)
            call = {
                "id": event.tool_call_id,
                "type": "function",
                "function": {"name": event.tool_call_name, "arguments": ""},
            }
            owner.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_ARGS":
            for message in self.messages:
                for call in message.get("toolCalls", []):
                    if call["id"] == event.tool_call_id:
                        call["function"]["arguments"] += event.delta
        elif kind == "TOOL_CALL_RESULT":
            content = event.content if isinstance(event.content, str) else json.dumps(event.content)
            self.messages.append(
                {"id": event.message_id, "role": "tool", "toolCallId": event.tool_call_id, "content": content}
            )
        elif kind == "REASONING_MESSAGE_START":
            if self._find(event.message_id) is None:
                self.messages.append({"id": event.message_id, "role": "reasoning", "content": ""})
        elif kind == "REASONING_MESSAGE_CONTENT":
            reasoning = self._find(event.message_id)
            if reasoning is not None:
                reasoning["content"] += event.delta


def cancel(url: str, token: str, thread_id: str, session: dict[str, Any]) -> int:
    route = f"{url}extensions/iac-code/v1/executions/{session['executionId']}/cancel"
    body = {"threadId": thread_id, "rosInvocationId": session["rosInvocationId"]}
    return requests.post(route, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code


def ended(run: Run) -> bool:
    return run.terminal is not None and run.terminal.type in ("RUN_FINISHED", "RUN_ERROR")


def read_events(response: requests.Response, run: Run, history: History, on_event: Any) -> None:
    """Parse and apply the events of one response until the run's terminal event or a dropped stream."""
    try:
        for data in sse_records(response):
            raw = json.loads(data)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a model that warns about an event raises: never silently accepted
                event = EVENTS.validate_json(data)
                seen = event.model_dump(mode="json", by_alias=True, exclude_none=True)
            if seen != raw:
                run.problems.append(f"{raw.get('type')}: the models read {seen}, the wire carried {raw}")
            run.problems += [f"{raw.get('type')}: {path} is outside the schema" for path in extra_members(event)]
            run.events.append(event)
            history.apply(event)
            on_event(event)
            if ended(run):
                return
    except requests.RequestException:
        return  # a dropped connection: the caller reattaches


def one_run(url: str, token: str, request: RunAgentInput, history: History, *, cancel_it: bool) -> Run:
    """POST the run; if its stream drops before the terminal event, reattach (docs/design.md#reattach)
    with ``Last-Event-ID`` (the bridge numbers a run's events by position) and read on."""
    run = Run()
    body = request.model_dump_json(by_alias=True, exclude_none=True)
    auth = {"Authorization": f"Bearer {token}"}
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **auth}
    assert request.forwarded_props is not None, "every scenario sends forwardedProps.iacCode"
    ros: str = request.forwarded_props["iacCode"]["rosInvocationId"]

    def on_event(event: Any) -> None:
        if cancel_it and event.type == "CUSTOM" and event.name == "iac-code.session.v1":
            cancel(url, token, request.thread_id, event.value)

    with requests.post(url, data=body, headers=headers, stream=True, timeout=(5, 60)) as response:
        run.status = response.status_code
        if response.status_code != 200:
            run.problems.append(f"HTTP {response.status_code}: {response.text[:300]}")
            return run
        read_events(response, run, history, on_event)
    route = f"{url}extensions/iac-code/v1/threads/{request.thread_id}/runs/{request.run_id}/events"
    for _ in range(3):
        if ended(run) or not run.events:
            break
        run.reattached += 1
        cursor = {"Last-Event-ID": str(len(run.events)), "Ros-Invocation-Id": ros, "Accept": "text/event-stream"}
        with requests.get(route, params={"rosInvocationId": ros}, headers={**auth, **cursor}, stream=True,
                          timeout=(5, 60)) as response:  # fmt: skip
            if response.status_code != 200:
                run.problems.append(f"reattach: HTTP {response.status_code}: {response.text[:300]}")
                break
            read_events(response, run, history, on_event)
    if not ended(run):
        run.problems.append("the stream ended without a terminal event")
    return run


def long_id(prefix: str, long: bool) -> str:
    """An id of the input cap's length (200 characters) when asked, else a UUID."""
    value = f"{prefix}-{uuid.uuid4()}"
    return (value + "-" + "x" * 200)[:200] if long else value


def play(url: str, token: str, cwd: Path, text: str, iac_code: dict[str, Any], prefer: dict[str, Any], *,
         cancel_it: bool = False, long_ids: bool = False) -> list[Run]:  # fmt: skip
    """The first run, then one resume per interrupt outcome, on one thread with a growing history."""
    thread_id = long_id("thread", long_ids)
    history = History(text)
    props = {"iacCode": {"schemaVersion": 1, "rosInvocationId": f"py-{uuid.uuid4()}", "cwd": str(cwd), **iac_code}}
    runs: list[Run] = []
    resume: list[ResumeEntry] | None = None
    for _ in range(MAX_RUNS):
        request = RunAgentInput.model_validate(
            {
                "threadId": thread_id,
                "runId": long_id("run", long_ids),
                "messages": history.messages,
                "forwardedProps": props,
            }
        )
        request.protocol_version = PROTOCOL_VERSION
        request.resume = resume
        run = one_run(url, token, request, history, cancel_it=cancel_it)
        runs.append(run)
        if run.outcome != "interrupt":
            break
        resume = [
            ResumeEntry(
                interrupt_id=i.id, status="resolved", payload=answer_from_schema(i.response_schema or {}, prefer)
            )
            for i in run.terminal.outcome.interrupts
        ]
    return runs
