"""Any worker's side of a run record (docs/design.md#reattach): following it, announcing a reader, sealing it.

`RecordReader` parses the record incrementally while the owner appends; `ReaderMarker` is a follower's
presence (a file touched every second) and `readers_present` what the owner counts; `seal_orphan` ends a
record whose owner died without writing its terminal frame.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from agui_bridge.protocol.sse import FRAME_END
from agui_bridge.protocol.sse_parser import (
    NUMBERED_FRAME_START,
    frame_ends,
    frame_id_and_data,
    is_comment_frame,
    last_frame_end,
    last_numbered_frame,
    next_frame_end,
    next_numbered_frame,
    resume_search_at,
)
from agui_bridge.reattach.format import (
    HEADER_PREFIX,
    MAX_HEADER_BYTES,
    TERMINAL_TYPES,
    TRUNCATED_FRAME,
    RecordHead,
    parse_head,
)

log = logging.getLogger(__name__)

#: A reader marker touched within this many seconds counts as a reader present.
READER_FRESH_S = 3.0
#: Every read of a record past its header is at most this many bytes: scans and the backlog go in
#: chunks, so a reattach holds no more of a 64 MiB record than this (docs/design.md#reattach).
CHUNK_BYTES = 64 * 1024
#: Enough of a frame's beginning for its id and event type (its id line and the start of its data line).
_FRAME_PREFIX_BYTES = 96


@dataclass
class Frame:
    position: int
    type: str
    data: bytes


@dataclass
class RecordReader:
    """Parses the record incrementally: `poll` returns the whole frames appended since the last call."""

    path: Path
    head: RecordHead | None = None
    truncated: bool = False
    finished: bool = False
    last_position: int = 0
    #: The last poll stopped at `max_chunks` with more to read.
    behind: bool = False
    #: A frame still being written: appended to in place, and searched for its end only where it grew (a
    #: frame larger than a read would otherwise be copied and rescanned on every poll).
    _pending: bytearray = field(default_factory=bytearray, repr=False)
    _searched: int = 0
    _handle: BinaryIO | None = field(default=None, repr=False)
    #: `forward`'s state: the next byte not yet given out (a frame's start unless a whole frame is being
    #: streamed), how far a frame larger than a read was searched for its end, and that frame's end.
    _offset: int = 0
    _scanned: int | None = None
    _frame_end: int | None = None
    _pending_facts: tuple[int, str, bool] = (0, "", False)  # (id, type, `: truncated`) of the frame at _offset

    @classmethod
    def resume(cls, path: Path, probe: HeadProbe, tail: RecordTail) -> RecordReader:
        """A reader that continues after `tail.complete_end` on the probe's descriptor (what precedes it
        was checked by the tail scan and is served as raw chunks, docs/design.md#reattach)."""
        assert probe.fd is not None
        handle = open(probe.fd, "rb", closefd=True)  # noqa: SIM115 - kept open across polls, see close()
        handle.seek(tail.complete_end)
        return cls(
            path, head=probe.head, truncated=tail.truncated, finished=tail.finished,
            last_position=tail.last_position, _handle=handle, _offset=tail.complete_end,
        )  # fmt: skip

    def forward(self, max_read: int = CHUNK_BYTES) -> bytes:
        """The next raw bytes of whole frames appended to the record (b"": none yet), with one read of at
        most `max_read`: the live path of a follower (docs/design.md#reattach). Only a frame's first bytes
        are parsed (its id and type: `finished`, `truncated`, `last_position` change once its last byte is
        given out); a frame larger than a read is searched for its end one read per call, then given out
        in reads of `max_read`, so nothing here holds more than one read whatever the frame's size.
        `behind` says whether more may be waiting now. A frame still being written is not given out."""
        self.behind = False
        try:
            if self._handle is None:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, see close()
            fd = self._handle.fileno()
            if self._frame_end is not None:
                return self._stream_frame(fd, max_read)
            if self._scanned is not None:
                self._search_frame_end(fd, max_read)
                return b""
            chunk = os.pread(fd, max_read, self._offset)
        except OSError:
            return b""
        if not chunk:
            return b""
        ends = frame_ends(chunk)
        if not ends:  # one frame, larger than this read or still being written
            self._scanned = self._offset + len(chunk)
            self.behind = len(chunk) == max_read
            return b""
        whole = chunk[: ends[-1]]
        start = 0
        for end in ends:
            self._pending_facts = self._facts_of(whole[start : min(end, start + MAX_HEADER_BYTES)])
            self._frame_done()
            start = end
        self._offset += len(whole)
        self.behind = len(chunk) == max_read
        return whole

    def _search_frame_end(self, fd: int, max_read: int) -> None:
        """One read further into a large frame: its end found, it is streamed from the next call on."""
        assert self._scanned is not None
        look_from = max(self._offset, resume_search_at(self._scanned))  # a frame end split across two reads
        chunk = os.pread(fd, max_read, look_from)
        found = next_frame_end(chunk)
        if found >= 0:
            self._frame_end = look_from + found
            self._scanned = None
            prefix = os.pread(fd, min(MAX_HEADER_BYTES, self._frame_end - self._offset), self._offset)
            self._pending_facts = self._facts_of(prefix)  # read now: its first read may have been partial
            self.behind = True
            return
        self._scanned = look_from + len(chunk) if chunk else self._scanned
        self.behind = len(chunk) == max_read

    def _stream_frame(self, fd: int, max_read: int) -> bytes:
        assert self._frame_end is not None
        piece = os.pread(fd, min(max_read, self._frame_end - self._offset), self._offset)
        if not piece:
            return b""  # cannot happen to an append-only file; never spin on it
        self._offset += len(piece)
        if self._offset >= self._frame_end:
            self._frame_end = None
            self._frame_done()
        self.behind = True
        return piece

    def _facts_of(self, prefix: bytes) -> tuple[int, str, bool]:
        """(id, type, truncated) of the frame starting with `prefix` (the header is parsed here too)."""
        if is_comment_frame(prefix):
            if self.head is None and prefix.startswith(HEADER_PREFIX):
                end = next_frame_end(prefix)
                self.head = parse_head(prefix[:end]) if end >= 0 else None
            return 0, "", prefix.startswith(TRUNCATED_FRAME)
        position, data = frame_id_and_data(prefix[:_FRAME_PREFIX_BYTES])
        return position, _event_type(data) if position > 0 else "", False

    def _frame_done(self) -> None:
        """The frame at the old offset was given out whole: what it says now holds."""
        position, event_type, truncated = self._pending_facts
        self._pending_facts = (0, "", False)
        if truncated:
            self.truncated = True
        if position > 0:
            self.last_position = position
            if event_type in TERMINAL_TYPES:
                self.finished = True

    def poll(self, max_read: int = 1 << 20, max_chunks: int | None = None) -> list[Frame]:
        """Read what was appended since the last poll, parsed into frames (the file stays open between polls,
        and a record removed by retention meanwhile is still read to its end). With `max_chunks`, at most
        that many reads of `max_read` (`behind` says whether more is waiting). A frame is held until whole,
        so this holds up to the largest frame: for inspecting records (tests, tools); a follower uses
        `forward`. Never mix the two on one reader."""
        frames: list[Frame] = []
        self.behind = False
        reads = 0
        try:
            if self._handle is None:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, see close()
            while True:
                chunk = self._handle.read(max_read)
                if not chunk:
                    break
                reads += 1
                self._pending += chunk
                self._parse(frames)
                if len(chunk) < max_read:
                    break
                if max_chunks is not None and reads >= max_chunks:
                    self.behind = True
                    break
        except OSError:
            return frames
        return frames

    def fileno(self) -> int:
        """The open record's descriptor (`resume` opens it; for positional reads of the backlog)."""
        assert self._handle is not None
        return self._handle.fileno()

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
            self._handle = None

    def _parse(self, out: list[Frame]) -> None:
        buffer = self._pending
        start = 0
        search_from = resume_search_at(self._searched)
        while True:
            end = next_frame_end(buffer, search_from)
            if end < 0:
                break
            block = bytes(buffer[start:end])
            start = search_from = end
            self._block(block, out)
        if start:
            del buffer[:start]
        self._searched = len(buffer)

    def _block(self, block: bytes, out: list[Frame]) -> None:
        if is_comment_frame(block):
            if self.head is None and block.startswith(HEADER_PREFIX):
                self.head = parse_head(block[:MAX_HEADER_BYTES])
            elif block == TRUNCATED_FRAME:
                self.truncated = True
            return
        position, data = frame_id_and_data(block)
        if position <= 0:
            return
        event_type = _event_type(data)
        self.last_position = position
        if event_type in TERMINAL_TYPES:
            self.finished = True
        out.append(Frame(position, event_type, block))


_TYPE_PREFIX = b'{"type":"'


def _event_type(data: bytes) -> str:
    """The event's `type` without decoding the whole event: the bridge writes `type` first (a replay of a
    long run reads every frame, on the hub); anything else is decoded."""
    if data.startswith(_TYPE_PREFIX):
        end = data.find(b'"', len(_TYPE_PREFIX))
        if end > 0:
            return data[len(_TYPE_PREFIX) : end].decode("ascii", "replace")
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(data).get("type", ""))
    return ""


@dataclass(frozen=True)
class HeadProbe:
    """A record's header read with one bounded read; `fd` stays open for the rest of the reattach."""

    head: RecordHead | None
    fd: int | None
    frames_start: int  # the offset just past the header


def probe_head(path: Path) -> HeadProbe:
    """Open a record and read its header only: one `open` and one read of `MAX_HEADER_BYTES` at most,
    whatever the record's size (docs/design.md#reattach)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return HeadProbe(None, None, 0)
    try:
        block = os.pread(fd, MAX_HEADER_BYTES, 0)
    except OSError:
        os.close(fd)
        return HeadProbe(None, None, 0)
    end = next_frame_end(block)
    head = parse_head(block[:end]) if end >= 0 else None
    if head is None:
        os.close(fd)
        return HeadProbe(None, None, 0)
    return HeadProbe(head, fd, end)


@dataclass(frozen=True)
class RecordTail:
    """What a reattach decides on, found at the end of the record without parsing what precedes it."""

    complete_end: int  # the offset just past the last whole frame
    last_position: int  # its event id (0: no frame yet)
    finished: bool
    truncated: bool


def _rfind_in_file(fd: int, needle: bytes, low: int, high: int) -> int:
    """The last offset of `needle` within [low, high), read backwards in bounded chunks (-1: none)."""
    overlap = len(needle) - 1
    end = high
    while end - low >= len(needle):
        start = max(low, end - CHUNK_BYTES)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(needle)
        if found >= 0:
            return start + found
        if start == low:
            return -1
        end = start + overlap
    return -1


def _frame_facts(prefix: bytes) -> tuple[int, str]:
    """(event id, event type) from the first bytes of a frame; (0, "") for a comment."""
    position, data = frame_id_and_data(prefix)
    return (position, _event_type(data)) if position > 0 else (0, "")


def scan_tail(fd: int, frames_start: int) -> RecordTail:
    """The record's last whole frame, found by reading backwards from the end in bounded chunks: the last
    chunk is read once and serves every look that falls inside it, so a record whose last frame fits one
    chunk costs one read. Blocking file work: call it off the hub."""
    size = os.fstat(fd).st_size
    window_start = max(0, size - CHUNK_BYTES)
    window = os.pread(fd, size - window_start, window_start)

    def last_end_within(low: int, high: int) -> int:
        """Just past the last frame end lying within [low, high) (-1: none): from the window when it is
        there, else read backwards."""
        inside = max(low, window_start)
        if high - inside >= len(FRAME_END):
            found = last_frame_end(window, inside - window_start, high - window_start)
            if found >= 0:
                return window_start + found
        if low >= window_start:
            return -1
        found = _rfind_in_file(fd, FRAME_END, low, min(high, window_start + len(FRAME_END) - 1))
        return found + len(FRAME_END) if found >= 0 else -1

    complete_end = last_end_within(frames_start, size)
    if complete_end < 0:
        return RecordTail(frames_start, 0, False, False)
    # the frame before the last one ends within [the header's frame end, the last frame's end)
    previous_end = last_end_within(max(0, frames_start - len(FRAME_END)), complete_end - len(FRAME_END))
    block_start = previous_end if previous_end >= 0 else frames_start
    prefix_size = min(_FRAME_PREFIX_BYTES, complete_end - block_start)
    if block_start >= window_start:
        prefix = window[block_start - window_start : block_start - window_start + prefix_size]
    else:
        prefix = os.pread(fd, prefix_size, block_start)
    if is_comment_frame(prefix):
        truncated = prefix == TRUNCATED_FRAME
        return RecordTail(complete_end, 0, False, truncated)
    position, event_type = _frame_facts(prefix)
    return RecordTail(complete_end, position, event_type in TERMINAL_TYPES, False)


def find_frame_after(fd: int, frames_start: int, complete_end: int, cursor: int) -> int:
    """The offset of the first frame whose id is above `cursor` (`complete_end`: none). Ids only grow, so
    a chunk whose last frame is at or below the cursor is skipped whole; read in bounded chunks, forwards.
    Blocking file work: call it off the hub."""
    margin = _FRAME_PREFIX_BYTES
    offset = max(0, frames_start - len(FRAME_END))  # the header's own frame end precedes the first frame
    while offset < complete_end:
        chunk = os.pread(fd, min(CHUNK_BYTES, complete_end - offset) + margin, offset)
        scan_end = min(CHUNK_BYTES, complete_end - offset)
        search_end = min(len(chunk), scan_end + len(NUMBERED_FRAME_START) - 1)  # starts that begin in this chunk
        last = last_numbered_frame(chunk, 0, search_end)
        if last >= 0 and _frame_facts(chunk[last : last + margin])[0] > cursor:
            found = next_numbered_frame(chunk, 0, search_end)
            while found >= 0:
                if _frame_facts(chunk[found : found + margin])[0] > cursor:
                    return offset + found
                found = next_numbered_frame(chunk, found, search_end)
        offset += scan_end
    return complete_end


def read_tombstone(path: Path) -> RecordHead | None:
    try:
        with open(path, "rb") as handle:
            return parse_head(handle.read(MAX_HEADER_BYTES))
    except OSError:
        return None


class SealOutcome(enum.Enum):
    SEALED = "sealed"
    BUSY = "busy"  # another process holds the record's lock: try again shortly
    LEFT = "left"  # ended already, half written, or gone: nothing to append


def seal_orphan(path: Path, build_terminal: Callable[[int], bytes]) -> SealOutcome:
    """Append the terminal frame to a record whose owner died without writing one (once, under a lock).

    Blocking file work (the tail scan may read backwards through a large last frame): the follower calls
    it in the read pool, and retries a BUSY outcome with cooperative sleeps (docs/design.md#reattach).
    `build_terminal(position)` gives the `id: n`-framed RUN_ERROR. One non-blocking attempt at an exclusive
    `flock`; only the record's last frame is read (`scan_tail`); a record whose last frame is still half
    written is left unsealed (its follower ends when the run's lease is gone).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except OSError:
        return SealOutcome.LEFT
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return SealOutcome.BUSY
        tail = scan_tail(fd, 0)  # the end only, never a whole-file parse
        if tail.finished or tail.truncated or tail.complete_end != os.fstat(fd).st_size:
            return SealOutcome.LEFT  # ended already, or a frame half written: never append after a partial frame
        os.write(fd, build_terminal(tail.last_position + 1))
        return SealOutcome.SEALED
    except OSError:
        return SealOutcome.LEFT
    finally:
        os.close(fd)


# ---- reader presence ----------------------------------------------------------------------------


class ReaderMarker:
    """A reader's presence: a file touched every second while it follows the run."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / secrets.token_hex(8)
        self._directory = directory
        self._touched = 0.0

    def touch(self, now_s: float | None = None) -> None:
        now = time.monotonic() if now_s is None else now_s
        if now - self._touched < 1.0:
            return
        self._touched = now
        try:
            self._directory.mkdir(mode=0o700, exist_ok=True)
            self._path.touch(mode=0o600)
            os.utime(self._path)
        except OSError:
            log.debug("reader marker not touched", exc_info=True)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self._path.unlink()


def readers_present(directory: Path, now_s: float | None = None) -> bool:
    now = time.time() if now_s is None else now_s
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return False
    for entry in entries:
        try:
            if entry.stat().st_mtime >= now - READER_FRESH_S:
                return True
        except OSError:
            continue
    return False


__all__ = [
    "CHUNK_BYTES",
    "READER_FRESH_S",
    "Frame",
    "HeadProbe",
    "ReaderMarker",
    "RecordReader",
    "RecordTail",
    "SealOutcome",
    "find_frame_after",
    "probe_head",
    "read_tombstone",
    "readers_present",
    "scan_tail",
    "seal_orphan",
]
