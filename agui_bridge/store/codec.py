"""The thread file's bytes: strict parsing and the one serialisation (docs/design.md#state-document).

Both use orjson where it gives the standard library's answer (several times faster on the hub), and the
standard library wherever orjson would differ.
"""

from __future__ import annotations

import json

import orjson

from agui_bridge.store.errors import StateCorrupt
from agui_bridge.store.model import ThreadState, to_document

__all__ = ["parse", "serialise"]


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-standard JSON constant {name}")


def parse(data: bytes) -> object:
    """Strict JSON of a thread file: orjson where it accepts the bytes (several times faster; it refuses NaN
    as we do), else the standard library decides, so a file is accepted or refused as before (an integer
    beyond 64 bits, which no thread file holds, becomes a float that `load_document` then refuses)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        parsed: object = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise StateCorrupt("thread file is not valid UTF-8 JSON") from None
    return parsed


def serialise(state: ThreadState) -> bytes:
    """UTF-8, 2-space indent, non-ASCII literal, NaN forbidden, trailing newline (8.2).

    orjson writes the same bytes as `json.dumps(indent=2, ensure_ascii=False)` for a thread document, 50 to 80
    times faster (the standard library has no C encoder for indented output: 36 us of the hub for a small
    document, 600 us for a full one); only a float, which can come only from the kernel's input values in
    `pending`, may be spelled differently (`1e-5`, not `1e-05`), the same number. orjson writes NaN as null, so
    `to_document` refuses it first; what orjson refuses (an integer beyond 64 bits, a lone surrogate) goes
    to the standard library, which decides as before.
    """
    doc = to_document(state)
    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        pass
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")
