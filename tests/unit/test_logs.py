from __future__ import annotations

import logging

import pytest

from agui_bridge.logs import REDACTED, RedactingFilter, redact


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

    from agui_bridge.logs import JsonFormatter

    line = JsonFormatter().format(_record("run ended", run_id="r1", outcome="success", duration_ms=12))
    document = json.loads(line)
    assert document["message"] == "run ended" and document["level"] == "info"
    assert (document["run_id"], document["outcome"], document["duration_ms"]) == ("r1", "success", 12)
    assert document["ts"].endswith("Z") and "\n" not in line


def test_context_ids_reach_records_and_greenlet_copies_but_not_the_next_request() -> None:
    import contextvars

    from agui_bridge.logs import ContextFilter, bind_log_context, reset_log_context

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
    contextvars.Context().run(lambda: (bind_log_context(run_id="ctx"), ContextFilter().filter(explicit)))
    assert explicit.run_id == "own"  # type: ignore[attr-defined]
