"""Reattach: replay a run's record after the reader's cursor, then follow it to its terminal event.

Any worker serves it (docs/design.md#reattach): the record (`reattach/record.py`) is a file every worker
reads. Everything that can be refused is decided by `open_reattach` before the first byte, so a bad
request is a JSON error, never a broken stream; the refusals read the record's header only. The backlog
is served in bounded chunks read off the hub; following waits for the file to change (a stat watcher
under gevent), with heartbeats while the run is quiet and a reader marker the owner of a detached run
counts.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.config import limits
from agui_bridge.config.settings import Settings
from agui_bridge.errors import (
    Cancelled,
    InvalidInput,
    ReplayCursorOutOfRange,
    ReplayExpired,
    RunNotFound,
)
from agui_bridge.i18n.language import translate
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.sse import HEARTBEAT_FRAME, encode_numbered
from agui_bridge.reattach.format import existing_record_paths, ros_digest
from agui_bridge.reattach.reader import (
    CHUNK_BYTES,
    ReaderMarker,
    RecordReader,
    RecordTail,
    SealOutcome,
    find_frame_after,
    probe_head,
    read_tombstone,
    scan_tail,
    seal_orphan,
)
from agui_bridge.reattach.status import OwnerLiveness
from agui_bridge.worker.runtime import Runtime, read_off_hub, watch_file

log = logging.getLogger(__name__)

#: How often a follower of a quiet run checks that its owner still exists.
OWNER_CHECK_S = 1.0
#: A run whose lease is gone this long without a terminal frame ended unrecorded (its record's writes
#: failed): the follower stops instead of heartbeating forever.
UNRECORDED_END_GRACE_S = 3.0
#: A dead owner's record is sealed under a lock another follower may hold: this many tries, this far apart.
SEAL_ATTEMPTS = 50
SEAL_RETRY_S = 0.01
_CURSOR = re.compile(r"[0-9]{1,12}")


def parse_cursor(last_event_id: str | None, after: str | None) -> int:
    """`Last-Event-ID` wins over `?after=`; none is 0 (everything). Anything but digits is a 400."""
    raw = last_event_id if last_event_id is not None else after
    if raw is None:
        return 0
    raw = raw.strip()
    if not _CURSOR.fullmatch(raw):
        field = "/Last-Event-ID" if last_event_id is not None else "/after"
        raise InvalidInput("replay_cursor_invalid", field=field)
    return int(raw)


@dataclass
class Reattach:
    """An accepted reattach: the byte range of recorded frames after the cursor, and the reader that
    follows from the end of that range."""

    reader: RecordReader
    backlog_start: int
    backlog_end: int
    readers_dir: Path
    #: Called once when the body ends (the follower's slot in the worker's stream cap).
    on_end: Callable[[], None] = lambda: None

    @property
    def backlog_bytes(self) -> int:
        return self.backlog_end - self.backlog_start


#: Compared against when there is no header, so a refusal costs the same digest work either way.
_NO_HEADER_DIGEST = "0" * 64


def open_reattach(
    settings: Settings, thread_id: str, run_id: str, ros_invocation_id: str | None, cursor: int
) -> Reattach:
    """Every refusal, in order: 400 rosInvocationId, 404 unknown run, 410 no longer kept, 416 cursor.

    Header first (docs/design.md#reattach): the 404 decision reads the record's and the tombstone's
    headers (two opens, two bounded reads, one constant-time digest comparison, whichever exist), so a
    wrong rosInvocationId and an unknown run cost the same whatever the record's size. Only then is the
    record's end read, off the hub, for 410 and 416."""
    if not ros_invocation_id:
        raise InvalidInput("reattach_ros_required", field="/rosInvocationId")
    if (
        len(thread_id) > limits.MAX_ID_CHARS
        or len(run_id) > limits.MAX_ID_CHARS
        or len(ros_invocation_id) > limits.MAX_ROS_INVOCATION_ID_CHARS
    ):
        raise RunNotFound()  # POST / never admits such ids
    record, tombstone, readers_dir = existing_record_paths(settings.state_dir, thread_id, run_id)
    probe = probe_head(record)
    try:
        buried = read_tombstone(tombstone)
        owner_head = probe.head or buried
        same_ros = hmac.compare_digest(
            (owner_head.ros if owner_head is not None else _NO_HEADER_DIGEST).encode(),
            ros_digest(ros_invocation_id).encode(),
        )
        same_run = owner_head is not None and owner_head.thread_id == thread_id and owner_head.run_id == run_id
        if not (same_ros and same_run):
            raise RunNotFound()
        if probe.head is None or probe.fd is None:
            raise ReplayExpired()  # only the tombstone is left
        tail: RecordTail = read_off_hub(scan_tail, probe.fd, probe.frames_start)
        _check_tail(tail, probe.fd, cursor, settings.reattach_retention_s)
        start = probe.frames_start
        if cursor >= tail.last_position:
            start = tail.complete_end
        elif cursor > 0:
            start = read_off_hub(find_frame_after, probe.fd, probe.frames_start, tail.complete_end, cursor)
    except BaseException:
        if probe.fd is not None:
            os.close(probe.fd)
        raise
    return Reattach(RecordReader.resume(record, probe, tail), start, tail.complete_end, readers_dir)


def _check_tail(tail: RecordTail, fd: int, cursor: int, retention_s: float) -> None:
    if tail.truncated:
        raise ReplayExpired("replay_truncated")
    if tail.finished and _finished_long_ago(fd, retention_s):
        raise ReplayExpired()
    if cursor > tail.last_position:
        raise ReplayCursorOutOfRange()


def _finished_long_ago(fd: int, retention_s: float) -> bool:
    """The last write of a finished record is its terminal frame: its age is the time since the end."""
    try:
        mtime = os.fstat(fd).st_mtime
    except OSError:
        return False
    return mtime < time.time() - retention_s


def stream_backlog(attach: Reattach) -> Iterator[bytes]:
    """The recorded frames after the cursor as raw chunks of at most `CHUNK_BYTES`, each read off the hub:
    the range ends on a frame boundary, so the client sees whole frames (docs/design.md#reattach)."""
    fd = attach.reader.fileno()
    offset = attach.backlog_start
    while offset < attach.backlog_end:
        chunk: bytes = read_off_hub(os.pread, fd, min(CHUNK_BYTES, attach.backlog_end - offset), offset)
        if not chunk:
            return  # the record shrank: only a replaced file can, and the follower ends on its own
        offset += len(chunk)
        yield chunk


def follow(
    attach: Reattach,
    runtime: Runtime,
    settings: Settings,
    language: str,
    run_over: Callable[[], bool] = lambda: False,
) -> Iterator[bytes]:
    """The body: the backlog in bounded chunks, then new frames as the owner appends them, to the end.

    A follower sleeps until the record changes (`runtime.watch_file`: inotify under gevent, a short poll
    on threads). `run_over()` says the run no longer holds its thread's lease; a live owner whose run is
    over and whose record still lacks its terminal frame after a grace period failed to record it."""
    reader = attach.reader
    marker = ReaderMarker(attach.readers_dir)
    marker.touch()
    watch = None
    try:
        yield from stream_backlog(attach)
        watch = watch_file(str(reader.path))
        clock = runtime.monotonic  # the follower's heartbeats and owner checks keep the runtime's time
        next_heartbeat = clock() + settings.heartbeat_interval_s
        next_owner_check = clock() + OWNER_CHECK_S
        over_since: float | None = None
        read_at_once = True  # frames appended between the tail scan and the watch's start
        while not reader.finished and not reader.truncated:
            if not (read_at_once or reader.behind):
                watch.wait(max(0.0, min(next_heartbeat, next_owner_check) - clock()))
            read_at_once = False
            marker.touch()
            forwarded = reader.forward(CHUNK_BYTES)
            now = clock()
            if forwarded:
                yield forwarded
                next_heartbeat = now + settings.heartbeat_interval_s
                continue
            if now >= next_owner_check:
                next_owner_check = now + OWNER_CHECK_S
                _seal_if_owner_died(reader, runtime, settings, language)
                over_since = (over_since or now) if run_over() else None
                if over_since is not None and now - over_since >= UNRECORDED_END_GRACE_S:
                    late = reader.forward(CHUNK_BYTES)
                    if late:
                        yield late
                        continue
                    log.warning("a followed run ended without a recorded terminal event; ending the stream")
                    return
            if now >= next_heartbeat:
                next_heartbeat = now + settings.heartbeat_interval_s
                yield HEARTBEAT_FRAME
    finally:
        if watch is not None:
            watch.close()
        marker.remove()
        reader.close()
        attach.on_end()


def _seal_if_owner_died(reader: RecordReader, runtime: Runtime, settings: Settings, language: str) -> None:
    """A record whose owner process is gone never gets its terminal frame from it: write it here."""
    head = reader.head
    alive = OwnerLiveness(
        settings.state_dir, beacon_interval_s=settings.beacon_interval_s, grace_s=settings.lease_ttl_s
    )
    if head is None or alive(head, runtime.now_ms()):
        return
    message = translate("run_worker_lost", settings.default_language or language)
    code = str(Cancelled.code)

    def terminal(position: int) -> bytes:
        return encode_numbered(position, ev.run_error(code, message))

    for _ in range(SEAL_ATTEMPTS):
        outcome = read_off_hub(seal_orphan, reader.path, terminal)  # the tail scan is blocking file work
        if outcome is not SealOutcome.BUSY:
            break
        runtime.sleep(SEAL_RETRY_S)  # another follower holds the lock: wait on this side of the pool
    if outcome is SealOutcome.SEALED:
        log.warning("the worker of a run died; its record was ended with RUN_ERROR", extra={"run_id": head.run_id})


__all__ = ["Reattach", "follow", "open_reattach", "parse_cursor"]
