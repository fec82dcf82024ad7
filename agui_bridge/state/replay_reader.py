"""Any worker's side of a run record (docs/design.md#reattach): following it, announcing a reader, sealing it.

`RecordReader` parses the record incrementally while the owner appends; `ReaderMarker` is a follower's
presence (a file touched every second) and `readers_present` what the owner counts; `seal_orphan` ends a
record whose owner died without writing its terminal frame.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from agui_bridge.state.replay_format import (
    HEADER_PREFIX,
    MAX_HEADER_BYTES,
    TERMINAL_TYPES,
    TRUNCATED_FRAME,
    RecordHead,
    parse_head,
)
from agui_bridge.state.replay_status import status_of

log = logging.getLogger(__name__)

#: A reader marker touched within this many seconds counts as a reader present.
READER_FRESH_S = 3.0


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
    _pending: bytes = b""
    _handle: BinaryIO | None = field(default=None, repr=False)

    def poll(self, max_read: int = 1 << 20) -> list[Frame]:
        """Read what was appended since the last poll (the file stays open between polls: a follower
        polls often, and a record removed by retention meanwhile is still read to its end)."""
        frames: list[Frame] = []
        try:
            if self._handle is None:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, see close()
            while True:
                chunk = self._handle.read(max_read)
                if not chunk:
                    break
                self._pending += chunk
                self._parse(frames)
                if len(chunk) < max_read:
                    break
        except OSError:
            return frames
        return frames

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
            self._handle = None

    def _parse(self, out: list[Frame]) -> None:
        buffer = self._pending
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            if end < 0:
                break
            block = buffer[start : end + 2]
            start = end + 2
            self._block(block, out)
        self._pending = buffer[start:]

    def _block(self, block: bytes, out: list[Frame]) -> None:
        if block.startswith(b":"):
            if self.head is None and block.startswith(HEADER_PREFIX):
                self.head = parse_head(block[:MAX_HEADER_BYTES])
            elif block == TRUNCATED_FRAME:
                self.truncated = True
            return
        position = 0
        event_type = ""
        for line in block.split(b"\n"):
            if line.startswith(b"id: "):
                with contextlib.suppress(ValueError):
                    position = int(line[4:])
            elif line.startswith(b"data: "):
                event_type = _event_type(line[6:])
        if position <= 0:
            return
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


def read_tombstone(path: Path) -> RecordHead | None:
    try:
        with open(path, "rb") as handle:
            return parse_head(handle.read(MAX_HEADER_BYTES))
    except OSError:
        return None


def seal_orphan(path: Path, build_terminal: Callable[[int], bytes], try_lock: Callable[[int], bool]) -> bool:
    """Append the terminal frame to a record whose owner died without writing one (once, under a lock).

    `build_terminal(position)` gives the `id: n`-framed RUN_ERROR; `try_lock(fd)` takes an exclusive
    non-blocking lock on the file (the caller retries cooperatively). Returns whether it sealed. Only the
    header and the tail are read (`replay_status`); a record whose last frame is longer than that tail
    cannot be numbered and is left unsealed (its follower ends when the run's lease is gone).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not try_lock(fd):
            return False
        status = status_of(fd)
        if status.head is None or status.ended or status.last_position is None:
            return False
        os.write(fd, build_terminal(status.last_position + 1))
        return True
    except OSError:
        return False
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
    "READER_FRESH_S",
    "Frame",
    "ReaderMarker",
    "RecordReader",
    "read_tombstone",
    "readers_present",
    "seal_orphan",
]
