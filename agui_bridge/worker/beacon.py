"""Worker liveness for run leases: one small file per worker, not one durable write per stream.

A lease (in the thread file) names its owner worker and is taken with a short grace period. After
that it stays live as long as the owner's beacon, `<state>/owners/<owner>.json`, is fresh and lists
the run. Each worker rewrites its beacon every few seconds with the runs it is streaming, so holding
thousands of idle streams costs one small write per worker per interval instead of a locked, fsynced
thread-file write per stream (which also blocked the gevent hub). A beacon needs no fsync: after a
crash a lost beacon says "dead", which is the truth.

Cancellation requests for a run held by another worker travel the same way: a marker file under
`<state>/cancel-requests/` that the owner's beacon loop picks up within a second. Runs are named by
their run key (executionId/runId, `store/lease.py`), never by runId alone. A marker records the
thread and run key it is for, so the retention sweep can remove markers of runs that ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

OWNERS_DIR = "owners"
CANCELS_DIR = "cancel-requests"
DIR_MODE = 0o700
FILE_MODE = 0o600
#: A beacon is fresh while published within this many beacon intervals (docs/design.md#lease-liveness).
FRESH_INTERVALS = 3


def beacon_fresh_ms(interval_s: float) -> int:
    """How recent a worker's beacon must be for the worker to count as alive."""
    return int(interval_s * FRESH_INTERVALS * 1000)


@dataclass(frozen=True)
class CancelMarker:
    """One pending cancel request: its file, and the run it names (None if unreadable or legacy)."""

    path: Path
    thread_id: str | None
    run_key: str | None
    mtime: float


def _name(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Beacons:
    def __init__(self, root: Path) -> None:
        self.owners_dir = Path(root) / OWNERS_DIR
        self.cancels_dir = Path(root) / CANCELS_DIR

    def _ensure(self, directory: Path) -> None:
        if not directory.is_dir():
            directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.chmod(directory, DIR_MODE)

    # ---- liveness ----------------------------------------------------------------------------

    def publish(self, owner: str, run_keys: Iterable[str], now_ms: int) -> None:
        """Atomically replace this worker's beacon listing the run keys it streams (OSError propagates)."""
        self._ensure(self.owners_dir)
        payload = json.dumps({"owner": owner, "heartbeatAt": now_ms, "runs": sorted(run_keys)}).encode()
        fd, tmp = tempfile.mkstemp(dir=self.owners_dir, prefix=".beacon.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                os.fchmod(handle.fileno(), FILE_MODE)
            os.replace(tmp, self.owners_dir / f"{_name(owner)}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def holds(self, owner: str, run_key: str, now_ms: int, ttl_ms: int) -> bool:
        """True if `owner`'s beacon is fresh and lists `run_key` (an unreadable beacon counts as dead)."""
        runs = self._fresh_runs(owner, now_ms, ttl_ms)
        return runs is not None and run_key in runs

    def fresh(self, owner: str, now_ms: int, ttl_ms: int) -> bool:
        """True if `owner`'s beacon is fresh: the worker is alive, on whatever host it runs."""
        return self._fresh_runs(owner, now_ms, ttl_ms) is not None

    def _fresh_runs(self, owner: str, now_ms: int, ttl_ms: int) -> list[object] | None:
        """The runs of `owner`'s beacon if it is fresh, else None (missing or unreadable counts as dead)."""
        try:
            with open(self.owners_dir / f"{_name(owner)}.json", "rb") as handle:
                document = json.loads(handle.read())
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or document.get("owner") != owner:
            return None
        heartbeat = document.get("heartbeatAt")
        runs = document.get("runs")
        if not (isinstance(heartbeat, int) and heartbeat > now_ms - ttl_ms and isinstance(runs, list)):
            return None
        return runs

    def forget_stale(self, older_than_s: float) -> None:
        """Remove beacons of workers gone for long (each restart leaves one behind)."""
        cutoff = time.time() - older_than_s
        for directory in (self.owners_dir, self.cancels_dir):
            with contextlib.suppress(OSError):
                for entry in os.scandir(directory):
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                            os.unlink(entry.path)

    # ---- cancellation ------------------------------------------------------------------------

    def request_cancel(self, run_key: str, thread_id: str = "") -> None:
        """Leave a marker for the owner of `run_key` (an atomic write: readers never see half of it)."""
        self._ensure(self.cancels_dir)
        payload = json.dumps({"threadId": thread_id, "runKey": run_key}).encode()
        fd, tmp = tempfile.mkstemp(dir=self.cancels_dir, prefix=".cancel.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                os.fchmod(handle.fileno(), FILE_MODE)
            os.replace(tmp, self.cancels_dir / _name(run_key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def discard_cancel(self, run_key: str) -> None:
        """Remove the marker of `run_key`, if any: its run ended (owner) or is no longer live (canceller)."""
        with contextlib.suppress(OSError):
            os.unlink(self.cancels_dir / _name(run_key))

    def cancel_markers(self) -> Iterator[CancelMarker]:
        """Every marker file (temp files of an interrupted write included, with no run)."""
        try:
            entries = list(os.scandir(self.cancels_dir))
        except OSError:
            return
        for entry in entries:
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
                with open(entry.path, "rb") as handle:
                    document = json.loads(handle.read(4096) or b"null")
            except (OSError, ValueError):
                document, mtime = None, 0.0
            thread_id = document.get("threadId") if isinstance(document, dict) else None
            key = document.get("runKey") if isinstance(document, dict) else None
            yield CancelMarker(
                Path(entry.path),
                thread_id if isinstance(thread_id, str) and thread_id else None,
                key if isinstance(key, str) and key and _name(key) == entry.name else None,
                mtime,
            )

    def take_cancels(self, run_keys: Mapping[str, object] | Iterable[str]) -> set[str]:
        """The runs among `run_keys` someone asked to cancel; their markers are consumed."""
        try:
            markers = set(os.listdir(self.cancels_dir))
        except OSError:
            return set()
        if not markers:
            return set()
        taken: set[str] = set()
        for key in run_keys:
            name = _name(key)
            if name in markers:
                with contextlib.suppress(OSError):
                    os.unlink(self.cancels_dir / name)
                taken.add(key)
        return taken
