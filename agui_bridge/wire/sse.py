"""Server-sent-event framing toward AG-UI clients: LF only, compact UTF-8 JSON
(docs/design.md#decision-balanced-spans-and-strict-framing)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

HEARTBEAT_FRAME = b": heartbeat\n\n"

SSE_RESPONSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),
)
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_event(event: Mapping[str, Any]) -> bytes:
    """One SSE frame (the emitter numbers and offers each one: docs/design.md#emitter)."""
    return b"data: " + _encoder.encode(event).encode("utf-8") + b"\n\n"


def encode_events(events: Iterable[Mapping[str, Any]]) -> bytes:
    """One buffer for a batch of events, so one upstream read becomes one socket write."""
    return b"".join(encode_event(e) for e in events)
