"""Retention of run records (docs/design.md#reattach): ended records become tombstones, old tombstones go.

A tombstone (`<name>.gone`, the header only) makes a late reattach 410 instead of 404; `state/retention.py`
calls `sweep_records` with the thread files' retention.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.state.replay_format import (
    READERS_SUFFIX,
    RECORD_SUFFIX,
    TOMBSTONE_SUFFIX,
    RecordHead,
    replay_dir,
)
from agui_bridge.state.replay_reader import RecordReader

log = logging.getLogger(__name__)


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


__all__ = ["RecordSweep", "sweep_records"]
