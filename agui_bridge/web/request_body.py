"""Reading and decoding a JSON body with the size limit applied while reading (docs/design.md#pre-stream-checks).

Two protections keep one request from holding the worker: the upload must keep a minimum pace
(`limits.UPLOAD_*`, enforced with a gevent timeout per read under gevent and checked after each
chunk everywhere), and the CPU-heavy part (JSON decoding and the bounds walk of `validation.bounds`)
runs in a small pool of native threads, so the hub keeps serving every other stream meanwhile.
"""

from __future__ import annotations

import json
import json.decoder
import re
import time
from collections.abc import Callable
from typing import IO, Any, Literal, TypeVar

from flask import g, request
from werkzeug.exceptions import ClientDisconnected

from agui_bridge.config import limits
from agui_bridge.config.settings import Settings
from agui_bridge.errors import InvalidInput, InvalidJson, RequestTooLarge, UnsupportedMediaType
from agui_bridge.i18n.language import language_from_accept
from agui_bridge.i18n.message_keys import MessageKey
from agui_bridge.protocol.control import encodes_as_utf8
from agui_bridge.runs.request import RunRequest
from agui_bridge.runs.request import read_run_request as validate_run_request
from agui_bridge.validation.bounds import check_body_bounds, prescan_json_text
from agui_bridge.validation.field_errors import pointer_from_tokens
from agui_bridge.worker.host import ReadTimedOut, decode_off_hub, let_the_hub_run, read_within

_CHUNK = 64 * 1024
#: Under gevent a read of data already buffered returns without a switch: a large body read in one go
#: would hold the hub (docs/design.md#hub-watchdog), so the reader yields after this many bytes.
_YIELD_EVERY_BYTES = 1024 * 1024
SLOW_UPLOAD_KEY = MessageKey.REQUEST_BODY_TOO_SLOW
#: Smaller bodies are decoded and validated in place: a thread hand-off would cost more than the work.
_OFF_HUB_BYTES = 16 * 1024
_T = TypeVar("_T")


def upload_deadline(started: float, received: int) -> float:
    """Monotonic time by which the next chunk must have arrived, given `received` bytes so far."""
    allowance = limits.UPLOAD_GRACE_S + (received + _CHUNK) / limits.UPLOAD_MIN_BYTES_PER_S
    return started + min(limits.UPLOAD_DEADLINE_S, allowance)


def _read_chunk(stream: IO[bytes], deadline: float) -> bytes:
    """One read, cut off at `deadline` where the worker can cut a read (gevent)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise InvalidJson(SLOW_UPLOAD_KEY)
    try:
        return read_within(stream, _CHUNK, remaining)
    except ReadTimedOut:
        raise InvalidJson(SLOW_UPLOAD_KEY) from None


def require_json_media_type(content_type: str | None) -> None:
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType()


def read_limited(
    stream: IO[bytes],
    content_length: str | None,
    limit: int,
    too_large_key: str,
    truncated_key: str = MessageKey.INVALID_JSON,
) -> bytes:
    """Read at most `limit` bytes; a body cut short by the client is invalid JSON, never a 400 page."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            declared = -1
        if declared > limit:
            raise RequestTooLarge(too_large_key)
    chunks: list[bytes] = []
    total = 0
    unyielded = 0
    started = time.monotonic()
    while True:
        try:
            chunk = _read_chunk(stream, upload_deadline(started, total))
        except ClientDisconnected:
            raise InvalidJson(truncated_key) from None
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise RequestTooLarge(too_large_key)
        if time.monotonic() > upload_deadline(started, total - len(chunk)):
            raise InvalidJson(SLOW_UPLOAD_KEY)  # the same rule where a read cannot be interrupted
        chunks.append(chunk)
        unyielded += len(chunk)
        if unyielded >= _YIELD_EVERY_BYTES:
            unyielded = 0
            let_the_hub_run()
    return b"".join(chunks)


_DECODER = json.JSONDecoder()
#: json's C scanner for one value, and for one string after its opening quote (typeshed names neither).
_scan_value: Callable[[str, int], tuple[Any, int]] = vars(_DECODER)["scan_once"]
_scan_string: Callable[[str, int], tuple[str, int]] = vars(json.decoder)["scanstring"]
_OPEN = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*(?:(")|(\}))').match
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*").match
_NEXT = re.compile(r'[ \t\n\r]*(?:,[ \t\n\r]*(")|(\}))').match
_END = re.compile(r"[ \t\n\r]*\Z").match
#: A duplicated key is named in the message up to this many characters.
_SHOWN_KEY_CHARS = 64


class DuplicateKey(ValueError):
    """A top-level key that appears twice (the decoder would silently keep the last)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def loads_unique_top_level(body: bytes) -> Any:
    """`json.loads(body)`, except that a top-level object naming a key twice raises DuplicateKey.

    `json.loads` keeps the last of two equal keys, while HAProxy's `json_query` (the shipped config keys a thread by
    `$.threadId`) reads the first: a body with two `threadId`s would be routed by one and served as the other
    (docs/design.md#pre-stream-checks). Only the top level is walked here, member by member with the C scanner
    for each value, so the cost is about half a microsecond per top-level member; an `object_pairs_hook` would pay
    for every nested object too. Errors are json's (ValueError, RecursionError), as `json.loads` raises them; the
    first repeated key is raised only once the whole body has parsed, so a malformed body stays invalid JSON.
    """
    text = body.decode(json.detect_encoding(body), "surrogatepass")
    step = _OPEN(text)
    if step is None:
        return _DECODER.decode(text)  # not an object: json's own answer (a value, or its error)
    members: dict[str, Any] = {}
    first_duplicate: str | None = None
    while step.group(1):
        key, index = _scan_string(text, step.end())
        colon = _COLON(text, index)
        if colon is None:
            raise ValueError("Expecting ':' delimiter")
        try:
            value, index = _scan_value(text, colon.end())
        except StopIteration:
            raise ValueError("Expecting value") from None
        if first_duplicate is None and key in members:
            first_duplicate = key
        members[key] = value
        step = _NEXT(text, index)
        if step is None:
            raise ValueError("Expecting ',' delimiter")
    if _END(text, step.end()) is None:
        raise ValueError("Extra data")
    if first_duplicate is not None:
        raise DuplicateKey(first_duplicate)
    return members


def duplicate_key_error(key: str) -> InvalidInput:
    """INVALID_INPUT naming the key (shortened, as JSON text so nothing unprintable reaches the message).

    The error envelope is UTF-8 JSON written with `ensure_ascii=False`: a key holding a lone surrogate (`"\\ud800"`
    is valid JSON) is shown with the surrogate as its JSON escape and gets no pointer, or the answer itself could
    not be encoded (a plain 500 instead of the 400).
    """
    shortened = key if len(key) <= _SHOWN_KEY_CHARS else key[:_SHOWN_KEY_CHARS] + "…"
    shown = json.dumps(shortened, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")
    field = pointer_from_tokens([key]) if len(key) <= limits.MAX_ID_CHARS and encodes_as_utf8(key) else ""
    return InvalidInput(MessageKey.DUPLICATE_KEY, field=field, params={"name": shown})


def decode_json(body: bytes, invalid_key: str) -> Any:
    """Nesting beyond what the decoder can hold is the depth cap's INVALID_INPUT, not a parse error; a top-level
    key given twice is INVALID_INPUT too (`loads_unique_top_level`)."""
    try:
        return loads_unique_top_level(body)
    except RecursionError:
        raise InvalidInput(
            MessageKey.JSON_TOO_DEEP, field="", params={"field": "RunAgentInput", "max": str(limits.MAX_JSON_DEPTH)}
        ) from None
    except DuplicateKey as duplicate:
        raise duplicate_key_error(duplicate.key) from None
    except ValueError:
        raise InvalidJson(invalid_key) from None


def decode_bounded_body(body: bytes, invalid_key: str) -> Any:
    """Decode and check the caps (CPU-bound: `_read_body` runs it off the hub for a large body)."""
    prescan_json_text(body)
    value = decode_json(body, invalid_key)
    check_body_bounds(value)
    return value


def _read_body(limit: int, too_large_key: str, invalid_json_key: str, decode: Callable[[bytes], _T]) -> _T:
    """Media type, the size limit while reading, then `decode` (off the hub for a large body)."""
    require_json_media_type(request.headers.get("Content-Type"))
    body = read_limited(request.stream, request.headers.get("Content-Length"), limit, too_large_key, invalid_json_key)
    return decode_off_hub(decode, body) if len(body) > _OFF_HUB_BYTES else decode(body)


def _json_object(
    body: bytes, invalid_json_key: str, not_object_key: str, decode: Callable[[bytes, str], Any]
) -> dict[str, Any]:
    value = decode(body, invalid_json_key)
    if not isinstance(value, dict):
        raise InvalidInput(not_object_key, field="")
    return value


def read_json_object(
    settings: Settings,
    limit: int,
    *,
    too_large_key: str,
    invalid_json_key: str,
    not_object_key: str,
    decode: Callable[[bytes, str], Any] = decode_json,
) -> dict[str, Any]:
    """The checks every protected JSON route makes before its own, in the order of docs/design.md#pre-stream-checks.

    The token was checked before the view (`web/auth.guard_request`); here the language of the answers
    (Accept-Language), the media type, the size limit while reading, JSON, and a top-level object.
    """
    g.agui_language = language_from_accept(request.headers.get("Accept-Language"), settings.default_language)
    return _read_body(
        limit,
        too_large_key,
        invalid_json_key,
        lambda body: _json_object(body, invalid_json_key, not_object_key, decode),
    )


def read_run_request(settings: Settings) -> RunRequest:
    """`POST /`'s body, read once: the checks of `read_json_object`, then, in the same off-hub step as the
    decoding, validation, the language of the answers and the request digest (`runs/request.py`)."""
    accept_language = request.headers.get("Accept-Language")
    g.agui_language = language_from_accept(accept_language, settings.default_language)

    def decode(body: bytes) -> RunRequest:
        raw = _json_object(body, MessageKey.INVALID_JSON, MessageKey.NOT_AN_OBJECT, decode_bounded_body)
        return validate_run_request(raw, accept_language, settings.default_language)

    run_request = _read_body(settings.max_request_bytes, MessageKey.REQUEST_TOO_LARGE, MessageKey.INVALID_JSON, decode)
    g.agui_language = run_request.language
    return run_request


#: The extensions' own messages for the three body checks (too large, invalid JSON, not an object).
_EXTENSION_KEYS: dict[str, tuple[MessageKey, MessageKey, MessageKey]] = {
    "cancel": (MessageKey.CANCEL_REQUEST_TOO_LARGE, MessageKey.CANCEL_INVALID_JSON, MessageKey.CANCEL_NOT_AN_OBJECT),
    "status": (MessageKey.STATUS_REQUEST_TOO_LARGE, MessageKey.STATUS_INVALID_JSON, MessageKey.STATUS_NOT_AN_OBJECT),
}


def read_extension_body(settings: Settings, route: Literal["cancel", "status"]) -> dict[str, object]:
    """The extensions' body: the 64 KiB limit and each route's own messages for the body checks
    (docs/design.md#pre-stream-checks; the status route follows the cancel route)."""
    too_large, invalid_json, not_object = _EXTENSION_KEYS[route]
    return read_json_object(
        settings,
        min(settings.max_request_bytes, settings.max_cancel_bytes),
        too_large_key=too_large,
        invalid_json_key=invalid_json,
        not_object_key=not_object,
    )
