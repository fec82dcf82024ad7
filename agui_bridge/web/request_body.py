"""Reading and decoding a JSON body with the size limit applied while reading (docs/design.md#pre-stream-checks).

Two protections keep one request from holding the worker: the upload must keep a minimum pace
(`limits.UPLOAD_*`, enforced with a gevent timeout per read under gevent and checked after each
chunk everywhere), and the CPU-heavy part (JSON decoding and the bounds walk of `validation.bounds`)
runs in a small pool of native threads, so the hub keeps serving every other stream meanwhile.
"""

from __future__ import annotations

import json
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
from agui_bridge.validation.bounds import check_body_bounds, prescan_json_text
from agui_bridge.validation.run_input import prevalidate
from agui_bridge.web.auth import check_bearer
from agui_bridge.worker.runtime import OffHubPool, socket_is_patched

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
    """One read, cut off at `deadline` under gevent (a blocked socket read cannot be under threads)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise InvalidJson(SLOW_UPLOAD_KEY)
    if not socket_is_patched():
        return stream.read(_CHUNK)
    import gevent

    timer = gevent.Timeout(remaining)
    timer.start()
    try:
        return stream.read(_CHUNK)
    except gevent.Timeout as exc:
        if exc is not timer:
            raise
        raise InvalidJson(SLOW_UPLOAD_KEY) from None
    finally:
        timer.close()


#: Native threads that decode and validate large bodies, per worker process: a pool of its own, so hostile
#: bodies queue here and never in front of the hub's own threadpool (gevent's DNS resolution) or other
#: offloaded work; two threads at most, so they cannot take every core.
DECODE = OffHubPool(2, "agui-body-decode")


def off_hub(fn: Callable[..., _T], *args: Any) -> _T:
    """Run CPU-bound `fn` in a native thread (the hub keeps running); directly where gevent is not used."""
    return DECODE.run(fn, *args)


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
            _let_the_hub_run()
    return b"".join(chunks)


def _let_the_hub_run() -> None:
    """Under gevent, let every other ready greenlet run once (nothing to do with threads)."""
    if socket_is_patched():
        import gevent

        gevent.sleep(0)


def decode_json(body: bytes, invalid_key: str) -> Any:
    """Nesting beyond what the decoder can hold is the depth cap's INVALID_INPUT, not a parse error."""
    try:
        return json.loads(body)
    except RecursionError:
        raise InvalidInput(
            MessageKey.JSON_TOO_DEEP, field="", params={"field": "RunAgentInput", "max": str(limits.MAX_JSON_DEPTH)}
        ) from None
    except ValueError:
        raise InvalidJson(invalid_key) from None


def decode_bounded_body(body: bytes, invalid_key: str) -> Any:
    """Decode and check the caps (one CPU-bound step, run off the hub by `read_json_object`)."""
    prescan_json_text(body)
    value = decode_json(body, invalid_key)
    check_body_bounds(value)
    return value


def decode_run_body(body: bytes, invalid_key: str) -> Any:
    """POST /: decode, check the caps and validate the RunAgentInput in one off-hub step."""
    value = decode_bounded_body(body, invalid_key)
    return prevalidate(value) if isinstance(value, dict) else value


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

    Language from Accept-Language first (so even a 401 is localised), then auth, media type, the size
    limit while reading, JSON, and a top-level object.
    """
    g.agui_language = language_from_accept(request.headers.get("Accept-Language"), settings.default_language)
    check_bearer(request.headers.get("Authorization"), settings.auth_token)
    require_json_media_type(request.headers.get("Content-Type"))
    body = read_limited(request.stream, request.headers.get("Content-Length"), limit, too_large_key, invalid_json_key)
    value = off_hub(decode, body, invalid_json_key) if len(body) > _OFF_HUB_BYTES else decode(body, invalid_json_key)
    if not isinstance(value, dict):
        raise InvalidInput(not_object_key, field="")
    return value


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
