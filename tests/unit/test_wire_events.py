"""Every standard event the builders make carries only members of its AG-UI 1.0 schema.

A 1.0 client strips any other member with an `[ag-ui][enforce]` warning (docs/design.md#terminal-event).
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from agui_bridge.protocol import events as ev

USAGE = [{"provider": "p", "model": "m", "inputTokens": 1, "outputTokens": 2, "totalTokens": 3}]
_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)

BUILT: list[dict[str, Any]] = [
    ev.run_started("thread-1", "run-1", "run-0"),
    ev.run_finished("thread-1", "run-1", {"type": "success"}, USAGE),
    ev.run_error("A2A_UNAVAILABLE", "The kernel is unavailable.", USAGE),
    ev.text_start("m-1"),
    ev.text_content("m-1", "hi"),
    ev.text_end("m-1"),
    ev.reasoning_start("r-1"),
    ev.reasoning_message_start("r-1"),
    ev.reasoning_content("r-1", "hmm"),
    ev.reasoning_message_end("r-1"),
    ev.reasoning_end("r-1"),
    ev.tool_start("tool-1", "write_file", "m-1"),
    ev.tool_args("tool-1", "{}"),
    ev.tool_end("tool-1"),
    ev.tool_result("tool-1", "ok"),
    ev.step_started("s"),
    ev.step_finished("s"),
    ev.custom(ev.PIPELINE_EVENT, {"schemaVersion": 1}),
    ev.activity_snapshot("pipeline:p", "iac-code.pipeline.v1", {"schemaVersion": 1}),
]


def _members(model: Any) -> set[str]:
    return {field.alias or name for name, field in type(model).model_fields.items()}


@pytest.mark.parametrize("event", BUILT, ids=[e["type"] for e in BUILT])
def test_a_built_event_has_no_member_outside_its_schema(event: dict[str, Any]) -> None:
    model = _EVENT_ADAPTER.validate_python(event)
    assert set(event) <= _members(model), set(event) - _members(model)


def test_run_error_names_no_thread_or_run() -> None:
    """RUN_STARTED and the request name the run; RunErrorEvent has no threadId/runId."""
    assert set(ev.run_error("CANCELLED", "Cancelled.")) == {"type", "message", "code", "timestamp"}


def test_run_started_declares_the_protocol_version_of_ag_ui_1_0() -> None:
    """AG-UI 1.0 (basic/versioning): an implementation MUST send its declaration on RUN_STARTED."""
    started = ev.run_started("thread-1", "run-1")
    assert started["protocolVersion"] == "1.0"
    assert _EVENT_ADAPTER.validate_python(started).protocol_version == "1.0"
