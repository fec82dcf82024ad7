from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agui_bridge.observability.logs import (
    REDACTED,
    JsonFormatter,
    RedactingFilter,
    TextFormatter,
    bind_log_context,
    configure_logging,
    redact,
)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abc.DEF-123", "abc.DEF-123"),
        ('{"llmApiKey": "sk-live-1"}', "sk-live-1"),
        ("iac_code_api_key=sk-live-2", "sk-live-2"),
        ("alibaba_cloud_access_key_secret='AKSECRET'", "AKSECRET"),
        ('"accessKeySecret":"hush"', "hush"),
        ('"securityToken": "sts-token"', "sts-token"),
    ],
)
def test_secrets_are_scrubbed(text: str, secret: str) -> None:
    scrubbed = redact(text)
    assert secret not in scrubbed and REDACTED in scrubbed


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('"GET /x/events?rosInvocationId=ros-secret-1&after=3 HTTP/1.1" 200', "&after=3 HTTP/1.1"),
        ('"GET /x/events?after=3&rosInvocationId=ros-secret-1 HTTP/1.1" 200', "?after=3&rosInvocationId="),
        ("GET /x?ros%49nvocation%69d=ros-secret-1&a=1", "&a=1"),
        ("GET /x?ROSINVOCATIONID=ros-secret-1", "GET /x?"),
        ("GET /x?access_token=tok&rosInvocationId=ros-secret-1", "GET /x?"),
        ('{"rosInvocationId": "ros secret-1", "cwd": "/w"}', '"cwd": "/w"'),
        ("IacCodeProps(ros_invocation_id='ros secret-1', cwd='/w')", "cwd='/w'"),
        ("Ros-Invocation-Id: ros-secret-1", "Ros-Invocation-Id: "),
        ("ros-invocation-id=ros-secret-1", "ros-invocation-id="),
        ('cut short: {"rosInvocationId": "ros secret-1\nnext line', "\nnext line"),  # no closing quote
    ],
)
def test_the_reattach_credential_is_redacted_wherever_it_is_written(text: str, kept: str) -> None:
    scrubbed = redact(text)
    assert "secret-1" not in scrubbed and REDACTED in scrubbed and kept in scrubbed


def test_ordinary_text_is_untouched() -> None:
    assert redact("run ended outcome=success") == "run ended outcome=success"


def test_filter_scrubs_args_before_formatting() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "headers %s", ({"Authorization": "Bearer t0k3n"},), None)
    RedactingFilter().filter(record)
    assert "t0k3n" not in record.getMessage()


def _record(message: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("agui_bridge.test", logging.INFO, __file__, 1, message, None, None)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def test_json_formatter_renders_one_object_with_the_ids() -> None:
    import json

    from agui_bridge.observability.logs import JsonFormatter

    line = JsonFormatter().format(_record("run ended", run_id="r1", outcome="success", duration_ms=12))
    document = json.loads(line)
    assert document["message"] == "run ended" and document["level"] == "info"
    assert (document["run_id"], document["outcome"], document["duration_ms"]) == ("r1", "success", 12)
    assert document["ts"].endswith("Z") and "\n" not in line


def test_context_ids_reach_records_and_greenlet_copies_but_not_the_next_request() -> None:
    import contextvars

    from agui_bridge.observability.logs import ContextFilter, bind_log_context, reset_log_context

    def in_fresh_context() -> tuple[logging.LogRecord, logging.LogRecord, logging.LogRecord]:
        reset_log_context(request_id="req-1")
        bind_log_context(thread_id="t1", run_id="r1")
        first = _record("x")
        ContextFilter().filter(first)
        copied = contextvars.copy_context().run(lambda: _record("y"))
        ContextFilter().filter(copied)
        reset_log_context(request_id="req-2")
        later = _record("z")
        ContextFilter().filter(later)
        return first, copied, later

    first, copied, later = contextvars.Context().run(in_fresh_context)
    assert (first.request_id, first.thread_id, first.run_id) == ("req-1", "t1", "r1")  # type: ignore[attr-defined]
    assert copied.run_id == "r1"  # type: ignore[attr-defined]
    assert later.request_id == "req-2" and not hasattr(later, "run_id")  # type: ignore[attr-defined]
    explicit = _record("w", run_id="own")

    def bind_then_filter() -> None:
        bind_log_context(run_id="ctx")
        ContextFilter().filter(explicit)

    contextvars.Context().run(bind_then_filter)
    assert explicit.run_id == "own"  # type: ignore[attr-defined]


# ------------------------------------------------------------------ log injection and redaction


FORGED = "t1\r\n2026-12-01 00:00:00,000 [INFO] agui_bridge.runs - run ended outcome=success"
HOSTILE_IDS = [
    FORGED,
    "a\nb",
    "a\rb",
    "a\x1b[2Jb",
    "a\x00b",
    "a\x85b",  # NEL (C1)
    "a\u2028b",
    "a\u2029b",
    "a\u202eb",  # right-to-left override
    "a\x7fb",
]


@pytest.fixture
def captured() -> Iterator[Callable[[str], tuple[logging.Logger, io.StringIO]]]:
    """The package logger as configured in production, writing to a buffer (stderr again afterwards)."""
    handlers: list[logging.StreamHandler[Any]] = []

    def capture(log_format: str) -> tuple[logging.Logger, io.StringIO]:
        configure_logging("debug", log_format)
        stream = io.StringIO()
        for handler in logging.getLogger("agui_bridge").handlers:
            if getattr(handler, "_agui_bridge", False) and isinstance(handler, logging.StreamHandler):
                handler.setStream(stream)
                handlers.append(handler)
        return logging.getLogger("agui_bridge.runs.test"), stream

    yield capture
    for handler in handlers:
        handler.setStream(sys.stderr)
    configure_logging("info", "text")


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_control_characters_in_ids_cannot_forge_a_line(
    captured: Callable[[str], tuple[logging.Logger, io.StringIO]], log_format: str, hostile: str
) -> None:
    import contextvars

    logger, stream = captured(log_format)

    def log_it() -> None:
        bind_log_context(thread_id=hostile, run_id=hostile)
        logger.warning("run %s refused", hostile, extra={"client_value": hostile})

    contextvars.Context().run(log_it)
    output = stream.getvalue()
    lines = output.split("\n")
    assert lines[-1] == "" and len(lines) == 2, output  # exactly one record line
    line = lines[0]
    for char in "\r\x1b\x00\x85\u2028\u2029\u202e\x7f":
        assert char not in line
    if log_format == "json":
        document = json.loads(line)
        for key in ("message", "thread_id", "run_id", "client_value"):
            assert "\n" not in document[key] and "\x1b" not in document[key]
    else:
        assert " [WARNING] agui_bridge.runs.test - run t1\\x0d\\x0a2026" in line or hostile != FORGED


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_redaction_reaches_extra_fields_and_tracebacks(
    captured: Callable[[str], tuple[logging.Logger, io.StringIO]], log_format: str
) -> None:
    logger, stream = captured(log_format)
    try:
        raise ValueError("upstream said Authorization: Bearer sk-trace-secret\n2026-12-01 [INFO] forged")
    except ValueError:
        logger.exception(
            "call failed",
            extra={"headers": {"Authorization": "Bearer sk-extra-secret"}, "detail": "api_key=sk-extra-2"},
        )
    output = stream.getvalue()
    for secret in ("sk-trace-secret", "sk-extra-secret", "sk-extra-2"):
        assert secret not in output, output
    assert REDACTED in output
    lines = output.rstrip("\n").split("\n")
    if log_format == "json":
        assert len(lines) == 1
        document = json.loads(lines[0])
        assert "Traceback" in document["exception"] and "ValueError" in document["exception"]
        assert "headers" in document and "detail" in document
    else:
        # the traceback follows on indented lines; the forged record inside the exception text cannot start a line
        assert "Traceback" in output and all(line.startswith("    ") for line in lines[1:])
        assert not any(line.startswith("2026-12-01") for line in lines[1:])


def test_gunicorn_records_through_the_json_formatter_are_redacted_too() -> None:
    """gunicorn's own log uses JsonFormatter without our filter (logconfig_dict): the formatter scrubs alone."""
    record = logging.LogRecord(
        "gunicorn.error", logging.ERROR, __file__, 1, "bad request %s", ("Authorization: Bearer g-secret\nx",), None
    )
    document = json.loads(JsonFormatter().format(record))
    assert "g-secret" not in document["message"] and "\n" not in document["message"]


def test_text_formatter_quotes_values_that_could_fake_a_field() -> None:
    record = _record("run ended", thread_id="t1 outcome=success", run_id="r1")
    line = TextFormatter().format(record)
    assert 'thread_id="t1 outcome=success"' in line and line.endswith("run_id=r1")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_gunicorn_and_library_records_are_redacted_and_escaped(log_format: str) -> None:
    """gunicorn's logconfig sends its own loggers and the root logger (libraries) through our formatter."""
    import subprocess
    from pathlib import Path

    from agui_bridge.config.settings import Settings
    from agui_bridge.worker.hooks import gunicorn_settings

    config = gunicorn_settings(Settings(log_format=log_format))["logconfig_dict"]
    code = (
        "import json, logging, logging.config, sys\n"
        "logging.config.dictConfig(json.loads(sys.argv[1]))\n"
        "logging.getLogger('gunicorn.error').warning('bad header %s', 'X\\x1b[2J Authorization: Bearer g-1')\n"
        "logging.getLogger('urllib3.connectionpool').warning('retry\\nforged api_key=lib-2')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(config)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    lines = done.stderr.rstrip("\n").split("\n")
    assert len(lines) == 2, done.stderr
    assert "\x1b" not in done.stderr and "g-1" not in done.stderr and "lib-2" not in done.stderr
    assert all(REDACTED in line for line in lines)
