"""Reading a streamed response in tests: its byte chunks as they arrive and the AG-UI events in them.

Every parse goes through the package's one SSE reader (`agui_bridge.protocol.sse_parser`); nothing in
the tests splits SSE by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from werkzeug.test import TestResponse

from agui_bridge.protocol.sse_parser import SseParser


def response_chunks(response: TestResponse) -> Iterator[bytes]:
    """The body of a streamed test-client response (`buffered=False`), chunk by chunk as the app yields it."""
    for chunk in response.response:
        yield chunk if isinstance(chunk, bytes) else chunk.encode()


class SseEvents:
    """The AG-UI events of a stream fed chunk by chunk: each `feed` returns the events it completed."""

    def __init__(self) -> None:
        self._parser = SseParser()
        self.raw = b""
        self.events: list[dict[str, Any]] = []

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self.raw += chunk
        completed: list[dict[str, Any]] = [json.loads(message.data) for message in self._parser.feed(chunk)]
        self.events.extend(completed)
        return completed
