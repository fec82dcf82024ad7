"""Server-sent-event framing toward AG-UI clients: LF only, compact UTF-8 JSON
(docs/design.md#decision-balanced-spans-and-strict-framing).

Encoding is the per-event hot path: orjson writes the same compact UTF-8 bytes as the standard library
at a tenth of the cost (bench/results). A value orjson refuses (an integer beyond 64 bits, a non-string
key) falls back to the standard encoder, so nothing that encoded before fails now; a non-finite float,
which the standard encoder refused, becomes `null`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

#: The end of every frame the bridge writes (LF framing); a run record is a series of these frames.
FRAME_END = b"\n\n"
#: A comment line's start: a frame that begins with it is a comment, not an event.
COMMENT_PREFIX = b": "


def encode_comment(text: bytes) -> bytes:
    """One comment frame (`: <text>`): heartbeats, and a run record's header and truncation mark."""
    return COMMENT_PREFIX + text + FRAME_END


HEARTBEAT_FRAME = encode_comment(b"heartbeat")

SSE_RESPONSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),
)
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _json(event: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(event)
    except TypeError:  # orjson.JSONEncodeError: let the standard encoder decide (or raise as before)
        return _encoder.encode(event).encode("utf-8")


def encode_event(event: Mapping[str, Any]) -> bytes:
    """One SSE frame (the emitter numbers and offers each one: docs/design.md#emitter)."""
    return b"data: " + _json(event) + b"\n\n"


def encode_numbered(position: int, event: Mapping[str, Any]) -> bytes:
    """One SSE frame with its `id:` line (the event's position in its run, docs/design.md#emitter), made
    in one formatting step: this runs once per event shown."""
    return b"id: %d\ndata: %b\n\n" % (position, _json(event))


def encode_events(events: Iterable[Mapping[str, Any]]) -> bytes:
    """One buffer for a batch of events, so one upstream read becomes one socket write."""
    return b"".join(encode_event(e) for e in events)
