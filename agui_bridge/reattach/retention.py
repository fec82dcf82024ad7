"""Retention of run records (docs/design.md#retention): ended records become tombstones, old tombstones go,
and `replay/` as a whole stays within its budget.

A tombstone (`<name>.gone`, the header only) makes a late reattach 410 instead of 404; `runs/retention.py`
calls `sweep_records` with the thread files' retention. What a record's fate needs is read in bounded size
(`reattach/status.read_status`: header and tail), and one process at a time sweeps a state directory (a non-blocking
`flock` on `replay/.sweep.lock`: the others skip, the work would be the same). Callers run this off the hub
(`worker/runtime.MAINTENANCE`): its total cost grows with the number of files.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.reattach.format import READERS_SUFFIX, RECORD_SUFFIX, TOMBSTONE_SUFFIX, RecordHead, replay_dir
from agui_bridge.reattach.status import read_status

log = logging.getLogger(__name__)

SWEEP_LOCK = ".sweep.lock"
OwnerAlive = Callable[[RecordHead], bool]
#: A record has no header between its creation (`O_CREAT`) and the owner's first write: one without a header
#: younger than this may be a run being admitted right now, never an ended one.
HEADERLESS_GRACE_S = 10.0


@dataclass
class RecordSweep:
    tombstoned: int = 0  # past retention and ended (or orphaned)
    removed: int = 0  # tombstones past their retention
    evicted: int = 0  # ended records tombstoned early to bring replay/ within its budget or free-space reserve
    skipped: bool = False  # another process holds the sweep lock: it does this work


@dataclass(frozen=True)
class ReplayUsage:
    """Bytes held by records and tombstones, and bytes free on their filesystem (None: unknown)."""

    used: int
    free: int | None
    evicted: int = 0


@dataclass
class _Entry:
    path: Path
    size: int
    mtime: float


def _alive_by_default(head: RecordHead) -> bool:
    del head
    return True


@contextlib.contextmanager
def sweep_lock(directory: Path) -> Iterator[bool]:
    """The directory's sweep lock, taken without waiting: yields whether this process holds it."""
    try:
        fd = os.open(directory / SWEEP_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def sweep_records(
    state_dir: Path,
    *,
    retention_s: float,
    tombstone_retention_s: float,
    now_s: float | None = None,
    owner_alive: OwnerAlive = _alive_by_default,
    dry_run: bool = False,
    budget_bytes: int = 0,
    min_free_bytes: int = 0,
) -> RecordSweep:
    """Ended (or orphaned) records past `retention_s` become tombstones; old tombstones go; then the oldest
    ended records go too while `replay/` is over `budget_bytes` or its filesystem has less than
    `min_free_bytes` free (0: no such bound)."""
    now = time.time() if now_s is None else now_s
    report = RecordSweep()
    directory = replay_dir(state_dir)
    if not directory.is_dir():
        return report
    with sweep_lock(directory) as held:
        if not held:
            report.skipped = True
            return report
        kept: list[_Entry] = []
        for entry in _scan(directory):
            name = entry.path.name
            if name.endswith(RECORD_SUFFIX):
                if entry.mtime > now - retention_s or not _ended(entry, now, owner_alive, dry_run):
                    kept.append(entry)  # recent, or a live run (a long quiet turn): its record stays
                    continue
                report.tombstoned += 1
            elif name.endswith(TOMBSTONE_SUFFIX):
                if entry.mtime > now - tombstone_retention_s:
                    kept.append(entry)
                    continue
                report.removed += 1
                if not dry_run:
                    with contextlib.suppress(OSError):
                        entry.path.unlink()
            elif name.endswith(READERS_SUFFIX) and entry.mtime <= now - retention_s and not dry_run:
                shutil.rmtree(entry.path, ignore_errors=True)
        if budget_bytes > 0 or min_free_bytes > 0:
            usage = _evict(directory, kept, budget_bytes, min_free_bytes, owner_alive, dry_run, now)
            report.evicted = usage.evicted
    return report


def enforce_budget(
    state_dir: Path, *, budget_bytes: int, target_bytes: int, min_free_bytes: int, owner_alive: OwnerAlive
) -> ReplayUsage:
    """Measure `replay/` (a `stat` per file, no reads) and, when it is over `budget_bytes` or the filesystem
    has less than `min_free_bytes` free, tombstone the oldest ended records until it is down to
    `target_bytes` (unless another process is sweeping: then only measure)."""
    directory = replay_dir(state_dir)
    entries = _scan(directory)
    used = sum(entry.size for entry in entries if _counted(entry.path.name))
    free = _free_bytes(directory)
    over = (budget_bytes > 0 and used > budget_bytes) or (free is not None and free < min_free_bytes)
    if not over:
        return ReplayUsage(used, free)
    with sweep_lock(directory) as held:
        if not held:
            return ReplayUsage(used, free)
        return _evict(directory, entries, target_bytes, min_free_bytes, owner_alive, False, time.time())


def _evict(
    directory: Path, entries: list[_Entry], budget_bytes: int, min_free_bytes: int, owner_alive: OwnerAlive,
    dry_run: bool, now: float,
) -> ReplayUsage:  # fmt: skip
    """Oldest ended records first (live runs' records never): each becomes a tombstone, so a later
    reattach is 410 as for an expired record. An empty record frees nothing and may be a run's record
    before its first write: it is never evicted."""
    used = sum(entry.size for entry in entries if _counted(entry.path.name))
    free = _free_bytes(directory)
    evicted = 0
    records = sorted((e for e in entries if e.path.name.endswith(RECORD_SUFFIX)), key=lambda e: e.mtime)
    for entry in records:
        over_budget = budget_bytes > 0 and used > budget_bytes
        short_of_space = free is not None and free < min_free_bytes
        if not (over_budget or short_of_space):
            break
        if entry.size == 0 or not _ended(entry, now, owner_alive, dry_run):
            continue
        evicted += 1
        used -= entry.size
        if free is not None:
            free += entry.size
    return ReplayUsage(used, free, evicted)


def _ended(entry: _Entry, now: float, owner_alive: OwnerAlive, dry_run: bool) -> bool:
    """Has this record ended (terminal, truncated, or its owner is gone)? If so, and not `dry_run`, it is
    replaced by its tombstone here. A record without a header is ended only once older than
    `HEADERLESS_GRACE_S` (its owner died before its first write)."""
    path = entry.path
    status = read_status(path)
    if status is None:
        return False  # gone meanwhile
    if status.head is None and entry.mtime > now - HEADERLESS_GRACE_S:
        return False  # created a moment ago: its header is being written
    if not status.ended and status.head is not None and owner_alive(status.head):
        return False
    if not dry_run:
        _tombstone(path, status.head)
    return True


def _scan(directory: Path) -> list[_Entry]:
    try:
        found = list(os.scandir(directory))
    except OSError:
        return []
    entries = []
    for entry in found:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        entries.append(_Entry(Path(entry.path), info.st_size, info.st_mtime))
    return entries


def _counted(name: str) -> bool:
    return name.endswith(RECORD_SUFFIX) or name.endswith(TOMBSTONE_SUFFIX)


def _free_bytes(directory: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the directory's filesystem."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


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


__all__ = ["SWEEP_LOCK", "RecordSweep", "ReplayUsage", "enforce_budget", "sweep_lock", "sweep_records"]
