"""Reading a streamed response in tests: its byte chunks as they arrive and the AG-UI events in them.

Every parse goes through the package's one SSE reader (`agui_bridge.protocol.sse_parser`); nothing in
the tests splits SSE by hand.
"""

from __future__ import annotations

from collections.abc import Iterator

from werkzeug.test import TestResponse


def response_chunks(response: TestResponse) -> Iterator[bytes]:
    """The body of a streamed test-client response (`buffered=False`), chunk by chunk as the app yields it."""
    for chunk in response.response:
        yield chunk if isinstance(chunk, bytes) else chunk.encode()
