"""Self-tests of the AG-UI conformance harness (tests/support/agui_checks.py + verify_streams.mjs)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import agui_checks
from tests.support.agui_checks import (
    AguiStreamError,
    assert_valid_agui_stream,
    event_types,
    parse_sse,
    sse_comments,
)
from tests.support.conformance import (
    conformance_sessionfinish,
    in_ci,
    node_verifier_available,
    run_node_verifier,
)

TS = 1_767_225_600_000
THREAD = "8473547e-c8ed-4aef-a84c-603a6a8d42da"
RUN = "32c263f2-b0b0-42ac-905c-524a0a9bb652"

Event = dict[str, Any]


def sse(events: list[Event], *, heartbeat_after: int | None = None) -> bytes:
    """Frame events exactly like agui-bridge: compact JSON, literal UTF-8, LF only.

    See docs/design.md#decision-balanced-spans-and-strict-framing.
    """
    out: list[str] = []
    for index, event in enumerate(events):
        out.append("data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n\n")
        if heartbeat_after == index:
            out.append(": heartbeat\n\n")
    return "".join(out).encode("utf-8")


def ev(etype: str, **fields: Any) -> Event:
    return {"type": etype, **fields, "timestamp": TS}


def valid_events() -> list[Event]:
    return [
        ev("RUN_STARTED", threadId=THREAD, runId=RUN),
        ev(
            "CUSTOM",
            name="iac-code.session.v1",
            value={"schemaVersion": 1, "threadId": THREAD, "aguiRunId": RUN, "taskId": None},
        ),
        ev("TEXT_MESSAGE_START", messageId="assistant-1", role="assistant"),
        ev("TEXT_MESSAGE_CONTENT", messageId="assistant-1", delta="héllo 世界"),
        ev("TOOL_CALL_START", toolCallId="tool-1", toolCallName="bash", parentMessageId="assistant-1"),
        ev("TOOL_CALL_ARGS", toolCallId="tool-1", delta='{"command":"pwd"}'),
        ev("TOOL_CALL_END", toolCallId="tool-1"),
        ev("TOOL_CALL_RESULT", messageId="tool-result-tool-1", toolCallId="tool-1", content="/w", role="tool"),
        ev("TEXT_MESSAGE_END", messageId="assistant-1"),
        ev(
            "RUN_FINISHED",
            threadId=THREAD,
            runId=RUN,
            outcome={"type": "success"},
            usage=[
                {
                    "provider": "demo",
                    "model": "m",
                    "inputTokens": 1,
                    "outputTokens": 2,
                    "totalTokens": 3,
                    "cachedInputTokens": 0,
                }
            ],
        ),
    ]


def reasoning_pipeline_events() -> list[Event]:
    """REASONING_*, STEP_*, ACTIVITY_SNAPSHOT and an interrupt outcome.

    See docs/design.md#projection, docs/design.md#pipelines and docs/design.md#interrupt-building.
    """
    return [
        ev("RUN_STARTED", threadId=THREAD, runId=RUN),
        ev("STEP_STARTED", stepName="candidate:candidate-0:template_generating"),
        ev(
            "ACTIVITY_SNAPSHOT",
            messageId="pipeline:p-1",
            activityType="iac-code.pipeline.v1",
            content={"schemaVersion": 1, "pipelineRunId": "p-1", "snapshot": {"current": None}},
            replace=True,
        ),
        ev("REASONING_START", messageId="reasoning-assistant-1"),
        ev("REASONING_MESSAGE_START", messageId="reasoning-assistant-1", role="reasoning"),
        ev("REASONING_MESSAGE_CONTENT", messageId="reasoning-assistant-1", delta="thinking"),
        ev("REASONING_MESSAGE_END", messageId="reasoning-assistant-1"),
        ev("REASONING_END", messageId="reasoning-assistant-1"),
        ev("STEP_FINISHED", stepName="candidate:candidate-0:template_generating"),
        ev(
            "RUN_FINISHED",
            threadId=THREAD,
            runId=RUN,
            outcome={
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "permission-1",
                        "reason": "tool_call",
                        "message": "Run a local shell command. Allow once?",
                        "toolCallId": "tool-1",
                        "responseSchema": {
                            "type": "object",
                            "properties": {"decision": {"type": "string", "enum": ["allow_once", "deny"]}},
                            "required": ["decision"],
                            "additionalProperties": False,
                        },
                        "expiresAt": "2026-11-29T19:30:00.000Z",
                        "metadata": {"schemaVersion": 1, "toolName": "bash", "purpose": None},
                    }
                ],
            },
        ),
    ]


def error_events() -> list[Event]:
    """RUN_ERROR with only its schema's members, spans closed first.

    See docs/design.md#span-balancing.
    """
    return [
        ev("RUN_STARTED", threadId=THREAD, runId=RUN),
        ev("TEXT_MESSAGE_START", messageId="assistant-1", role="assistant"),
        ev("TEXT_MESSAGE_END", messageId="assistant-1"),
        ev(
            "RUN_ERROR",
            message="The A2A execution failed.",
            code="A2A_EXECUTION_FAILED",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Broken streams: name -> (raw bytes, fragment of the Python error, Node must reject it officially)


def _mutate(fn: Callable[[list[Event]], None]) -> bytes:
    events = copy.deepcopy(valid_events())
    fn(events)
    return sse(events)


def _float_ts(events: list[Event]) -> None:
    events[3]["timestamp"] = TS + 0.5


def _null_parent(events: list[Event]) -> None:
    events[4]["parentMessageId"] = None


def _content_before_start(events: list[Event]) -> None:
    events[2], events[3] = events[3], events[2]


def _two_terminals(events: list[Event]) -> None:
    events.append(copy.deepcopy(events[-1]))


def _event_after_finished(events: list[Event]) -> None:
    events.append(copy.deepcopy(events[1]))


def _unclosed_tool(events: list[Event]) -> None:
    del events[6]  # TOOL_CALL_END


def _finished_then_error(events: list[Event]) -> None:
    events.append(error_events()[-1])


def _no_terminal(events: list[Event]) -> None:
    del events[-1]


def _unknown_field(events: list[Event]) -> None:
    events[2]["messageID"] = "typo"


def _run_error_with_run_ids(events: list[Event]) -> None:
    """The reference adapter's RUN_ERROR: threadId/runId are outside AG-UI 1.0's RunErrorEvent."""
    events[-1] = {**error_events()[-1], "threadId": THREAD, "runId": RUN}


BROKEN: dict[str, tuple[bytes, str, bool]] = {
    "crlf_framing": (sse(valid_events()).replace(b"\n", b"\r\n"), "LF only", True),
    "float_timestamp": (_mutate(_float_ts), "valid integer", True),
    "null_parent_message_id": (_mutate(_null_parent), "JSON null at /parentMessageId", False),
    "content_before_start": (_mutate(_content_before_start), "'assistant-1' is not open", True),
    "two_terminal_events": (_mutate(_two_terminals), "exactly one terminal event", True),
    "event_after_run_finished": (_mutate(_event_after_finished), "last event must be", True),
    "unclosed_tool_call": (_mutate(_unclosed_tool), "tool call 'tool-1' (opened at #4) is still open", True),
    "run_error_after_run_finished": (_mutate(_finished_then_error), "exactly one terminal event", False),
    "no_terminal_event": (_mutate(_no_terminal), "last event must be", False),
    "unknown_field": (_mutate(_unknown_field), "unknown field /messageID", False),
    "run_error_with_run_ids": (_mutate(_run_error_with_run_ids), "unknown field /threadId", False),
}


@pytest.fixture
def node_ready() -> None:
    missing = node_verifier_available()
    if missing is None:
        return
    if in_ci():
        pytest.fail(f"Node verifier unavailable in CI: {missing}")
    pytest.skip(f"Node verifier unavailable: {missing}")


@pytest.fixture(autouse=True)
def _no_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """These self-tests call the Node verifier themselves; keep them out of the session capture."""
    monkeypatch.setattr(agui_checks, "_capture_dir", None)
    monkeypatch.delenv(agui_checks.CAPTURE_ENV, raising=False)


def _write(tmp_path: Path, name: str, raw: bytes) -> Path:
    path = tmp_path / f"{name}.sse"
    path.write_bytes(raw)
    return path


# ---------------------------------------------------------------------------------------------
# Python checks


def test_valid_stream_passes_python_checks() -> None:
    raw = sse(valid_events(), heartbeat_after=1)
    events = assert_valid_agui_stream(raw, expect_terminal="RUN_FINISHED")
    assert event_types(events) == [e["type"] for e in valid_events()]
    assert assert_valid_agui_stream(raw, expect_terminal="success") == events
    assert sse_comments(raw) == ["heartbeat"]
    assert parse_sse(raw) == events


@pytest.mark.parametrize(
    ("events", "terminal"),
    [(reasoning_pipeline_events(), "interrupt"), (error_events(), "RUN_ERROR")],
    ids=["reasoning-steps-activity-interrupt", "run-error-with-extras"],
)
def test_other_valid_shapes_pass_python_checks(events: list[Event], terminal: str) -> None:
    assert event_types(assert_valid_agui_stream(sse(events), expect_terminal=terminal)) == event_types(events)


def test_expect_terminal_mismatch_is_reported() -> None:
    with pytest.raises(AguiStreamError, match="expected terminal RUN_ERROR"):
        assert_valid_agui_stream(sse(valid_events()), expect_terminal="RUN_ERROR")
    with pytest.raises(AguiStreamError, match="outcome 'interrupt'"):
        assert_valid_agui_stream(sse(valid_events()), expect_terminal="interrupt")


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_stream_rejected_by_python_checks(name: str) -> None:
    raw, fragment, _ = BROKEN[name]
    with pytest.raises(AguiStreamError) as excinfo:
        assert_valid_agui_stream(raw)
    assert fragment in str(excinfo.value)


def test_open_span_at_run_error_rejected() -> None:
    events = error_events()
    del events[2]  # TEXT_MESSAGE_END: spans must close before RUN_ERROR too (docs/design.md#span-balancing)
    with pytest.raises(AguiStreamError, match=r"'assistant-1' .* is still open"):
        assert_valid_agui_stream(sse(events))


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'data: {"type":"RUN_STARTED"}', "blank line"),
        (b": keepalive\n\n", "neither"),
        (b'data:{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":1}\n\n', "neither"),
        (b'data: {"a":1,"a":2}\n\n', "duplicate key"),
        (b"data: [1]\n\n", "not a JSON object"),
        (b"\xff\n\n", "not UTF-8"),
        (b'data: {"a":1}\r\n\r\n', "CR found"),
        (b'data: {"a":1}\n\n\n\ndata: {"b":1}\n\n', r"record #1 is neither"),
        (b'event: x\ndata: {"a":1}\n\n', "neither"),
        (b'retry: 5\ndata: {"a":1}\n\n', "neither"),
        (b'data: {"a":\ndata: 1}\n\n', "neither"),
        (b'data: {"a":1}\n\nid: 3\n\n', r"record #1 is neither"),
        (b'id: x\ndata: {"a":1}\n\n', "malformed id line"),
        (b'id:1\ndata: {"a":1}\n\n', "neither"),
        (b': heartbeat\ndata: {"a":1}\n\n', "neither"),
        (b"\n\n", r"record #0 is neither"),
    ],
)
def test_framing_errors(raw: bytes, fragment: str) -> None:
    with pytest.raises(AguiStreamError, match=fragment):
        assert_valid_agui_stream(raw)


def test_non_compact_json_and_missing_timestamp_rejected() -> None:
    events = valid_events()
    del events[1]["timestamp"]
    raw = sse(events).replace(b'"type":"RUN_STARTED"', b'"type": "RUN_STARTED"')
    with pytest.raises(AguiStreamError) as excinfo:
        assert_valid_agui_stream(raw)
    assert "not compact" in str(excinfo.value)
    assert "timestamp must be an integer, got None" in str(excinfo.value)


def test_accepted_streams_are_captured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    agui_checks.set_capture_dir(tmp_path)
    raw = sse(valid_events())
    assert_valid_agui_stream(raw)
    with pytest.raises(AguiStreamError):
        assert_valid_agui_stream(BROKEN["two_terminal_events"][0])
    assert_valid_agui_stream(raw, capture=False)
    captured = list(tmp_path.glob("*.sse"))
    assert len(captured) == 1
    assert captured[0].read_bytes() == raw
    assert "test_accepted_streams_are_captured" in captured[0].name


# ---------------------------------------------------------------------------------------------
# Node verifier (@ag-ui/client 1.0)


@pytest.mark.usefixtures("node_ready")
def test_valid_streams_pass_node_verifier(tmp_path: Path) -> None:
    files = [
        _write(tmp_path, "valid", sse(valid_events(), heartbeat_after=1)),
        _write(tmp_path, "reasoning", sse(reasoning_pipeline_events(), heartbeat_after=0)),
        _write(tmp_path, "error", sse(error_events())),
    ]
    outcome = run_node_verifier(files)
    assert outcome.ok, outcome
    by_name = {Path(r["file"]).name: r for r in outcome.results}
    assert set(by_name) == {f.name for f in files}
    assert by_name["valid.sse"]["applied"] == len(valid_events())
    assert by_name["reasoning.sse"]["applied"] == len(reasoning_pipeline_events())
    assert all(r["warnings"] == [] for r in by_name.values()), outcome


@pytest.mark.usefixtures("node_ready")
def test_node_verifier_rejects_broken_streams(tmp_path: Path) -> None:
    for name, (raw, _, _) in BROKEN.items():
        _write(tmp_path, name, raw)
    outcome = run_node_verifier([tmp_path])
    assert outcome.returncode == 1
    by_name = {Path(r["file"]).stem: r for r in outcome.results}
    assert set(by_name) == set(BROKEN)
    assert all(not r["ok"] for r in by_name.values()), outcome
    assert by_name["null_parent_message_id"]["stage"] == "deviation"
    assert by_name["unknown_field"]["stage"] == "deviation"
    # A member outside a standard event's schema: the client strips it with a warning, which fails the stream.
    assert by_name["run_error_with_run_ids"]["stage"] == "deviation"
    assert "Removed unrecognised material at '/threadId' on RUN_ERROR" in by_name["run_error_with_run_ids"]["error"]
    assert by_name["run_error_after_run_finished"]["stage"] == "harness"
    assert by_name["no_terminal_event"]["stage"] == "harness"


@pytest.mark.usefixtures("node_ready")
def test_official_client_alone_rejects_structural_errors(tmp_path: Path) -> None:
    """Proves the official verifier really runs: no harness policy, just @ag-ui/client 1.0."""
    for name, (raw, _, _) in BROKEN.items():
        _write(tmp_path, name, raw)
    outcome = run_node_verifier([tmp_path], official_only=True)
    by_name = {Path(r["file"]).stem: r for r in outcome.results}
    for name, (_, _, official) in BROKEN.items():
        assert by_name[name]["ok"] is (not official), by_name[name]
        if official:
            assert by_name[name]["stage"] == "verifier"
    assert "No active text message found" in by_name["content_before_start"]["error"]
    assert "tool calls are still active: tool-1" in by_name["unclosed_tool_call"]["error"]
    assert "expected int" in by_name["float_timestamp"]["error"]


@pytest.mark.usefixtures("node_ready")
def test_sessionfinish_fails_session_on_rejected_stream(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGUI_NODE_VERIFY", raising=False)
    agui_checks.set_capture_dir(tmp_path)
    lines: list[str] = []
    reporter = SimpleNamespace(
        write=lambda *_, **__: None,
        write_sep=lambda *_, **__: None,
        write_line=lambda line, **_: lines.append(line),
    )
    session = SimpleNamespace(
        config=SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda _: reporter)),
        exitstatus=0,
    )
    _write(tmp_path, "good", sse(valid_events()))
    conformance_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == 0
    assert "all accepted" in lines[-1]

    _write(tmp_path, "bad", BROKEN["unclosed_tool_call"][0])
    conformance_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert any("bad.sse [verifier]" in line for line in lines)
