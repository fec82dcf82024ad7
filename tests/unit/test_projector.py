"""The projector against the real kernel's recordings and small tables of cases."""

from __future__ import annotations

from typing import Any

import pytest

from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.projection.projector import RunProjector, _digest
from tests.support.golden import transcript_events


def project_all(events: list[A2AEvent], run_id: str = "run-1", digests: set[str] | None = None) -> list[dict[str, Any]]:
    projector = RunProjector("thread-1", run_id, digests)
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(projector.project(event))
    out.extend(projector.close_all())
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def status(
    text: str | None = None, *, message_id: str = "t-message", state: str = "TASK_STATE_WORKING", **iac: Any
) -> A2AEvent:
    body: dict[str, Any] = {"taskId": "t", "contextId": "c", "status": {"state": state}}
    if text is not None:
        body["status"]["message"] = {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}]}
    if iac:
        body["metadata"] = {"iac_code": iac}
    return unwrap({"result": {"statusUpdate": body}})


def test_plain_text_transcript_streams_deltas_and_drops_the_final_echo() -> None:
    events = project_all(transcript_events("iac-a-text.sse"))
    assert types(events) == ["TEXT_MESSAGE_START"] + ["TEXT_MESSAGE_CONTENT"] * 3 + ["TEXT_MESSAGE_END"]
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Hello from the fake LLM."
    assert {e["messageId"] for e in events} == {"6f3c3a23-368d-41cd-8963-f9faaaac95a2-message"}


def test_usage_from_the_transcript_is_aggregated_as_integers() -> None:
    projector = RunProjector("thread-1", "run-1")
    for event in transcript_events("iac-a-text.sse"):
        projector.project(event)
    assert projector.usage_entries() == [
        {
            "provider": "openai",
            "model": "other",
            "inputTokens": 100,
            "outputTokens": 10,
            "totalTokens": 110,
            "cachedInputTokens": 0,
        }
    ]
    assert projector.last_state == "input-required"


def test_raw_thinking_becomes_reasoning_closed_before_text() -> None:
    events = project_all(transcript_events("iac-e2-thinking-exposed.sse"))
    assert types(events) == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert events[0]["messageId"] == "reasoning-run-1"
    assert events[1]["role"] == "reasoning"


def test_tool_transcript_projects_start_args_end_and_result() -> None:
    events = project_all(transcript_events("iac-b-tool-permission.sse") + transcript_events("iac-c-resume-allow.sse"))
    tool_events = [e for e in events if e["type"].startswith("TOOL_CALL")]
    assert [e["type"] for e in tool_events] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert tool_events[0]["toolCallName"] == "write_file"
    assert tool_events[3]["messageId"] == f"tool-result-{tool_events[0]['toolCallId']}"
    artifacts = [e for e in events if e["type"] == "CUSTOM" and e["name"] == "iac-code.artifact.v1"]
    assert len(artifacts) == 1
    assert artifacts[0]["value"]["schemaVersion"] == 1
    byte_size = artifacts[0]["value"].get("metadata", {}).get("byteSize")
    assert byte_size is None or isinstance(byte_size, int)  # protobuf floats are turned back into ints


def test_failed_turn_text_is_shown_and_state_recorded() -> None:
    projector = RunProjector("thread-1", "run-1")
    for event in transcript_events("iac-x-llm-unreachable.sse"):
        projector.project(event)
        if event.state == "failed":
            break
    assert projector.last_state == "failed"


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ({"status": "started", "toolUseId": "x", "name": "bash"}, ["TOOL_CALL_START"]),
        (
            {"status": "input_complete", "toolUseId": "x", "name": "bash", "toolInput": {"b": 1.0, "a": "é"}},
            ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"],
        ),
        ({"status": "completed", "toolUseId": "x", "result": {"ok": True}}, ["TOOL_CALL_RESULT"]),
        ({"status": "failed", "toolUseId": "x", "result": "boom"}, ["TOOL_CALL_RESULT"]),
        ({"status": "progress", "toolUseId": "x", "name": "bash", "mcpProgress": {"progress": 0.5}}, ["CUSTOM"]),
        ({"status": "input_delta", "toolUseId": "x"}, []),
        ({"status": "mystery", "toolUseId": "x"}, []),
    ],
)
def test_tool_status_table(tool: dict[str, Any], expected: list[str]) -> None:
    projector = RunProjector("thread-1", "run-1")
    out = projector.project(status(tool=tool))
    assert types(out) == expected
    if expected == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]:
        assert out[1]["delta"] == '{"a":"é","b":1}'
    if tool["status"] == "completed":
        assert out[0]["content"] == '{"ok":true}'


def test_started_then_result_closes_the_open_call_first() -> None:
    events = project_all(
        [
            status(tool={"status": "started", "toolUseId": "x", "name": "bash"}),
            status(tool={"status": "completed", "toolUseId": "x", "result": "done"}),
            status(tool={"status": "completed", "toolUseId": "x", "result": "again"}),
        ]
    )
    assert types(events) == ["TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT"]


def test_tool_start_carries_the_current_message_as_parent() -> None:
    events = project_all([status("hello"), status(tool={"status": "started", "toolUseId": "x", "name": "bash"})])
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["parentMessageId"] == "t-message"


def test_progress_event_merges_the_tool_object() -> None:
    projector = RunProjector("thread-1", "run-1")
    out = projector.project(
        status(tool={"status": "progress", "toolUseId": "x", "name": "n", "mcpProgress": {"p": 2.0}})
    )
    assert out[0]["name"] == "iac-code.tool-progress.v1"
    assert out[0]["value"] == {
        "schemaVersion": 1,
        "status": "progress",
        "toolUseId": "x",
        "name": "n",
        "mcpProgress": {"p": 2},
    }


def test_close_all_balances_every_span_in_sorted_order() -> None:
    projector = RunProjector("thread-1", "run-1")
    projector.project(status("a", message_id="m-b"))
    projector.project(status(tool={"status": "started", "toolUseId": "t-2", "name": "x"}))
    projector.project(status(tool={"status": "started", "toolUseId": "t-1", "name": "x"}))
    projector.project(status(thinking={"type": "raw_thinking", "text": "hmm"}))
    closing = projector.close_all()
    assert [(e["type"], e.get("messageId") or e.get("toolCallId")) for e in closing] == [
        ("REASONING_MESSAGE_END", "reasoning-m-b"),
        ("REASONING_END", "reasoning-m-b"),
        ("TOOL_CALL_END", "t-1"),
        ("TOOL_CALL_END", "t-2"),
        ("TEXT_MESSAGE_END", "m-b"),
    ]
    assert projector.close_all() == []


def test_a_new_message_id_closes_the_previous_message() -> None:
    events = project_all([status("one", message_id="m1"), status("two", message_id="m2")])
    assert types(events) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]


@pytest.mark.parametrize(
    ("shown", "replayed", "expected"),
    [
        ("before interrupt", "before interruptafter resume", "after resume"),
        ("first", "firstsecond", "second"),
        ("first", "unrelated", "unrelated"),
        ("same", "same", None),
    ],
)
def test_replay_suppression_emits_only_the_unseen_suffix(shown: str, replayed: str, expected: str | None) -> None:
    events = project_all([status(replayed)], digests={_digest(shown)})
    deltas = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == ([expected] if expected else [])


def test_digest_chain_covers_cumulative_text() -> None:
    projector = RunProjector("thread-1", "run-2", {_digest("first")})
    projector.project(status("firstsecond"))
    projector.close_all()
    assert _digest("firstsecond") in projector.text_digests
    third = RunProjector("thread-1", "run-3", projector.text_digests)
    out = third.project(status("firstsecondthird"))
    assert [e["delta"] for e in out if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["third"]


def test_no_event_has_a_null_or_a_float_timestamp() -> None:
    events = project_all(transcript_events("iac-c-resume-allow.sse"))
    for event in events:
        assert isinstance(event["timestamp"], int)
        assert all(value is not None for value in event.values())
