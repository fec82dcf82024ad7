"""What retention and a follower need to know of a run record, read in bounded size (docs/design.md#reattach).

Whether a record has ended is decided from its header (at most `MAX_HEADER_BYTES`) and its tail (one
chunk, `TAIL_BYTES`, unless its last frame is larger): the terminal frame or the `: truncated` marker is
always the last thing written, so the sweep never parses a whole record, whatever its size. Whether its
owner is gone is decided like a lease's (docs/design.md#lease-liveness): a pid check for an owner on this
host, the owner worker's beacon for one on any other host (a recreated container gets a new hostname, so
"another host" must not mean "alive").
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.protocol.sse_parser import next_frame_end
from agui_bridge.reattach.format import MAX_HEADER_BYTES, RecordHead, parse_head
from agui_bridge.reattach.reader import CHUNK_BYTES, scan_tail
from agui_bridge.store.owner import owner_is_alive, owner_on_this_host
from agui_bridge.worker.beacon import Beacons, beacon_fresh_ms

#: What the tail scan reads of a record's end when its last frame fits one chunk (the bridge's terminal
#: frames are far smaller).
TAIL_BYTES = CHUNK_BYTES


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
    """The record's status from its header and its tail (`MAX_HEADER_BYTES` plus one `TAIL_BYTES` chunk unless
    the last frame is larger); None if it cannot be opened."""
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
    """`read_status` on an open descriptor (the sealer reads under its lock). The end is found by the
    reader's one tail scan (`scan_tail`), which reads one chunk unless the last frame is larger."""
    size = os.fstat(fd).st_size
    first = os.pread(fd, MAX_HEADER_BYTES, 0)
    header_end = next_frame_end(first)
    head = parse_head(first[:header_end]) if header_end >= 0 else None
    if head is None:
        return RecordStatus(None, False, False, None, size)
    tail = scan_tail(fd, header_end)
    complete = tail.complete_end == size  # otherwise a write is under way: decided on a later look
    position = tail.last_position if complete and not tail.truncated else None
    return RecordStatus(head, tail.finished, tail.truncated, position, size)


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
