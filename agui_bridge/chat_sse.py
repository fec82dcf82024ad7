"""The SSE side of `agui-bridge chat`: records with their `id:`, decoded into AG-UI events (pure).

The bridge numbers every event of a run (`id: <n>`, 1 for RUN_STARTED) so a client can reattach after
a dropped connection and drop what it has already seen (README "Reattaching to a run"). The A2A parser
in `agui_bridge.a2a` has no use for ids, so the terminal client keeps this small one of its own. Lines
are split on bytes and only complete records are decoded (a UTF-8 character split across two reads is
never broken); LF, CRLF and lone CR line ends are accepted; comments (heartbeats) are dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests

#: an id longer than this is not a position in a run's stream (bounds what a server can make us parse)
MAX_ID_DIGITS = 18
TERMINAL_EVENTS = frozenset({"RUN_FINISHED", "RUN_ERROR"})


class ChatUsageError(Exception):
    """A bad option or an HTTP-level failure: one line on stderr, exit status 2."""


@dataclass(frozen=True, slots=True)
class SseRecord:
    event_id: int | None  # None when the record carries no id (or one that is not a position)
    data: bytes


def parse_event_id(raw: bytes) -> int | None:
    """`b"12"` -> 12; anything that is not a positive decimal position -> None."""
    text = raw.strip()
    if not text or len(text) > MAX_ID_DIGITS or not text.isdigit():
        return None
    value = int(text)
    return value if value > 0 else None


class IdSseParser:
    """Incremental SSE parser that keeps each record's `id:` (the last one given in the record)."""

    __slots__ = ("_buffer", "_data", "_id")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._id: int | None = None

    def feed(self, chunk: bytes) -> list[SseRecord]:
        buffer = self._buffer + chunk
        keep_cr = buffer.endswith(b"\r")
        if keep_cr:
            buffer = buffer[:-1]
        buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        rest = lines.pop()
        self._buffer = rest + b"\r" if keep_cr else rest
        records: list[SseRecord] = []
        for line in lines:
            if not line:
                if self._data:
                    records.append(SseRecord(self._id, b"\n".join(self._data)))
                self._data = []
                self._id = None
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
            elif line.startswith(b"id:"):
                self._id = parse_event_id(line[3:])
        return records

    def close(self) -> list[SseRecord]:
        """Records still buffered when the body ends. A record cut mid-way (no blank line yet) is
        dropped: a reattach replays it whole."""
        self._buffer = b""
        self._data = []
        self._id = None
        return []


def decode_event(data: bytes) -> dict[str, Any]:
    """One AG-UI event from a record's data, or ChatUsageError."""
    try:
        event = json.loads(data)
    except ValueError:
        raise ChatUsageError("the server sent an event that is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ChatUsageError("the server sent an event without a type")
    return event


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe_http_error(response: requests.Response) -> str:
    """`HTTP 404 RUN_NOT_FOUND: ...` from the bridge's JSON error envelope, or the status and a preview."""
    try:
        error = response.json()["error"]
        return f"HTTP {response.status_code} {error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {one_line(response.text, 200)}"
