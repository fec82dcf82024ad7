"""The per-run event record that makes a dropped connection not a lost run (docs/design.md#reattach).

One append-only file per run under `<state-dir>/replay/`, named by a digest of (threadId, runId) so no
client text becomes a path. The file is itself a valid SSE stream:

    : record {"v":1,"threadId":..,"runId":..,"ros":<sha256 of rosInvocationId>,"owner":..,"startedMs":..}\\n\\n
    id: 1\\ndata: {"type":"RUN_STARTED",..}\\n\\n
    id: 2\\ndata: ..\\n\\n
    ...                                  (the last frame is RUN_FINISHED or RUN_ERROR)

The owning worker appends every frame before the client is shown it (one `write`, no fsync: the record
serves readers of a live server, and a crash loses at most what the page cache held, which the crash
ended anyway). Any worker reads it: a reattach replays the frames after the reader's cursor, then tails
the file until the terminal frame. Past `max_bytes` the owner stops recording and appends `: truncated`;
such a run answers reattach with 410 REPLAY_EXPIRED. Readers announce themselves with a marker file that
they touch every second (`<name>.readers/<token>`): the owner of a detached run counts them.

Retention (`sweep_records`) turns a finished record older than its retention into a tombstone
(`<name>.gone`, the header only), so a late reattach gets 410 instead of 404; tombstones go with the
thread files' retention.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

REPLAY_DIR = "replay"
RECORD_SUFFIX = ".sse"
TOMBSTONE_SUFFIX = ".gone"
READERS_SUFFIX = ".readers"
HEADER_PREFIX = b": record "
TRUNCATED_FRAME = b": truncated\n\n"
TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})
#: A reader marker touched within this many seconds counts as a reader present.
READER_FRESH_S = 3.0
#: The header line is bounded: ids are bounded by admission, the rest is fixed-size.
_MAX_HEADER_BYTES = 4096


def record_name(thread_id: str, run_id: str) -> str:
    """A fixed-length file name for a run: no client text reaches the file system."""
    return hashlib.sha256(f"{thread_id}\x00{run_id}".encode()).hexdigest()


def ros_digest(ros_invocation_id: str) -> str:
    return hashlib.sha256(ros_invocation_id.encode("utf-8")).hexdigest()


def replay_dir(state_dir: Path) -> Path:
    return Path(state_dir) / REPLAY_DIR


def ensure_replay_dir(state_dir: Path) -> Path:
    directory = replay_dir(state_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


@dataclass(frozen=True)
class RecordHead:
    """Who the run belongs to: checked before a reader sees anything."""

    thread_id: str
    run_id: str
    ros: str
    owner: str
    started_ms: int

    def encode(self) -> bytes:
        body = {"v": 1, "threadId": self.thread_id, "runId": self.run_id, "ros": self.ros}
        body |= {"owner": self.owner, "startedMs": self.started_ms}
        return HEADER_PREFIX + json.dumps(body, separators=(",", ":")).encode("utf-8") + b"\n\n"

    def matches(self, thread_id: str, ros_invocation_id: str) -> bool:
        same_ros = hmac.compare_digest(self.ros.encode(), ros_digest(ros_invocation_id).encode())
        return same_ros and self.thread_id == thread_id


def parse_head(block: bytes) -> RecordHead | None:
    if not block.startswith(HEADER_PREFIX):
        return None
    try:
        body = json.loads(block[len(HEADER_PREFIX) :].strip())
        return RecordHead(
            str(body["threadId"]), str(body["runId"]), str(body["ros"]), str(body["owner"]), int(body["startedMs"])
        )
    except (ValueError, KeyError, TypeError):
        return None


# ---- writing (the owning worker) ------------------------------------------------------------


class RunRecord:
    """The owner's side: an `Emitter` sink that appends every frame before it is shown.

    A failing write never fails the run: recording stops (logged once) and a later reattach gets 410.
    """

    def __init__(self, state_dir: Path, head: RecordHead, *, max_bytes: int) -> None:
        self.head = head
        self._state_dir = Path(state_dir)
        self.name = record_name(head.thread_id, head.run_id)
        self.path = replay_dir(self._state_dir) / (self.name + RECORD_SUFFIX)
        self._max_bytes = max_bytes
        self._fd: int | None = None
        self._header = head.encode()
        self._size = len(self._header)
        self._pending: list[bytes] = []  # frames of the current batch, written by `flush`
        self._ending = False  # terminal or truncated: the next flush is the last write
        self.stopped = False  # truncated, failed, or terminal: nothing more is written
        self.last_position = 0
        self.finished = False

    def frame(self, position: int, event: Any, data: bytes) -> None:
        """FrameSink: take `data` (already `id: n`-framed); `flush` writes the batch."""
        if self.stopped or self._ending:
            return
        if self._size + len(data) > self._max_bytes:
            self._pending.append(TRUNCATED_FRAME)
            self._ending = True
            log.warning("run record reached its size bound; reattach to this run is no longer possible")
            self.flush()
            return
        self._pending.append(data)
        self._size += len(data)
        self.last_position = position
        if event.get("type") in TERMINAL_TYPES:
            self.finished = self._ending = True
            self.flush()

    def flush(self) -> None:
        """FrameSink: one `write` for the batch, before the emitter hands its bytes to the server. The
        file is created by the first flush, its header in the same write (no reader finds it headless)."""
        if self.stopped or not self._pending:
            return
        data, self._pending = b"".join(self._pending), []
        try:
            if self._fd is None:
                ensure_replay_dir(self._state_dir)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
                self._fd = os.open(self.path, flags, 0o600)
                data = self._header + data
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            log.warning("run record write failed; reattach to this run is no longer possible", exc_info=True)
            self._stop()
            return
        if self._ending:
            self._stop()

    def _stop(self) -> None:
        self.stopped = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self.flush()
        self._stop()

    def readers_present(self, now_s: float | None = None) -> bool:
        """Is some reader (on any worker) following this run now?"""
        return readers_present(replay_dir(self._state_dir) / (self.name + READERS_SUFFIX), now_s)


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


# ---- reading (any worker) ---------------------------------------------------------------------


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
                self.head = parse_head(block[:_MAX_HEADER_BYTES])
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
                with contextlib.suppress(ValueError, AttributeError):
                    event_type = str(json.loads(line[6:]).get("type", ""))
        if position <= 0:
            return
        self.last_position = position
        if event_type in TERMINAL_TYPES:
            self.finished = True
        out.append(Frame(position, event_type, block))


def record_paths(state_dir: Path, thread_id: str, run_id: str) -> tuple[Path, Path, Path]:
    """(record, tombstone, readers directory) of a run."""
    base = replay_dir(state_dir) / record_name(thread_id, run_id)
    return (
        base.with_name(base.name + RECORD_SUFFIX),
        base.with_name(base.name + TOMBSTONE_SUFFIX),
        base.with_name(base.name + READERS_SUFFIX),
    )


def read_tombstone(path: Path) -> RecordHead | None:
    try:
        with open(path, "rb") as handle:
            return parse_head(handle.read(_MAX_HEADER_BYTES))
    except OSError:
        return None


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


def seal_orphan(path: Path, build_terminal: Callable[[int], bytes], try_lock: Callable[[int], bool]) -> bool:
    """Append the terminal frame to a record whose owner died without writing one (once, under a lock).

    `build_terminal(position)` gives the `id: n`-framed RUN_ERROR; `try_lock(fd)` takes an exclusive
    non-blocking lock on the file (the caller retries cooperatively). Returns whether it sealed.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not try_lock(fd):
            return False
        reader = RecordReader(path)
        reader.poll()
        reader.close()
        if reader.finished or reader.truncated:
            return False
        os.write(fd, build_terminal(reader.last_position + 1))
        return True
    finally:
        os.close(fd)


# ---- retention ----------------------------------------------------------------------------------


@dataclass
class RecordSweep:
    tombstoned: int = 0
    removed: int = 0


def sweep_records(
    state_dir: Path,
    *,
    retention_s: float,
    tombstone_retention_s: float,
    now_s: float | None = None,
    owner_alive: Callable[[str], bool] = lambda owner: True,
    dry_run: bool = False,
) -> RecordSweep:
    """Finished (or orphaned) records past `retention_s` become tombstones; old tombstones go."""
    now = time.time() if now_s is None else now_s
    report = RecordSweep()
    directory = replay_dir(state_dir)
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return report
    for entry in entries:
        path = Path(entry.path)
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        if entry.name.endswith(RECORD_SUFFIX):
            if mtime > now - retention_s:
                continue
            reader = RecordReader(path)
            reader.poll()
            reader.close()
            ended = reader.finished or reader.truncated
            if not ended and (reader.head is None or owner_alive(reader.head.owner)):
                continue  # a live run (a long quiet turn): its record stays
            report.tombstoned += 1
            if not dry_run:
                _tombstone(path, reader.head)
        elif entry.name.endswith(TOMBSTONE_SUFFIX) and mtime <= now - tombstone_retention_s:
            report.removed += 1
            if not dry_run:
                with contextlib.suppress(OSError):
                    path.unlink()
        elif entry.name.endswith(READERS_SUFFIX) and mtime <= now - retention_s and not dry_run:
            shutil.rmtree(path, ignore_errors=True)
    return report


def _tombstone(path: Path, head: RecordHead | None) -> None:
    stem = path.name[: -len(RECORD_SUFFIX)]
    if head is not None:
        tomb = path.with_name(stem + TOMBSTONE_SUFFIX)
        temp = path.with_name(stem + ".tmp-" + secrets.token_hex(4))
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, head.encode())
            finally:
                os.close(fd)
            os.replace(temp, tomb)
        except OSError:
            log.warning("run record tombstone not written", exc_info=True)
            with contextlib.suppress(OSError):
                temp.unlink()
    with contextlib.suppress(OSError):
        path.unlink()
    shutil.rmtree(path.with_name(stem + READERS_SUFFIX), ignore_errors=True)


__all__ = [
    "Frame",
    "ReaderMarker",
    "RecordHead",
    "RecordReader",
    "RunRecord",
    "ensure_replay_dir",
    "read_tombstone",
    "record_name",
    "record_paths",
    "ros_digest",
    "seal_orphan",
    "sweep_records",
]
