"""Reattach: replay a run's record after the reader's cursor, then follow it to its terminal event.

Any worker serves it (docs/design.md#reattach): the record (`state/replay.py`) is a file every worker
reads. Everything that can be refused is decided by `open_reattach` before the first byte, so a bad
request is a JSON error, never a broken stream. Following is a cooperative poll of the file (a short
sleep between reads: a follower on another worker lags the owner by about one poll), with heartbeats
while the run is quiet and a reader marker the owner of a detached run counts.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agui_bridge import limits
from agui_bridge.errors import (
    Cancelled,
    InvalidInput,
    ReplayCursorOutOfRange,
    ReplayExpired,
    RunNotFound,
)
from agui_bridge.i18n import translate
from agui_bridge.runtime import Runtime
from agui_bridge.settings import Settings
from agui_bridge.state.owner import owner_is_alive
from agui_bridge.state.replay import (
    Frame,
    ReaderMarker,
    RecordReader,
    read_tombstone,
    record_paths,
    seal_orphan,
)
from agui_bridge.wire import events as ev
from agui_bridge.wire.sse import HEARTBEAT_FRAME, encode_event

log = logging.getLogger(__name__)

#: Between two reads of a live record: the follower's lag behind the owner is about this.
POLL_S = 0.02
#: How often a follower of a quiet run checks that its owner still exists.
OWNER_CHECK_S = 1.0
#: A run whose lease is gone this long without a terminal frame ended unrecorded (its record's writes
#: failed): the follower stops instead of heartbeating forever.
UNRECORDED_END_GRACE_S = 3.0
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
    """An accepted reattach: what was already recorded after the cursor, and the reader to follow with."""

    reader: RecordReader
    backlog: list[Frame]
    readers_dir: Path


def open_reattach(
    settings: Settings, thread_id: str, run_id: str, ros_invocation_id: str | None, cursor: int
) -> Reattach:
    """Every refusal, in order: 400 rosInvocationId, 404 unknown run, 410 no longer kept, 416 cursor."""
    if not ros_invocation_id:
        raise InvalidInput("reattach_ros_required", field="/rosInvocationId")
    if (
        len(thread_id) > limits.MAX_ID_CHARS
        or len(run_id) > limits.MAX_ID_CHARS
        or len(ros_invocation_id) > limits.MAX_ROS_INVOCATION_ID_CHARS
    ):
        raise RunNotFound()  # POST / never admits such ids
    record, tombstone, readers_dir = record_paths(settings.state_dir, thread_id, run_id)
    reader = RecordReader(record)
    try:
        frames = reader.poll()
        _check(reader, tombstone, thread_id, run_id, ros_invocation_id, cursor, settings.reattach_retention_s)
    except BaseException:
        reader.close()
        raise
    return Reattach(reader, [frame for frame in frames if frame.position > cursor], readers_dir)


def _check(
    reader: RecordReader, tombstone: Path, thread_id: str, run_id: str, ros_invocation_id: str, cursor: int,
    retention_s: float,
) -> None:  # fmt: skip
    if reader.head is None:
        head = read_tombstone(tombstone)
        if head is not None and head.matches(thread_id, ros_invocation_id):
            raise ReplayExpired()
        raise RunNotFound()
    if not reader.head.matches(thread_id, ros_invocation_id) or reader.head.run_id != run_id:
        raise RunNotFound()
    if reader.truncated:
        raise ReplayExpired("replay_truncated")
    if reader.finished and _finished_long_ago(reader.path, retention_s):
        raise ReplayExpired()
    if cursor > reader.last_position:
        raise ReplayCursorOutOfRange()


def _finished_long_ago(path: Path, retention_s: float) -> bool:
    """The last write of a finished record is its terminal frame: its age is the time since the end."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return mtime < time.time() - retention_s


def follow(
    attach: Reattach,
    runtime: Runtime,
    settings: Settings,
    language: str,
    run_over: Callable[[], bool] = lambda: False,
) -> Iterator[bytes]:
    """The body: the backlog in one write, then new frames as the owner appends them, to the end.

    `run_over()` says the run no longer holds its thread's lease; a live owner whose run is over and
    whose record still lacks its terminal frame after a grace period failed to record it."""
    reader = attach.reader
    marker = ReaderMarker(attach.readers_dir)
    marker.touch()
    try:
        if attach.backlog:
            yield b"".join(frame.data for frame in attach.backlog)
        next_heartbeat = time.monotonic() + settings.heartbeat_interval_s
        next_owner_check = time.monotonic() + OWNER_CHECK_S
        over_since: float | None = None
        while not reader.finished and not reader.truncated:
            runtime.sleep(POLL_S)
            marker.touch()
            frames = reader.poll()
            now = time.monotonic()
            if frames:
                yield b"".join(frame.data for frame in frames)
                next_heartbeat = now + settings.heartbeat_interval_s
                continue
            if now >= next_owner_check:
                next_owner_check = now + OWNER_CHECK_S
                _seal_if_owner_died(reader, runtime, settings, language)
                over_since = (over_since or now) if run_over() else None
                if over_since is not None and now - over_since >= UNRECORDED_END_GRACE_S:
                    late = reader.poll()
                    if late:
                        yield b"".join(frame.data for frame in late)
                        continue
                    log.warning("a followed run ended without a recorded terminal event; ending the stream")
                    return
            if now >= next_heartbeat:
                next_heartbeat = now + settings.heartbeat_interval_s
                yield HEARTBEAT_FRAME
    finally:
        marker.remove()
        reader.close()


def _seal_if_owner_died(reader: RecordReader, runtime: Runtime, settings: Settings, language: str) -> None:
    """A record whose owner process is gone never gets its terminal frame from it: write it here."""
    head = reader.head
    if head is None or owner_is_alive(head.owner):
        return
    message = translate("run_worker_lost", settings.default_language or language)
    code = str(Cancelled.code)

    def terminal(position: int) -> bytes:
        return b"id: %d\n" % position + encode_event(ev.run_error(code, message))

    def try_lock(fd: int) -> bool:
        for _ in range(50):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                runtime.sleep(0.01)
        return False

    if seal_orphan(reader.path, terminal, try_lock):
        log.warning("the worker of a run died; its record was ended with RUN_ERROR", extra={"run_id": head.run_id})


__all__ = ["Reattach", "follow", "open_reattach", "parse_cursor"]
