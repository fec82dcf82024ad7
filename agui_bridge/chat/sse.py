"""The SSE side of `agui-bridge chat`: record ids as positions, records decoded into AG-UI events (pure).

The bridge numbers every event of a run (`id: <n>`, 1 for RUN_STARTED) so a client can reattach after
a dropped connection and drop what it has already seen (docs/reattach.md#reattaching-from-a-client). The repository's
one SSE reader, `agui_bridge.protocol.sse_parser`, does the framing (LF, CRLF and lone CR line ends,
comments such as heartbeats dropped, only complete records decoded) and hands each record's `id:` over;
here it becomes a position.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests

#: an id longer than this is not a position in a run's stream (bounds what a server can make us parse)
MAX_ID_DIGITS = 18
TERMINAL_EVENTS = frozenset({"RUN_FINISHED", "RUN_ERROR"})


class ChatUsageError(Exception):
    """A bad option or an HTTP-level failure: one line on stderr, exit status 2."""


def parse_event_id(raw: bytes) -> int | None:
    """`b"12"` -> 12; anything that is not a positive decimal position -> None."""
    text = raw.strip()
    if not text or len(text) > MAX_ID_DIGITS or not text.isdigit():
        return None
    value = int(text)
    return value if value > 0 else None


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
