"""Logging setup: text or JSON lines, ids from context, and a redaction filter as the last line of defence.

The bridge never logs request bodies or A2A metadata; the filter still scrubs bearer tokens and
credential-looking key/value pairs from every record, in case a library logs one. Request, thread,
run and execution ids travel in a ContextVar that `runtime.spawn` copies into every greenlet/thread,
so a record logged by a pump or a cancel greenlet still says which run it belongs to.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(
        r"(?i)([\"']?(?:authorization|llm_?api_?key|iac_code_api_key|api[_-]?key|access_?key_?(?:id|secret)|"
        r"alibaba_cloud_[a-z_]+|security_?token|secret|password|token)[\"']?\s*[:=]\s*[\"']?)[^\"',\s}]+"
    ),
)
REDACTED = "[REDACTED]"


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


class RedactingFilter(logging.Filter):
    """Render the message once, scrub it, and drop the args so nothing unscrubbed is formatted later."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        return True


#: Record attributes rendered after the message (text) or as JSON members, in this order.
FIELDS = ("request_id", "thread_id", "run_id", "execution_id", "task_id", "outcome", "duration_ms")

_log_context: contextvars.ContextVar[Mapping[str, object] | None] = contextvars.ContextVar(
    "agui_log_context", default=None
)


def reset_log_context(**fields: object) -> None:
    """Start a request's context afresh (a keep-alive connection reuses its greenlet)."""
    _log_context.set({k: v for k, v in fields.items() if v is not None})


def bind_log_context(**fields: object) -> None:
    """Add ids to every record logged from here on in this context (and greenlets spawned from it)."""
    _log_context.set({**(_log_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})


class ContextFilter(logging.Filter):
    """Copy the bound ids onto the record unless the call passed its own (`extra=`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_log_context.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s [%(levelname)s] %(name)s - %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{name}={getattr(record, name)}" for name in FIELDS if hasattr(record, name)]
        return f"{line} {' '.join(extras)}" if extras else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the ids, and the exception if any."""

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        document: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            if hasattr(record, name):
                document[name] = getattr(record, name)
        if record.exc_info:
            document["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(document, ensure_ascii=False, default=str)


def make_formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(level: str = "info", log_format: str = "text") -> None:
    """Attach one stderr handler with ids and redaction to the package logger (idempotent per process)."""
    logger = logging.getLogger("agui_bridge")
    logger.setLevel(level.upper())
    for handler in logger.handlers:
        if getattr(handler, "_agui_bridge", False):
            handler.setFormatter(make_formatter(log_format))
            return
    handler = logging.StreamHandler(sys.stderr)
    handler._agui_bridge = True  # type: ignore[attr-defined]
    handler.setFormatter(make_formatter(log_format))
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter())
    logger.addHandler(handler)
    logger.propagate = False
