"""AG-UI event builders: the only place where outgoing camelCase event dicts are made.

Every builder returns a plain dict with an integer `timestamp` (ms) and never a `None` value for an
optional field (docs/design.md#decision-balanced-spans-and-strict-framing): optional keys are simply left out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agui_bridge.protocol.ids import emitted_id

Event = dict[str, Any]

SESSION_EVENT = "iac-code.session.v1"
ARTIFACT_EVENT = "iac-code.artifact.v1"
TOOL_PROGRESS_EVENT = "iac-code.tool-progress.v1"
PIPELINE_EVENT = "iac-code.pipeline.v1"
#: The AG-UI protocol version the bridge speaks, declared on every RUN_STARTED (AG-UI 1.0 basic/versioning:
#: the version segment of the schema's $id, the value @ag-ui/core 1.0 calls PROTOCOL_VERSION).
PROTOCOL_VERSION = "1.0"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def run_started(thread_id: str, run_id: str, parent_run_id: str | None = None) -> Event:
    """Declares `protocolVersion`, which AG-UI 1.0 says an implementation MUST send on RUN_STARTED."""
    event: Event = {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "protocolVersion": PROTOCOL_VERSION}
    if parent_run_id is not None:
        event["parentRunId"] = parent_run_id
    event["timestamp"] = now_ms()
    return event


def run_finished(
    thread_id: str,
    run_id: str,
    outcome: Mapping[str, Any],
    usage: list[dict[str, Any]] | None = None,
) -> Event:
    event: Event = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "outcome": dict(outcome)}
    if usage:
        event["usage"] = usage
    event["timestamp"] = now_ms()
    return event


def run_error(code: str, message: str, usage: list[dict[str, Any]] | None = None) -> Event:
    """Only the members of AG-UI 1.0's RunErrorEvent, which has no threadId/runId (a 1.0 client strips them
    with a warning); RUN_STARTED and the request name the run (docs/design.md#terminal-event)."""
    event: Event = {"type": "RUN_ERROR", "message": message, "code": code}
    if usage:
        event["usage"] = usage
    event["timestamp"] = now_ms()
    return event


def text_start(message_id: str) -> Event:
    return {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant", "timestamp": now_ms()}


def text_content(message_id: str, delta: str) -> Event:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta, "timestamp": now_ms()}


def text_end(message_id: str) -> Event:
    return {"type": "TEXT_MESSAGE_END", "messageId": message_id, "timestamp": now_ms()}


def reasoning_start(message_id: str) -> Event:
    return {"type": "REASONING_START", "messageId": message_id, "timestamp": now_ms()}


def reasoning_message_start(message_id: str) -> Event:
    return {
        "type": "REASONING_MESSAGE_START",
        "messageId": message_id,
        "role": "reasoning",
        "timestamp": now_ms(),
    }


def reasoning_content(message_id: str, delta: str) -> Event:
    return {
        "type": "REASONING_MESSAGE_CONTENT",
        "messageId": message_id,
        "delta": delta,
        "timestamp": now_ms(),
    }


def reasoning_message_end(message_id: str) -> Event:
    return {"type": "REASONING_MESSAGE_END", "messageId": message_id, "timestamp": now_ms()}


def reasoning_end(message_id: str) -> Event:
    return {"type": "REASONING_END", "messageId": message_id, "timestamp": now_ms()}


def tool_start(tool_call_id: str, name: str, parent_message_id: str | None) -> Event:
    event: Event = {"type": "TOOL_CALL_START", "toolCallId": tool_call_id, "toolCallName": name}
    if parent_message_id is not None:
        event["parentMessageId"] = parent_message_id
    event["timestamp"] = now_ms()
    return event


def tool_args(tool_call_id: str, delta: str) -> Event:
    return {"type": "TOOL_CALL_ARGS", "toolCallId": tool_call_id, "delta": delta, "timestamp": now_ms()}


def tool_end(tool_call_id: str) -> Event:
    return {"type": "TOOL_CALL_END", "toolCallId": tool_call_id, "timestamp": now_ms()}


def tool_result(tool_call_id: str, content: str) -> Event:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": emitted_id(f"tool-result-{tool_call_id}"),
        "toolCallId": tool_call_id,
        "content": content,
        "role": "tool",
        "timestamp": now_ms(),
    }


def step_started(step_name: str) -> Event:
    return {"type": "STEP_STARTED", "stepName": step_name, "timestamp": now_ms()}


def step_finished(step_name: str) -> Event:
    return {"type": "STEP_FINISHED", "stepName": step_name, "timestamp": now_ms()}


def custom(name: str, value: Any) -> Event:
    return {"type": "CUSTOM", "name": name, "value": value, "timestamp": now_ms()}


def activity_snapshot(message_id: str, activity_type: str, content: Mapping[str, Any]) -> Event:
    return {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": message_id,
        "activityType": activity_type,
        "content": dict(content),
        "replace": True,
        "timestamp": now_ms(),
    }
