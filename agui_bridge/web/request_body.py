"""Reading and decoding a JSON body with the size limit applied while reading (behaviour.md 1.4)."""

from __future__ import annotations

import json
from typing import IO, Any

from flask import g, request
from werkzeug.exceptions import ClientDisconnected

from agui_bridge.errors import InvalidInput, InvalidJson, RequestTooLarge, UnsupportedMediaType
from agui_bridge.i18n import language_from_accept
from agui_bridge.settings import Settings
from agui_bridge.web.auth import check_bearer

_CHUNK = 64 * 1024


def require_json_media_type(content_type: str | None) -> None:
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType()


def read_limited(
    stream: IO[bytes], content_length: str | None, limit: int, too_large_key: str, truncated_key: str = "invalid_json"
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
    while True:
        try:
            chunk = stream.read(_CHUNK)
        except ClientDisconnected:
            raise InvalidJson(truncated_key) from None
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise RequestTooLarge(too_large_key)
        chunks.append(chunk)
    return b"".join(chunks)


def decode_json(body: bytes, invalid_key: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidJson(invalid_key) from None


def read_json_object(
    settings: Settings, limit: int, *, too_large_key: str, invalid_json_key: str, not_object_key: str
) -> dict[str, Any]:
    """The checks every protected JSON route makes before its own, in the order of behaviour.md 1.4.

    Language from Accept-Language first (so even a 401 is localised), then auth, media type, the size
    limit while reading, JSON, and a top-level object.
    """
    g.agui_language = language_from_accept(request.headers.get("Accept-Language"), settings.default_language)
    check_bearer(request.headers.get("Authorization"), settings.auth_token)
    require_json_media_type(request.headers.get("Content-Type"))
    body = read_limited(request.stream, request.headers.get("Content-Length"), limit, too_large_key, invalid_json_key)
    value = decode_json(body, invalid_json_key)
    if not isinstance(value, dict):
        raise InvalidInput(not_object_key, field="")
    return value


def read_extension_body(settings: Settings, route: str) -> dict[str, object]:
    """The extensions' body: the 64 KiB limit and `<route>_request_too_large`/`_invalid_json`/
    `_not_an_object` messages (behaviour.md 7; the status route follows the cancel route)."""
    return read_json_object(
        settings,
        min(settings.max_request_bytes, settings.max_cancel_bytes),
        too_large_key=f"{route}_request_too_large",
        invalid_json_key=f"{route}_invalid_json",
        not_object_key=f"{route}_not_an_object",
    )
