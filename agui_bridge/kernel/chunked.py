"""HTTP/1.1 chunked transfer decoding of one response body, a network read at a time (pure).

The kernel sends one SSE record per HTTP chunk. Read through urllib3 chunk by chunk, every A2A event
paid a readline, a read, a generator step and a queue hand-over of its own; decoding whatever one
`read1` returned gives the stream one batch per network read instead
(docs/design.md#a2a-stream-batches). Framing errors raise `ChunkedError` (a ValueError).
"""

from __future__ import annotations

#: Longest chunk-size line accepted (the size, extensions and CRLF), as urllib3 allows.
MAX_SIZE_LINE = 1024


class ChunkedError(ValueError):
    """The body is not valid chunked framing (or ended before its last chunk)."""


class ChunkDecoder:
    """Feed raw body bytes, get the payload bytes they complete; `done` once the last chunk and the
    trailer section were read (what follows belongs to the next response on the connection)."""

    __slots__ = ("_buffer", "_crlf", "_left", "_trailer", "done")

    def __init__(self) -> None:
        self._buffer = b""
        self._left = 0  # payload bytes still due in the current chunk
        self._crlf = False  # the CRLF closing a chunk's payload is due
        self._trailer = False  # the last chunk was seen: trailer lines until an empty one
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer + data if self._buffer else data
        size = len(buffer)
        out: list[bytes] = []
        pos = 0
        while not self.done:
            left = self._left
            if left:
                end = min(pos + left, size)
                out.append(buffer[pos:end])
                self._left = left - (end - pos)
                pos = end
                if self._left:
                    break
                self._crlf = True
            if self._crlf:
                if size - pos < 2:
                    break
                if buffer[pos : pos + 2] != b"\r\n":
                    raise ChunkedError("chunk not followed by CRLF")
                pos += 2
                self._crlf = False
            line_end = buffer.find(b"\r\n", pos)
            if line_end < 0:
                if size - pos > MAX_SIZE_LINE:
                    raise ChunkedError("chunk size line too long")
                break
            line = buffer[pos:line_end]
            pos = line_end + 2
            if self._trailer:
                self.done = not line
                continue
            if len(line) + 2 > MAX_SIZE_LINE:  # with its CRLF, as urllib3 counts
                raise ChunkedError("chunk size line too long")
            try:
                length = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise ChunkedError("invalid chunk size") from None
            if length < 0:
                raise ChunkedError("invalid chunk size")
            if length == 0:
                self._trailer = True
            else:
                self._left = length
        self._buffer = buffer[pos:] if pos < size else b""
        if len(out) == 1:
            return out[0]
        return b"".join(out)

    @property
    def clean(self) -> bool:
        """The body ended and nothing followed it (so the connection may carry the next request)."""
        return self.done and not self._buffer

    def check_complete(self) -> None:
        """At the end of the connection: raise unless the body ended with its last chunk."""
        if not self.done:
            raise ChunkedError("the body ended before its last chunk")


__all__ = ["MAX_SIZE_LINE", "ChunkDecoder", "ChunkedError"]
