"""Logging setup: one access line per run, and a redaction filter as the last line of defence.

The bridge never logs request bodies or A2A metadata; the filter still scrubs bearer tokens and
credential-looking key/value pairs from every record, in case a library logs one.
"""

from __future__ import annotations

import logging
import re
import sys

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


class _ExtraFormatter(logging.Formatter):
    _FIELDS = ("thread_id", "run_id", "execution_id", "task_id", "outcome", "duration_ms")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{name}={getattr(record, name)}" for name in self._FIELDS if hasattr(record, name)]
        return f"{line} {' '.join(extras)}" if extras else line


def configure_logging(level: str = "info") -> None:
    """Attach one stderr handler with redaction to the package logger (idempotent per process)."""
    logger = logging.getLogger("agui_bridge")
    logger.setLevel(level.upper())
    if any(getattr(h, "_agui_bridge", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._agui_bridge = True  # type: ignore[attr-defined]
    handler.setFormatter(_ExtraFormatter("%(asctime)s [%(levelname)s] %(name)s - %(message)s"))
    handler.addFilter(RedactingFilter())
    logger.addHandler(handler)
    logger.propagate = False
