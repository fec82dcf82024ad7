"""Worker liveness for run leases: one small file per worker, not one durable write per stream.

A lease (in the thread file) names its owner worker and is taken with a short grace period. After
that it stays live as long as the owner's beacon, `<state>/owners/<owner>.json`, is fresh and lists
the run. Each worker rewrites its beacon every few seconds with the runs it is streaming, so holding
thousands of idle streams costs one small write per worker per interval instead of a locked, fsynced
thread-file write per stream (which also blocked the gevent hub). A beacon needs no fsync: after a
crash a lost beacon says "dead", which is the truth.

Cancellation requests for a run held by another worker travel the same way: a marker file under
`<state>/cancel-requests/` that the owner's beacon loop picks up within a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

OWNERS_DIR = "owners"
CANCELS_DIR = "cancel-requests"
DIR_MODE = 0o700
FILE_MODE = 0o600


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

    def publish(self, owner: str, run_ids: Iterable[str], now_ms: int) -> None:
        """Atomically replace this worker's beacon (OSError propagates: the caller logs it)."""
        self._ensure(self.owners_dir)
        payload = json.dumps({"owner": owner, "heartbeatAt": now_ms, "runs": sorted(run_ids)}).encode()
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

    def holds(self, owner: str, run_id: str, now_ms: int, ttl_ms: int) -> bool:
        """True if `owner`'s beacon is fresh and lists `run_id` (an unreadable beacon counts as dead)."""
        try:
            with open(self.owners_dir / f"{_name(owner)}.json", "rb") as handle:
                document = json.loads(handle.read())
        except (OSError, ValueError):
            return False
        if not isinstance(document, dict) or document.get("owner") != owner:
            return False
        heartbeat = document.get("heartbeatAt")
        runs = document.get("runs")
        return isinstance(heartbeat, int) and heartbeat > now_ms - ttl_ms and isinstance(runs, list) and run_id in runs

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

    def request_cancel(self, run_id: str) -> None:
        self._ensure(self.cancels_dir)
        path = self.cancels_dir / _name(run_id)
        with open(path, "wb"):
            pass
        os.chmod(path, FILE_MODE)

    def take_cancels(self, run_ids: Mapping[str, str] | Iterable[str]) -> set[str]:
        """The runs among `run_ids` someone asked to cancel; their markers are consumed."""
        try:
            markers = set(os.listdir(self.cancels_dir))
        except OSError:
            return set()
        if not markers:
            return set()
        taken: set[str] = set()
        for run_id in run_ids:
            name = _name(run_id)
            if name in markers:
                with contextlib.suppress(OSError):
                    os.unlink(self.cancels_dir / name)
                taken.add(run_id)
        return taken
