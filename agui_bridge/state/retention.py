"""Bounded state (D8) and idleness (behaviour.md 9.3), decided from the thread files alone.

A thread file may go when nothing can still need it: no pending interrupt, no live lease, and no
activity for the retention period. Each removal re-reads the file under its lock, so a run admitted
a moment ago on another worker is never pruned from under it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from agui_bridge.state import model
from agui_bridge.state.store import StateError, ThreadStore
from agui_bridge.state.sweep import sweep_thread_dir

DAY_MS = 24 * 3600 * 1000


def prunable(state: model.ThreadState, now_ms: int, retention_ms: int) -> bool:
    lease = state.active_run
    return (
        not state.execution.pending
        and (lease is None or lease.expires_at_ms <= now_ms)
        and state.last_activity_ms <= now_ms - retention_ms
    )


def holds_work(state: model.ThreadState, now_ms: int) -> bool:
    """A live lease or an unexpired pending interrupt: the server is not idle while one exists."""
    lease = state.active_run
    if lease is not None and lease.expires_at_ms > now_ms:
        return True
    return any(entry.expires_at_ms > now_ms for entry in state.execution.pending.values())


@dataclass
class PruneReport:
    examined: int = 0
    removed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)  # orphaned lock and stale temp files (state.sweep)


def prune(
    store: ThreadStore, *, retention_days: float, now_ms: int | None = None, dry_run: bool = False
) -> PruneReport:
    """Remove (or with `dry_run` only list) the thread files past retention with nothing to keep."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    retention_ms = int(retention_days * DAY_MS)
    report = PruneReport()
    try:
        thread_ids = list(store.iter_thread_ids())
    except StateError as exc:
        report.problems.append(f"state directory: {exc}")
        return report
    for thread_id in thread_ids:
        report.examined += 1
        try:
            with store.transaction(thread_id) as txn:
                state = txn.state
                if state is None or not prunable(state, now, retention_ms):
                    continue
                if not dry_run:
                    txn.delete()
                report.removed.append(thread_id)
        except StateError as exc:
            report.problems.append(f"{thread_id}: {exc}")
    report.swept = sweep_thread_dir(store.threads_dir, now_s=now / 1000, dry_run=dry_run).removed
    return report


def busy_since(store: ThreadStore, now_ms: int) -> int | None:
    """None if some thread holds work (a live run or an unexpired interrupt; an unreadable file counts
    as work), else the latest activity recorded in any thread file (0 with no files)."""
    latest = 0
    try:
        for thread_id in store.iter_thread_ids():
            state = store.read(thread_id)
            if state is None:
                continue
            if holds_work(state, now_ms):
                return None
            latest = max(latest, state.last_activity_ms)
    except StateError:
        return None
    return latest
