"""The user message of a new run -> A2A 1.0 message parts (docs/design.md#message-content,
docs/design.md#decision-images-validated-passed-through).

These checks run *in-stream* (after RUN_STARTED): every failure is ``InvalidInput(<key>)`` that the
run turns into ``RUN_ERROR(INVALID_INPUT)``. Images are validated, never re-encoded: strict base64,
a supported declared media type that matches the decoded bytes' signature, 8 MiB per image and
10 MiB per message; the bytes are passed on exactly as received and the kernel decides about resizing.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Final

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.message_keys import MessageKey

__all__ = [
    "ALLOWED_IMAGE_TYPES",
    "MAX_IMAGE_BYTES",
    "MAX_TOTAL_IMAGE_BYTES",
    "detect_image_type",
    "is_safe_filename",
    "user_message_parts",
]

MIB: Final = 1024 * 1024
MAX_IMAGE_BYTES: Final = 8 * MIB
MAX_TOTAL_IMAGE_BYTES: Final = 10 * MIB
MAX_FILENAME_BYTES: Final = 255
ALLOWED_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_FORBIDDEN_FILENAME_CHARS: Final = frozenset('<>:"/\\|?*')
_RESERVED_DEVICE_NAMES: Final = frozenset(
    {"CON", "PRN", "AUX", "NUL"} | {f"COM{i}" for i in range(1, 10)} | {f"LPT{i}" for i in range(1, 10)}
)


def detect_image_type(data: bytes) -> str | None:
    """Media type from the magic signature (PNG, JPEG, GIF, WEBP), else None. No decoding."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and data[12:16] in (b"VP8 ", b"VP8L", b"VP8X"):
        return "image/webp"
    return None


def is_safe_filename(name: object) -> bool:
    """True if ``name`` is already a safe basename that a sanitiser would leave unchanged.

    See docs/design.md#message-content.
    """
    if not isinstance(name, str) or not name or name in {".", ".."}:
        return False
    if len(name.encode("utf-8", errors="surrogatepass")) > MAX_FILENAME_BYTES:
        return False
    if name != name.strip() or name.endswith("."):
        return False
    if any(c in _FORBIDDEN_FILENAME_CHARS or ord(c) < 32 or ord(c) == 127 for c in name):
        return False
    return name.split(".", 1)[0].rstrip().upper() not in _RESERVED_DEVICE_NAMES


def _decode_base64(value: object) -> bytes:
    """Strict: ASCII alphabet and padding only, length a multiple of 4, no whitespace."""
    if not isinstance(value, str) or len(value) % 4 or _BASE64.fullmatch(value) is None:
        raise InvalidInput(MessageKey.IMAGE_BASE64)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(MessageKey.IMAGE_BASE64) from None


def _get(obj: Mapping[str, object], camel: str, snake: str) -> object:
    return obj[camel] if camel in obj else obj.get(snake)


def _image_part(part: Mapping[str, object], index: int, total: list[int]) -> dict[str, object]:
    source = part.get("source")
    if not isinstance(source, Mapping):
        raise InvalidInput(MessageKey.USER_CONTENT_INVALID)
    source_type = source.get("type")
    if source_type == "url":
        raise InvalidInput(MessageKey.REMOTE_MEDIA)
    if source_type != "data":
        raise InvalidInput(MessageKey.UNSUPPORTED_CONTENT)
    declared = _get(source, "mimeType", "mime_type")
    media_type = declared.strip().lower() if isinstance(declared, str) else ""
    if media_type not in ALLOWED_IMAGE_TYPES:
        raise InvalidInput(MessageKey.IMAGE_MEDIA_TYPE)
    value = source.get("value")
    data = _decode_base64(value)
    if len(data) > MAX_IMAGE_BYTES:
        raise InvalidInput(MessageKey.IMAGE_TOO_LARGE)
    total[0] += len(data)
    if total[0] > MAX_TOTAL_IMAGE_BYTES:
        raise InvalidInput(MessageKey.IMAGES_TOO_LARGE)
    if detect_image_type(data) != media_type:
        raise InvalidInput(MessageKey.IMAGE_INVALID)
    metadata = part.get("metadata")
    filename = metadata.get("filename") if isinstance(metadata, Mapping) else None
    if not is_safe_filename(filename):
        filename = f"agui-image-{index}"
    return {"data": {"filename": filename, "bytes": value}, "mediaType": media_type}


def user_message_parts(messages: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """A2A parts of the LAST ``role: "user"`` message; earlier ones and other roles are ignored."""
    user = next((m for m in reversed(messages) if isinstance(m, Mapping) and m.get("role") == "user"), None)
    if user is None:
        raise InvalidInput(MessageKey.NEW_RUN_REQUIRES_USER_MESSAGE)
    content = user.get("content")
    if isinstance(content, str):
        return [{"text": content}]
    if not isinstance(content, list):
        raise InvalidInput(MessageKey.USER_CONTENT_INVALID)
    parts: list[dict[str, object]] = []
    total = [0]
    for part in content:
        if not isinstance(part, Mapping):
            raise InvalidInput(MessageKey.USER_CONTENT_INVALID)
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidInput(MessageKey.USER_CONTENT_INVALID)
            parts.append({"text": text})
        elif kind == "image":
            parts.append(_image_part(part, len(parts) + 1, total))
        else:
            raise InvalidInput(MessageKey.UNSUPPORTED_CONTENT)
    return parts
