"""An open upstream SSE response: its events, one batch per network read.

`A2AClient.open_stream` sends the streaming call through the session's own urllib3 pool and hands the
response here (docs/design.md#a2a-stream-batches). A chunked, unencoded body (the kernel's) is read
from the buffered socket file urllib3 itself reads chunks from, with `read1`, and its chunk framing is
decoded by `kernel/chunked.py`, so everything one read returned becomes one batch; any other body goes
through urllib3's own `stream()`. Every failure of the read is an `A2ATransportError`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from http.client import HTTPException
from typing import Any

from urllib3.exceptions import HTTPError as Urllib3Error

from agui_bridge.a2a.errors import A2ATransportError
from agui_bridge.a2a.signals import A2AEvent, decode_message
from agui_bridge.kernel.chunked import ChunkDecoder, ChunkedError
from agui_bridge.protocol.sse_parser import SseParser

log = logging.getLogger(__name__)

#: Most bytes taken from the upstream socket by one read of a stream (one batch of events): about 16
#: kernel text deltas (~500 bytes each). The pump queues up to `queue_maxsize` reads ahead of a slow client;
#: with 64 KiB reads the thousands of decoded events this held outlived the young GC generations and
#: brought on full collections (docs/design.md#a2a-stream-batches).
STREAM_READ_SIZE = 8192


class A2AStream:
    """An open upstream SSE response (a urllib3 response); `batches()` yields the events of each network read."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._parser = SseParser()

    def batches(self) -> Iterator[list[A2AEvent]]:
        try:
            reads = _network_reads(self._raw)
            if reads is None:  # not a plain chunked body: urllib3 reads it (one chunk at a time)
                reads = self._raw.stream(None, decode_content=True)
            for data in reads:
                messages = self._parser.feed(data)
                if messages:
                    yield [decode_message(m) for m in messages]
            tail = self._parser.close()
            if tail:
                yield [decode_message(m) for m in tail]
        except (Urllib3Error, ChunkedError, HTTPException, OSError) as exc:
            raise A2ATransportError(f"A2A stream broke: {type(exc).__name__}") from exc

    def abort(self) -> None:
        """Wake a reader blocked in recv() from another thread, then close (docs/design.md#runtime-backends)."""
        try:
            sock = self._raw._connection.sock
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass  # no connection any more: the body was read to its end and the connection went back to the pool
        self.close()

    def close(self) -> None:
        """Close a body not read to its end (its connection cannot carry another request) and give the
        connection's pool slot back."""
        raw = self._raw
        try:
            if raw._connection is not None:
                raw.close()
            raw.release_conn()
        except Exception:
            log.debug("closing the A2A stream failed", exc_info=True)


def _network_reads(raw: Any) -> Iterator[bytes] | None:
    """The payload of a chunked, unencoded body, one socket read at a time; None for any other body."""
    original = getattr(raw, "_original_response", None)
    file = getattr(original, "fp", None)
    if (
        not getattr(raw, "chunked", False)
        or getattr(raw, "chunk_left", None) is not None
        or raw.headers.get("Content-Encoding")
        or not hasattr(file, "read1")
    ):
        return None
    return _read_chunked(raw, original, file)


def _read_chunked(raw: Any, original: Any, file: Any) -> Iterator[bytes]:
    decoder = ChunkDecoder()
    while not decoder.done:
        data = file.read1(STREAM_READ_SIZE)
        if not data:
            decoder.check_complete()  # raises: the connection ended inside the body
        payload = decoder.feed(data)
        if decoder.done:
            # The whole body was read: the connection goes back to the pool (as urllib3 does at a body's
            # end) before the last events are handed over, since their reader stops at an ending state.
            original.close()
            if decoder.clean:
                raw.release_conn()
        if payload:
            yield payload


__all__ = ["STREAM_READ_SIZE", "A2AStream"]
