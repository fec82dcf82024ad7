"""What retention and a follower need to know of a run record, read in bounded size (docs/design.md#reattach).

Whether a record has ended is decided from its header (at most `MAX_HEADER_BYTES`) and its tail (at most
`TAIL_BYTES`): the terminal frame or the `: truncated` marker is always the last thing written, so the sweep
never parses a whole record, whatever its size. Whether its owner is gone is decided like a lease's
(docs/design.md#lease-liveness): a pid check for an owner on this host, the owner worker's beacon for one on
any other host (a recreated container gets a new hostname, so "another host" must not mean "alive").
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.state.beacon import Beacons, beacon_fresh_ms
from agui_bridge.state.owner import owner_is_alive, owner_on_this_host
from agui_bridge.state.replay_format import (
    MAX_HEADER_BYTES,
    TERMINAL_TYPES,
    TRUNCATED_FRAME,
    RecordHead,
    parse_head,
)

#: The most of a record's end read to find its last frame; the bridge's terminal frames are far smaller.
TAIL_BYTES = 64 * 1024
_FRAME_START = b"\n\nid: "
_TYPE_PREFIX = b'{"type":"'


@dataclass(frozen=True)
class RecordStatus:
    """A record's header and how it ends; `last_position` is None when its last frame began before the tail."""

    head: RecordHead | None
    finished: bool
    truncated: bool
    last_position: int | None
    size: int

    @property
    def ended(self) -> bool:
        return self.finished or self.truncated


def read_status(path: Path) -> RecordStatus | None:
    """The record's status from at most `MAX_HEADER_BYTES + TAIL_BYTES` read; None if it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return status_of(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def status_of(fd: int) -> RecordStatus:
    """`read_status` on an open descriptor (the sealer reads under its lock)."""
    size = os.fstat(fd).st_size
    first = os.pread(fd, MAX_HEADER_BYTES, 0)
    header_end = first.find(b"\n\n")
    head = parse_head(first[: header_end + 2]) if header_end >= 0 else None
    if head is None:
        return RecordStatus(None, False, False, None, size)
    body_start = header_end + 2
    tail_start = max(body_start, size - TAIL_BYTES)
    tail = os.pread(fd, size - tail_start, tail_start) if size > tail_start else b""
    if tail.endswith(TRUNCATED_FRAME):
        return RecordStatus(head, False, True, None, size)
    position, event_type = _last_frame(tail, starts_at_frame=tail_start == body_start)
    return RecordStatus(head, event_type in TERMINAL_TYPES, False, position, size)


def _last_frame(tail: bytes, *, starts_at_frame: bool) -> tuple[int | None, str]:
    """(position, type) of the last whole frame in `tail`; (0, "") for no frame at all, (None, "") when the
    last frame began before `tail` (or was cut by a write in progress)."""
    if not tail:
        return (0 if starts_at_frame else None), ""
    if not tail.endswith(b"\n\n"):
        return None, ""  # a write under way: decided on a later look
    boundary = tail.rfind(_FRAME_START, 0, len(tail) - 2)
    if boundary >= 0:
        block = tail[boundary + 2 : -2]
    elif starts_at_frame:
        block = tail[:-2]
    else:
        return None, ""
    position: int | None = None
    event_type = ""
    for line in block.split(b"\n"):
        if line.startswith(b"id: "):
            with contextlib.suppress(ValueError):
                position = int(line[4:])
        elif line.startswith(b"data: " + _TYPE_PREFIX):
            start = len(b"data: " + _TYPE_PREFIX)
            end = line.find(b'"', start)
            event_type = line[start:end].decode("ascii", "replace") if end > 0 else ""
    return position, event_type


class OwnerLiveness:
    """Is a record's owner worker still alive? The same answer leases get (docs/design.md#lease-liveness).

    On this host its pid decides at once (gone, a zombie, or another start time: dead). On any other host
    its beacon decides: dead once the beacon is older than three beacon intervals, or missing, after the
    grace period a new run's lease has too (a worker's first beacon follows its first run's start).
    """

    def __init__(self, state_dir: Path, *, beacon_interval_s: float, grace_s: float) -> None:
        self._beacons = Beacons(state_dir)
        self._fresh_ms = beacon_fresh_ms(beacon_interval_s)
        self._grace_ms = int(grace_s * 1000)

    def __call__(self, head: RecordHead, now_ms: int | None = None) -> bool:
        alive_by_pid = owner_is_alive(head.owner)  # malformed: dead; another host: cannot tell here
        if not alive_by_pid or owner_on_this_host(head.owner):
            return alive_by_pid
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if head.started_ms > now - self._grace_ms:
            return True
        return self._beacons.fresh(head.owner, now, self._fresh_ms)


__all__ = ["TAIL_BYTES", "OwnerLiveness", "RecordStatus", "read_status", "status_of"]
