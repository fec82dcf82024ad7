"""`agui-bridge chat` pieces that need no server: options, questions from schemas, answers, expiry."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from agui_bridge.chat import client as chat
from agui_bridge.chat.attach import RunFollower
from agui_bridge.chat.client import ChatUsageError, answer_payload, expires_in, options_from_args, question_for
from agui_bridge.chat.output import escape_terminal
from agui_bridge.cli import main
from agui_bridge.cli.command import build_parser
from agui_bridge.projection.interrupts import build_interrupt

PERMISSION = build_interrupt(
    {
        "kind": "permission",
        "inputId": "permission-1",
        "toolUseId": "tool-1",
        "toolName": "write_file",
        "title": "Change a workspace file",
        "prompt": "Write /workspace/x.yaml. Allow once?",
        "target": "/workspace/x.yaml",
        "options": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
    },
    "2026-01-01T00:09:00.000Z",
)
QUESTION = build_interrupt(
    {
        "kind": "ask_user_question",
        "inputId": "question-1",
        "prompt": "Which instance size should I use?",
        "options": [{"id": "small", "label": "Small (2 vCPU)"}, {"id": "large", "label": "Large (8 vCPU)"}],
        "allowFreeText": True,
        "freeTextPrompt": "Or type another size",
    },
    "2026-01-01T00:09:00.000Z",
)
SELECTION = build_interrupt(
    {"kind": "candidate_selection", "inputId": "selection-1", "options": [{"candidate_index": 0, "name": "A"}]},
    "2026-01-01T00:09:00.000Z",
)
FREE_ONLY = build_interrupt({"kind": "ask_user_question", "inputId": "q-2", "prompt": "Name?"}, "2026-01-01T00:00Z")
UNKNOWN_SCHEMA: dict[str, Any] = {"id": "x-1", "reason": "input_required", "message": "?", "responseSchema": {}}


def test_permission_question() -> None:
    question = question_for(PERMISSION)
    assert question.interrupt_id == "permission-1"
    assert question.title == "Change a workspace file"
    assert question.text == "Write /workspace/x.yaml. Allow once?"
    assert [c.label for c in question.choices] == ["Allow once", "Deny"]
    assert [c.payload for c in question.choices] == [{"decision": "allow_once"}, {"decision": "deny"}]
    assert ("tool", "write_file") in question.facts and ("target", "/workspace/x.yaml") in question.facts
    assert not question.free_text and not question.raw_json


def test_question_with_options_and_free_text() -> None:
    question = question_for(QUESTION)
    assert question.text == "Which instance size should I use?"  # the options are numbered, not repeated
    assert [c.label for c in question.choices] == ["Small (2 vCPU)", "Large (8 vCPU)"]
    assert question.free_text and question.free_text_prompt == "Or type another size"


@pytest.mark.parametrize(
    ("interrupt", "typed", "payload"),
    [
        (PERMISSION, "1\n", {"decision": "allow_once"}),
        (PERMISSION, " 2 ", {"decision": "deny"}),
        (PERMISSION, "allow_once", {"decision": "allow_once"}),
        (PERMISSION, "Allow Once", {"decision": "allow_once"}),
        (PERMISSION, "3", None),
        (PERMISSION, "yes", None),
        (PERMISSION, "", None),
        (QUESTION, "2", {"selectedId": "large"}),
        (QUESTION, "small", {"selectedId": "small"}),
        (QUESTION, "large (8 vcpu)", {"selectedId": "large"}),
        (QUESTION, "medium please", {"freeText": "medium please"}),
        (QUESTION, "   \n", None),
        (SELECTION, "1", {"selectedId": "0"}),
        (SELECTION, "a", {"selectedId": "0"}),
        (SELECTION, "something else", None),
        (FREE_ONLY, "Ada", {"freeText": "Ada"}),
        (UNKNOWN_SCHEMA, '{"answer": 1}', {"answer": 1}),
        (UNKNOWN_SCHEMA, "[1]", None),
        (UNKNOWN_SCHEMA, "nope", None),
    ],
)
def test_answer_payload(interrupt: dict[str, Any], typed: str, payload: dict[str, Any] | None) -> None:
    assert answer_payload(question_for(interrupt), typed) == payload


def test_expires_in() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert expires_in("2026-01-01T00:09:00.000Z", now) == "9m00s"
    assert expires_in("2026-01-01T00:00:05.500Z", now) == "0m05s"
    assert expires_in("2025-12-31T23:59:59.000Z", now) == "expired"
    assert expires_in("soon", now) is None
    assert expires_in(None, now) is None


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["chat", *argv])


def test_options_defaults_and_flags(tmp_path: Any) -> None:
    options = options_from_args(parse("hello"), {})
    assert options.url == chat.DEFAULT_URL and options.token is None and not options.json_mode
    assert options.message == "hello" and options.ros_invocation_id.startswith("chat-")
    options = options_from_args(
        parse("--url", "http://h:1", "--thread", "t-1", "--ros", "r-1", "--cwd", str(tmp_path), "--json", "hi"),
        {"IAC_CODE_AGUI_AUTH_TOKEN": "s3cret"},
    )
    assert (options.url, options.thread_id, options.ros_invocation_id, options.cwd) == (
        "http://h:1/",
        "t-1",
        "r-1",
        str(tmp_path),
    )
    assert options.token == "s3cret" and options.json_mode
    assert options_from_args(parse("--token-env", "MY_TOKEN", "hi"), {"MY_TOKEN": "t"}).token == "t"


@pytest.mark.parametrize(
    ("argv", "environ"),
    [
        (("--url", "ftp://h/", "hi"), {}),
        (("--url", "http://h/?token=x", "hi"), {}),
        (("--url", "nohost", "hi"), {}),
        (("--token-env", "MISSING", "hi"), {}),
        (("  ",), {}),
    ],
)
def test_usage_errors(argv: tuple[str, ...], environ: dict[str, str]) -> None:
    with pytest.raises(ChatUsageError):
        options_from_args(parse(*argv), environ)


def test_usage_errors_exit_2_and_never_print_the_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--url", "ftp://h/", "hi"]) == 2
    assert "--url" in capsys.readouterr().err
    assert main(["chat"]) == 2  # a message is required unless --attach is given
    assert "message" in capsys.readouterr().err


def test_printer_uses_ansi_only_when_asked() -> None:
    plain, colored = io.StringIO(), io.StringIO()
    chat.Printer(plain, io.StringIO(), color=False).write("x", "2")
    chat.Printer(colored, io.StringIO(), color=True).write("x", "2")
    assert plain.getvalue() == "x"
    assert colored.getvalue() == "\x1b[2mx\x1b[0m"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text", "plain text"),
        ("line one\nline two\tcolumn", "line one\nline two\tcolumn"),  # layout stays
        ("windows line\r\nend", "windows line\nend"),
        ("\x1b]0;owned\x07title", "\\x1b]0;owned\\x07title"),  # OSC window title
        ("\x1b[2Jcleared", "\\x1b[2Jcleared"),  # CSI erase display
        ("over\rwrite", "over\\x0dwrite"),
        ("\x00nul\x7fdel", "\\x00nul\\x7fdel"),
        ("\x9b2J\x9d0;t\x9c\x85", "\\x9b2J\\x9d0;t\\x9c\\x85"),  # C1 CSI, OSC, ST, NEL
        ("a\u2028b\u202eevil\u2066", "a\\u2028b\\u202eevil\\u2066"),
        ("naïve — 日本語 🙂", "naïve — 日本語 🙂"),
    ],
)
def test_escape_terminal_keeps_text_and_layout_and_shows_control_characters(text: str, shown: str) -> None:
    assert escape_terminal(text) == shown


HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m"
CONTROL_BYTES = ("\x1b", "\x07", "\x9b")


def client_for(*argv: str, stdin: str = "") -> tuple[chat.ChatClient, io.StringIO, io.StringIO]:
    args = build_parser().parse_args(["chat", "--url", "http://127.0.0.1:9/", "--cwd", "/tmp", *argv])
    out, err = io.StringIO(), io.StringIO()
    client = chat.ChatClient(options_from_args(args, {}), None, io.StringIO(stdin), out, err)  # type: ignore[arg-type]
    return client, out, err


def test_everything_chat_prints_from_the_network_is_escaped() -> None:
    client, out, err = client_for("hi")
    events: list[dict[str, Any]] = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": HOSTILE},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": HOSTILE},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": HOSTILE},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": json.dumps({"path": HOSTILE})},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "c", "messageId": "t", "content": HOSTILE},
        {"type": "STEP_STARTED", "stepName": HOSTILE},
        {"type": "CUSTOM", "name": "iac-code.artifact.v1", "value": {"name": HOSTILE, "parts": [{"url": HOSTILE}]}},
        {"type": "CUSTOM", "name": "iac-code.tool-progress.v1", "value": {"name": HOSTILE, "status": HOSTILE}},
        {"type": "RUN_ERROR", "code": HOSTILE, "message": HOSTILE},
    ]
    for event in events:
        client._on_event(event)
    printed = out.getvalue() + err.getvalue()
    assert not any(byte in printed for byte in CONTROL_BYTES), printed
    assert printed.count("\\x1b]0;owned\\x07") >= len(events)


def test_interrupt_prompts_from_the_network_are_escaped() -> None:
    hostile = build_interrupt(
        {
            "kind": "ask_user_question",
            "inputId": "q-1",
            "title": HOSTILE,
            "prompt": HOSTILE,
            "options": [{"id": "a", "label": HOSTILE}],
        },
        "2026-01-01T00:09:00.000Z",
    )
    client, out, _err = client_for("hi", stdin="1\n")
    assert client.ask([hostile]) is not None
    assert not any(byte in out.getvalue() for byte in CONTROL_BYTES), out.getvalue()
    assert "\\x1b[2J" in out.getvalue()


def test_json_mode_prints_the_event_json_unchanged() -> None:
    client, out, _err = client_for("--json", "hi")
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": HOSTILE}
    client._consume(ListFollower([event, {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]), None)
    first = out.getvalue().splitlines()[0]
    assert first == json.dumps(event, ensure_ascii=False, separators=(",", ":"))


class ListFollower(RunFollower):
    """Stands in for RunFollower in `_consume`: the events of a run, already decoded, no HTTP."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def follow(self, first: requests.Response | None) -> Iterator[dict[str, Any]]:
        return iter(self.events)


def test_chat_on_a_terminal_takes_ctrl_c_back_when_started_with_sigint_ignored() -> None:
    import io
    import signal as signals

    from agui_bridge.chat.client import restore_ctrl_c

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    previous = signals.signal(signals.SIGINT, signals.SIG_IGN)
    try:
        restore_ctrl_c(io.StringIO())  # a pipe: what it was given stays
        assert signals.getsignal(signals.SIGINT) is signals.SIG_IGN
        restore_ctrl_c(Tty())
        assert signals.getsignal(signals.SIGINT) is signals.default_int_handler
    finally:
        signals.signal(signals.SIGINT, previous)
