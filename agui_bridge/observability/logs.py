"""Logging setup: text or JSON lines, ids from context, and a redaction filter as the last line of defence.

The bridge never logs request bodies or A2A metadata; the filter still scrubs bearer tokens and
credential-looking key/value pairs from every record, in case a library logs one. Request, thread,
run and execution ids travel in a ContextVar that `runtime.spawn` copies into every greenlet/thread,
so a record logged by a pump or a cancel greenlet still says which run it belongs to.

Both formatters redact and escape every field they write (message, ids, any other extra attribute,
tracebacks): CR, LF, ESC and the other C0/C1 controls, U+2028/2029 and bidi overrides in a
client-chosen threadId cannot forge a log line or steer the terminal it is read on.
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

from agui_bridge.protocol.control import LOG_CONTROL, escape_matches

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(
        r"(?i)([\"']?(?:authorization|llm_?api_?key|iac_code_api_key|api[_-]?key|access_?key_?(?:id|secret)|"
        r"alibaba_cloud_[a-z_]+|security_?token|secret|password|token)[\"']?\s*[:=]\s*[\"']?)[^\"',\s}]+"
    ),
)
REDACTED = "[REDACTED]"


def _spelled_any_way(*words: str) -> str:
    """`words` joined by an optional `-`/`_`, each letter in either case or as its %XX escape: a URL's
    query (an access log's request line, a Referer) names `rosInvocationId` whichever way a client spelt it."""

    def letter(char: str) -> str:
        escapes = "|".join(sorted({f"%{ord(char.lower()):02x}", f"%{ord(char.upper()):02x}"}))
        return f"(?:{re.escape(char)}|{escapes})"

    return "(?:[-_]|%2d|%5f)?".join("".join(letter(c) for c in word) for word in words)


#: The per-run reattach credential wherever it is written as key and value: a URL's query
#: (`?rosInvocationId=x&after=3`), a JSON member, `key=value`, a repr, the `Ros-Invocation-Id: x` header
#: (docs/design.md#reattach). A quoted value is redacted up to its closing quote (or the end of its line).
_ROS_INVOCATION_ID = re.compile(
    r"(?i)(?P<head>" + _spelled_any_way("ros", "invocation", "id") + r"[\"']?\s*[:=]\s*)"
    r"(?:(?P<quote>[\"'])(?:(?!(?P=quote)).)*(?P=quote)?|[^\"'&;,)}\s]+)"
)


def _redact_ros(match: re.Match[str]) -> str:
    quote = match.group("quote") or ""
    return match.group("head") + quote + REDACTED + quote


def redact(text: str) -> str:
    # The reattach credential first: the generic patterns stop a value at a quote, comma or space only,
    # so `access_token=a&rosInvocationId=b` is redacted as one value after this ran.
    text = _ROS_INVOCATION_ID.sub(_redact_ros, text)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def escape_control(text: str) -> str:
    """Make a client-controlled value one inert line: a line feed becomes the four characters `\\x0a`."""
    return escape_matches(LOG_CONTROL, text)


def _clean(text: str) -> str:
    return escape_control(redact(text))


def _clean_lines(text: str, separator: str = "\n") -> str:
    """A traceback: redacted, control characters escaped except the line feeds (joined by `separator`)."""
    return separator.join(escape_control(line) for line in redact(text.rstrip("\n")).split("\n"))


#: In text logs a traceback's lines are indented, so no line of it can pass for a record of its own.
_CONTINUATION = "\n    "


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


#: What every LogRecord has; any other attribute is an extra field (`extra=` or the bound context).
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def extra_fields(record: logging.LogRecord) -> list[tuple[str, object]]:
    """The ids in FIELDS order, then any other extra attribute: every one is rendered, so every one is
    redacted and escaped (nothing a caller adds can slip past the scrubbing)."""
    names = [name for name in FIELDS if hasattr(record, name)]
    names += [name for name in record.__dict__ if name not in _STANDARD and name not in FIELDS]
    return [(name, getattr(record, name)) for name in names if not name.startswith("_")]


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except (TypeError, ValueError):
        return str(record.msg)


def _text_value(value: object) -> str:
    """`key=value` stays unambiguous: a value with spaces, quotes or `=` is quoted."""
    text = value if isinstance(value, str) else str(value)
    if not text or any(ch.isspace() or ch in '"=' for ch in text):
        text = json.dumps(text, ensure_ascii=False)
    return _clean(text)


class TextFormatter(logging.Formatter):
    """One line per record (a traceback follows on indented lines); every field redacted and escaped."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s [%(levelname)s] %(name)s - %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = _clean(_message(record))
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        extras = [f"{name}={_text_value(value)}" for name, value in extra_fields(record)]
        if extras:
            line = f"{line} {' '.join(extras)}"
        if record.exc_info:
            line += _CONTINUATION + _clean_lines(self.formatException(record.exc_info), _CONTINUATION)
        elif record.exc_text:
            line += _CONTINUATION + _clean_lines(record.exc_text, _CONTINUATION)
        if record.stack_info:
            line += _CONTINUATION + _clean_lines(self.formatStack(record.stack_info), _CONTINUATION)
        return line


def _json_value(value: object) -> object:
    if isinstance(value, str):
        return _clean(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clean(str(value))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the ids and every other extra field, and
    the exception if any; all strings redacted and escaped (also when gunicorn's own log uses it)."""

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        document: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _clean(_message(record)),
        }
        for name, value in extra_fields(record):
            document.setdefault(name, _json_value(value))
        if record.exc_info:
            document["exception"] = _clean_lines(self.formatException(record.exc_info))
        elif record.exc_text:
            document["exception"] = _clean_lines(record.exc_text)
        if record.stack_info:
            document["stack"] = _clean_lines(self.formatStack(record.stack_info))
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


#: Whether this process has already been told that nobody set its logging up (once is enough).
_unconfigured_warned = False


def logging_unconfigured() -> bool:
    """Neither the bridge's handler on the package logger nor any handler on the root logger: records would go
    to Python's last-resort handler (warnings and above, unformatted, unredacted ids)."""
    bridge_handler = any(getattr(h, "_agui_bridge", False) for h in logging.getLogger("agui_bridge").handlers)
    return not bridge_handler and not logging.getLogger().handlers


def warn_once_if_logging_unconfigured() -> None:
    """An operator's own WSGI file that builds the app without `configure_process` learns it once
    (docs/operations.md#upgrading-from-earlier-versions); a warning changes nothing process-wide."""
    global _unconfigured_warned
    if _unconfigured_warned or not logging_unconfigured():
        return
    _unconfigured_warned = True
    logging.getLogger("agui_bridge.app").warning(
        "logging is not set up: call agui_bridge.worker.process.configure_process(settings) before "
        "create_app (as wsgi.py does) to get the bridge's log format, level and tracing"
    )
