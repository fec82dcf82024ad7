"""The total budget of `replay/` and the free-space reserve, as the recorders see them (docs/design.md#retention).

Every recorder of a worker asks before its first frame and then every 64 KiB whether it may go on (`allows`),
and reports what it wrote after writing it (`charge`), both in memory, on the hub. The worker's view of the
directory is its last scan plus what its recorders wrote since; a scan runs on a native
thread (`worker/runtime.MAINTENANCE`) when the view is 30 s old, nears the budget (90 %) or the reserve, and then
tombstones the oldest ended records down to 80 % (`reattach/retention.enforce_budget`). A step that would
take the view past the budget, or the filesystem's free space below the reserve, is refused: that record
stops like one past `--reattach-max-bytes` (`: truncated`), the run goes on. Other workers' writes are seen
at the next scan, so the budget holds to within what the workers write between two scans.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agui_bridge.reattach.retention import OwnerAlive, ReplayUsage, enforce_budget
from agui_bridge.reattach.status import OwnerLiveness
from agui_bridge.store.handoff import native_primitives
from agui_bridge.worker.fork import after_fork_in_child
from agui_bridge.worker.runtime import MAINTENANCE

log = logging.getLogger(__name__)

#: A recorder asks and reports in steps of this many bytes (and at its first frame and write at once).
CHARGE_STEP_BYTES = 64 * 1024
#: The worker's view of `replay/` is rescanned when this old, while recorders write.
REFRESH_S = 30.0
#: ... or sooner, but at most once a second, when it passes this share of the budget.
HIGH_WATER = 0.9
MIN_REFRESH_S = 1.0
#: A scan over the budget (or short of free space) tombstones ended records down to this share.
LOW_WATER = 0.8


class RecordBudget:
    """One per worker and state directory: may a recorder write `n` more bytes?"""

    def __init__(
        self,
        state_dir: Path,
        *,
        budget_bytes: int,
        min_free_bytes: int,
        owner_alive: OwnerAlive,
        clock: Callable[[], float] = time.monotonic,
        start: Callable[[Callable[[], None]], None] = MAINTENANCE.start,
    ) -> None:
        self._state_dir = state_dir
        self.budget_bytes = budget_bytes
        self.min_free_bytes = min_free_bytes
        self._owner_alive = owner_alive
        self._clock = clock
        self._start = start
        self._lock: Any = native_primitives()[0]()  # native: the scan thread updates the view too
        self._used = 0
        self._free: int | None = None  # unknown until the first scan
        self._charged = 0  # every byte charged, ever: what a scan did not see is the difference
        self._scanned_at: float | None = None
        self._scanning = False

    def allows(self, n: int) -> bool:
        """May a recorder write `n` more bytes? False past the budget or below the free-space reserve."""
        with self._lock:
            scan = self._claim_scan()
            if not scan:
                return self._within(n)
        self._start(self._scan_logged)
        with self._lock:  # a scan that already finished (the first one, in tests) counts
            return self._within(n)

    def charge(self, n: int) -> None:
        """Count `n` bytes a recorder wrote (after the write: a scan never misses bytes, at worst counts
        them twice until the next scan)."""
        with self._lock:
            self._charged += n
            self._used += n
            if self._free is not None:
                self._free -= n
            scan = self._claim_scan()
        if scan:
            self._start(self._scan_logged)

    def _claim_scan(self) -> bool:
        """Under the lock: is a scan due and not under way? Then this caller starts it."""
        if self._scanning or not self._due():
            return False
        self._scanning = True
        return True

    def _due(self) -> bool:
        if self._scanned_at is None:
            return True
        age = self._clock() - self._scanned_at
        near = (self.budget_bytes > 0 and self._used > self.budget_bytes * HIGH_WATER) or (
            self._free is not None and self._free < 2 * self.min_free_bytes
        )
        return age >= REFRESH_S or (near and age >= MIN_REFRESH_S)

    def _within(self, n: int) -> bool:
        return (self.budget_bytes <= 0 or self._used + n <= self.budget_bytes) and (
            self._free is None or self._free - n >= self.min_free_bytes
        )

    def scan(self) -> ReplayUsage | None:
        """Measure `replay/` and tombstone the oldest ended records if over; the view becomes the scan's."""
        with self._lock:
            self._scanning = True
            charged_before = self._charged
        usage: ReplayUsage | None = None
        try:
            usage = enforce_budget(
                self._state_dir, budget_bytes=self.budget_bytes, target_bytes=int(self.budget_bytes * LOW_WATER),
                min_free_bytes=self.min_free_bytes, owner_alive=self._owner_alive,
            )  # fmt: skip
            return usage
        finally:
            with self._lock:
                if usage is not None:
                    since = self._charged - charged_before
                    self._used = usage.used + since
                    self._free = None if usage.free is None else usage.free - since
                self._scanned_at = self._clock()
                self._scanning = False

    def _scan_logged(self) -> None:
        try:
            usage = self.scan()
        except Exception:
            log.warning("replay budget scan failed", exc_info=True)
            return
        if usage is not None and usage.evicted:
            log.info("replay budget: %d finished run record(s) tombstoned early", usage.evicted)


_budgets: dict[tuple[Path, int, int], RecordBudget] = {}
#: A forked child counts its own usage (docs/design.md#fork-registry).
after_fork_in_child(_budgets.clear)


def record_budget(
    state_dir: Path, *, budget_bytes: int, min_free_bytes: int, beacon_interval_s: float, grace_s: float
) -> RecordBudget | None:
    """This worker's budget for `state_dir` (made after fork, once); None when neither bound is set."""
    if budget_bytes <= 0 and min_free_bytes <= 0:
        return None
    key = (state_dir, budget_bytes, min_free_bytes)  # per run start: no path arithmetic
    budget = _budgets.get(key)
    if budget is None:
        liveness = OwnerLiveness(Path(state_dir), beacon_interval_s=beacon_interval_s, grace_s=grace_s)
        budget = _budgets[key] = RecordBudget(
            Path(state_dir), budget_bytes=budget_bytes, min_free_bytes=min_free_bytes, owner_alive=liveness
        )
    return budget


__all__ = ["CHARGE_STEP_BYTES", "RecordBudget", "record_budget"]
