"""An open upstream SSE response: its events, one batch per network read.

`A2AClient.open_stream` sends the streaming call on a connection of the client's own keep-alive set and
hands the response here once its head is read (docs/design.md#a2a-stream-batches). Each `recv` of at
most `STREAM_READ_SIZE` bytes goes through the HTTP parser (`kernel/exchange.py`), and the payload of
that read is parsed as SSE into one batch. A body read to its end gives its connection back to the
client. Every failure of the read is an `A2ATransportError`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator

from agui_bridge.a2a.errors import A2ATransportError
from agui_bridge.a2a.signals import A2AEvent, decode_message
from agui_bridge.kernel.exchange import EXCHANGE_ERRORS, Response
from agui_bridge.protocol.sse_parser import SseParser

log = logging.getLogger(__name__)

#: Most bytes taken from the upstream socket by one read of a stream (one batch of events): about 16
#: kernel text deltas (~500 bytes each). The pump queues up to `queue_maxsize` reads ahead of a slow client;
#: with 64 KiB reads the thousands of decoded events this held outlived the young GC generations and
#: brought on full collections (docs/design.md#a2a-stream-batches).
STREAM_READ_SIZE = 8192
#: Most bytes of one SSE record (the parser keeps an unfinished one): the kernel's largest, the final
#: full-text echo of a turn, stays far below it.
MAX_RECORD_BYTES = 16 * 1024 * 1024


class A2AStream:
    """An open upstream SSE response; `batches()` yields the events of each network read."""

    def __init__(self, response: Response, sock: socket.socket, release: Callable[[socket.socket], None]) -> None:
        self._response = response
        self._release = release
        self._sock: socket.socket | None = sock  # None once closed or given back
        self._lock = threading.Lock()  # abort (another thread) against the reader giving the socket back
        self._parser = SseParser()

    def batches(self) -> Iterator[list[A2AEvent]]:
        response = self._response
        pending = 0  # bytes fed since the last record came out
        try:
            while True:
                data = response.read()
                if response.done:
                    # The whole body was read: the connection goes back (before the last events are handed
                    # over, since their reader stops at an ending state).
                    self._give_back()
                if data:
                    messages = self._parser.feed(data)
                    if messages:
                        pending = 0
                        yield [decode_message(m) for m in messages]
                        # Nothing of a batch handed over stays referenced while the next read waits: a held
                        # stream's last batch would outlive its use (docs/design.md#stream-memory).
                        del data, messages
                    else:
                        pending += len(data)
                        if pending > MAX_RECORD_BYTES:
                            raise A2ATransportError("A2A stream broke: an SSE record without end")
                if response.done:
                    break
            tail = self._parser.close()
            if tail:
                yield [decode_message(m) for m in tail]
        except EXCHANGE_ERRORS as exc:
            raise A2ATransportError(f"A2A stream broke: {type(exc).__name__}") from exc

    def _give_back(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._response.clean:
            self._release(sock)
        else:
            sock.close()

    def abort(self) -> None:
        """Wake a reader blocked in recv() from another thread, then close (docs/design.md#runtime-backends)."""
        with self._lock:
            sock = self._sock
            if sock is not None:
                with contextlib.suppress(OSError):  # the peer is gone already
                    sock.shutdown(socket.SHUT_RDWR)
        self.close()

    def close(self) -> None:
        """Close a connection whose body was not read to its end (it cannot carry another request)."""
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                log.debug("closing the A2A stream failed", exc_info=True)


__all__ = ["MAX_RECORD_BYTES", "STREAM_READ_SIZE", "A2AStream"]
