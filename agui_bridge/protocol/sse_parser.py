"""The repository's one SSE reader (pure): the kernel's stream, the bridge's own, every client and test.

One reader, so the A2A pump, `agui-bridge chat`, the pytest plugin, the tests and the bench all agree on
what a stream says (docs/design.md#sse-reading). The kernel frames with CRLF (sse-starlette); the bridge
with LF; proxies may use lone CR. `event:` names are kept (for `event: error`), `id:` lines too (reattach
positions), several `data:` lines are joined with LF; comments (`: ping`, `: heartbeat`) are dropped by
`feed` and handed over by `feed_records`. Lines are split on bytes and only complete records are
decoded, so a multi-byte UTF-8 character split across two network reads is never broken. Strictness about
one producer's exact framing (the bridge's LF-only `data: <json>`) is the business of that producer's
checks, on top of these records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

import orjson

from agui_bridge.protocol.sse import FRAME_END


def decode_data(data: bytes) -> object:
    """JSON of a record's data: orjson (about 5x faster), and where it refuses (NaN, lone surrogates,
    numbers beyond a double) the standard library decides, so orjson's speed never narrows what is accepted.
    Raises ValueError."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


@dataclass(slots=True)
class SseMessage:
    """One SSE record; read-only by convention (not frozen: one is built per upstream event)."""

    event: str
    data: bytes
    #: The record's own `id:` line, raw (the kernel sends none; AG-UI clients of the bridge read them).
    event_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class SseComment:
    """One comment line (`: heartbeat` -> `b"heartbeat"`), for readers that count keep-alives."""

    text: bytes


#: What `feed_records` yields: the records and the comments, in stream order.
SseItem = SseMessage | SseComment


def _simple_records(buffer: bytes, messages: list[SseItem]) -> int:
    """Take the leading records of the kernel's own shape, `data: <one line>` CRLF CRLF, found with
    `bytes.find` instead of splitting lines (docs/design.md#a2a-stream-batches); return where the
    first other record, or the unfinished one, starts."""
    find = buffer.find
    pos = 0
    while True:
        end = find(b"\r\n\r\n", pos)
        if end < 0 or not buffer.startswith(b"data: ", pos) or find(b"\r", pos, end) >= 0 or find(b"\n", pos, end) >= 0:
            return pos
        messages.append(SseMessage("message", buffer[pos + 6 : end]))
        pos = end + 4


def _simple_partial(rest: bytes) -> bool:
    """`rest` can only be the start of a simple record (no line of it was complete and anything else)."""
    line = rest.rstrip(b"\r\n")
    if rest[len(line) :] not in (b"", b"\r", b"\r\n", b"\r\n\r"):
        return False
    if b"\r" in line or b"\n" in line:
        return False
    return line.startswith(b"data: ") or b"data: ".startswith(line)


class SseParser:
    """Incremental: feed it each network read as it comes; it keeps only an unfinished line or record."""

    __slots__ = ("_buffer", "_data", "_event", "_id")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = ""
        self._id: bytes | None = None

    def feed(self, chunk: bytes) -> list[SseMessage]:
        """The records completed by `chunk`; comments are dropped."""
        return cast("list[SseMessage]", self._feed(chunk, False))

    def feed_records(self, chunk: bytes) -> list[SseItem]:
        """The records and comment lines completed by `chunk`, in order."""
        return self._feed(chunk, True)

    def _feed(self, chunk: bytes, comments: bool) -> list[SseItem]:
        buffer = self._buffer + chunk if self._buffer else chunk
        self._buffer = b""
        messages: list[SseItem] = []
        if self._data or self._event or self._id is not None:
            return self._lines(buffer, messages, comments)
        pos = _simple_records(buffer, messages)
        rest = buffer[pos:] if pos else buffer
        if _simple_partial(rest):
            self._buffer = rest  # the start of the next simple record: parsed once it is complete
            return messages
        return self._lines(rest, messages, comments)

    def _lines(self, buffer: bytes, messages: list[SseItem], comments: bool) -> list[SseItem]:
        """The general parser: every field, every line ending; an unfinished line waits in the buffer."""
        if b"\r" not in buffer:
            lines = buffer.split(b"\n")
            self._buffer = lines.pop()
        elif buffer.count(b"\r") == buffer.count(b"\n") == buffer.count(b"\r\n"):
            lines = buffer.split(b"\r\n")
            self._buffer = lines.pop()
        else:
            lines = self._mixed_lines(buffer)
        data = self._data
        for line in lines:
            if not line:
                if data:
                    messages.append(SseMessage(self._event or "message", b"\n".join(data), self._id))
                    data = self._data = []
                self._event = ""
                self._id = None
            elif line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            elif line.startswith(b":"):
                if comments:
                    messages.append(SseComment(line[2:] if line.startswith(b": ") else line[1:]))
            elif line.startswith(b"event:"):
                self._event = line[6:].strip().decode("utf-8", "replace")
            elif line.startswith(b"id:"):
                self._id = line[3:].strip()
        return messages

    def _mixed_lines(self, buffer: bytes) -> list[bytes]:
        """Lines of a buffer framed with lone CRs or a mix of line ends; a trailing CR may start a CRLF."""
        keep_cr = buffer.endswith(b"\r")
        if keep_cr:
            buffer = buffer[:-1]
        lines = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        rest = lines.pop()
        self._buffer = rest + b"\r" if keep_cr else rest
        return lines

    def close(self) -> list[SseMessage]:
        """Flush a final record that the server did not terminate with a blank line."""
        return cast("list[SseMessage]", self._close(False))

    def close_records(self) -> list[SseItem]:
        """`close` for `feed_records`: a final unterminated record or comment line."""
        return self._close(True)

    def _close(self, comments: bool) -> list[SseItem]:
        tail = self._feed(b"\n\n", comments) if (self._buffer or self._data) else []
        self._buffer = b""
        return tail


def parse_body(body: bytes) -> list[SseMessage]:
    """The records of a whole response body (a final unterminated record included)."""
    parser = SseParser()
    return parser.feed(body) + parser.close()


def parse_body_records(body: bytes) -> list[SseItem]:
    """The records and comments of a whole response body, in order."""
    parser = SseParser()
    return parser.feed_records(body) + parser.close_records()


def iter_messages(chunks: Iterable[bytes]) -> Iterator[SseMessage]:
    """The records of a body read piece by piece, each as soon as it is complete: e.g. a requests
    streaming response's `iter_content(chunk_size=None)` (one piece per network read). A record the body
    ends in the middle of is dropped, as the SSE standard says (a client of the bridge reattaches for it)."""
    parser = SseParser()
    for chunk in chunks:
        yield from parser.feed(chunk)


def iter_records(chunks: Iterable[bytes]) -> Iterator[SseItem]:
    """`iter_messages` with the comment lines, for readers that watch heartbeats."""
    parser = SseParser()
    for chunk in chunks:
        yield from parser.feed_records(chunk)


# ---- the bridge's own framing, on byte offsets -----------------------------------------------------
# A run record holds the frames `protocol/sse.py` wrote (`id: <n>` LF `data: <json>` LF LF, and comment
# frames). Its readers cannot hand a 64 MiB file to `SseParser`: they read bounded chunks at chosen
# offsets and ask only where frames end and what a frame's first bytes say (docs/design.md#reattach).

_ID_FIELD = b"id: "
_DATA_FIELD = b"data: "
#: Where a numbered frame begins: the end of the frame before it, then its id line.
NUMBERED_FRAME_START = FRAME_END + _ID_FIELD


def next_frame_end(buffer: bytes | bytearray, start: int = 0, stop: int | None = None) -> int:
    """The offset just past the first whole frame ending within buffer[start:stop] (-1: none ends there)."""
    found = buffer.find(FRAME_END, start) if stop is None else buffer.find(FRAME_END, start, stop)
    return found + len(FRAME_END) if found >= 0 else -1


def last_frame_end(buffer: bytes | bytearray, start: int = 0, stop: int | None = None) -> int:
    """The offset just past the last whole frame ending within buffer[start:stop] (-1: none ends there)."""
    found = buffer.rfind(FRAME_END, start) if stop is None else buffer.rfind(FRAME_END, start, stop)
    return found + len(FRAME_END) if found >= 0 else -1


def frame_ends(buffer: bytes | bytearray) -> list[int]:
    """The offset just past each whole frame of `buffer`, in order (one call for a whole read: a follower
    runs this for every read of a live record)."""
    ends: list[int] = []
    find = buffer.find
    step = len(FRAME_END)
    found = find(FRAME_END)
    while found >= 0:
        found += step
        ends.append(found)
        found = find(FRAME_END, found)
    return ends


def resume_search_at(searched_to: int) -> int:
    """Where to search again for a frame end once `searched_to` bytes were searched without one: a frame
    end may straddle two reads, so the search backs up by all but one of its bytes."""
    return max(0, searched_to - (len(FRAME_END) - 1))


def is_comment_frame(frame: bytes | bytearray) -> bool:
    """Does this frame (or its first bytes) hold a comment rather than an event?"""
    return frame.startswith(b":")


def frame_id_and_data(frame: bytes) -> tuple[int, bytes]:
    """(id, data) of one of the bridge's numbered frames, whole or only its first bytes (the data is then
    cut short); (0, b"") for a comment or a frame without a numeric id. The bridge writes the id line first
    and one data line: that shape is read without splitting lines (a follower reads it once per frame it
    passes on); any other order is walked line by line."""
    if frame.startswith(b"id: "):
        line_end = frame.find(b"\n")
        try:
            position = int(frame[4:line_end] if line_end >= 0 else frame[4:])
        except ValueError:
            return 0, b""
        if position <= 0:
            return 0, b""
        if line_end >= 0 and frame.startswith(b"data: ", line_end + 1):
            data_end = frame.find(b"\n", line_end + 7)
            return position, frame[line_end + 7 : data_end] if data_end >= 0 else frame[line_end + 7 :]
    position, data = 0, b""
    for line in frame.split(b"\n"):
        if line.startswith(_ID_FIELD):
            try:
                position = int(line[len(_ID_FIELD) :])
            except ValueError:
                position = 0
        elif line.startswith(_DATA_FIELD) and not data:
            data = line[len(_DATA_FIELD) :]
    return (position, data) if position > 0 else (0, b"")


def next_numbered_frame(buffer: bytes | bytearray, start: int = 0, stop: int | None = None) -> int:
    """The offset of the first numbered frame that starts after a frame end, the frame end and the frame's
    id field both within buffer[start:stop] (-1: none)."""
    found = buffer.find(NUMBERED_FRAME_START, start, len(buffer) if stop is None else stop)
    return found + len(FRAME_END) if found >= 0 else -1


def last_numbered_frame(buffer: bytes | bytearray, start: int = 0, stop: int | None = None) -> int:
    """`next_numbered_frame`, the last one."""
    found = buffer.rfind(NUMBERED_FRAME_START, start, len(buffer) if stop is None else stop)
    return found + len(FRAME_END) if found >= 0 else -1
