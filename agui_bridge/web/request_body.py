"""Reading and decoding a JSON body with the size limit applied while reading (behaviour.md 1.4)."""

from __future__ import annotations

import json
from typing import IO, Any

from werkzeug.exceptions import ClientDisconnected

from agui_bridge.errors import InvalidJson, RequestTooLarge, UnsupportedMediaType

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
