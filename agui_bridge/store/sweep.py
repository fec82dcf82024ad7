"""Leftover files in `<state>/threads/`: orphaned lock files and stale temp files, removed so that state
stays bounded (docs/design.md#decision-bounded-state).

A `<stem>.json.lock` whose `<stem>.json` is gone stays behind after a thread is pruned, and a writer
killed between its temp file and the `os.replace` leaves `.<stem>.json.<pid>-<n>.tmp`. Neither is
ever needed again once it is older than `limits.SWEEP_MIN_AGE_S`; this removes them, from
`state prune` and the hourly sweep (`runs.retention.prune`).

A lock file is only removed while this process holds its `flock` (taken without waiting, so a busy
thread is simply skipped) and after re-checking that no thread file appeared; `ThreadStore` retries
an acquisition that ends on an unlinked inode, so a waiter can never keep a stale lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from agui_bridge.config import limits

LOCK_SUFFIX = ".json.lock"
#: `.<stem>.json.<pid>-<n>.tmp`, the writer's temporary files (`store/filewrite.py`).
_TEMP_NAME = re.compile(r"\..+\.json\.[^.]+\.tmp")


@dataclass
class SweepReport:
    removed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _age_s(info: os.stat_result, now_s: float) -> float:
    return now_s - info.st_mtime


def _remove_orphan_lock(directory: Path, name: str, now_s: float, min_age_s: float, dry_run: bool) -> bool:
    """True if the orphaned lock file `name` was (or, dry run, would be) removed."""
    path = directory / name
    thread_file = directory / name[: -len(".lock")]
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or _age_s(info, now_s) < min_age_s:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False  # a request holds it right now: not an orphan
            raise
        if os.path.lexists(thread_file):
            return False
        if not dry_run:
            os.unlink(path)
        return True
    finally:
        os.close(fd)  # releases the flock


def sweep_thread_dir(
    threads_dir: Path, *, now_s: float | None = None, min_age_s: float | None = None, dry_run: bool = False
) -> SweepReport:
    """Remove orphaned lock files and stale temp files older than `min_age_s` (names in the report)."""
    now = time.time() if now_s is None else now_s
    min_age = limits.SWEEP_MIN_AGE_S if min_age_s is None else min_age_s
    report = SweepReport()
    try:
        entries = list(os.scandir(threads_dir))
    except FileNotFoundError:
        return report
    except OSError as exc:
        report.problems.append(f"threads directory unreadable ({errno.errorcode.get(exc.errno or 0, '?')})")
        return report
    for entry in entries:
        name = entry.name
        try:
            if name.endswith(LOCK_SUFFIX) and not name.startswith("."):
                if _remove_orphan_lock(threads_dir, name, now, min_age, dry_run):
                    report.removed.append(name)
            elif _TEMP_NAME.fullmatch(name) is not None:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and _age_s(info, now) >= min_age:
                    if not dry_run:
                        os.unlink(entry.path)
                    report.removed.append(name)
        except FileNotFoundError:
            continue
        except OSError as exc:
            report.problems.append(f"{name}: {errno.errorcode.get(exc.errno or 0, 'error')}")
    return report
