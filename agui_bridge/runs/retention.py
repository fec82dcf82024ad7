"""Bounded state (docs/design.md#decision-bounded-state) and idleness (docs/design.md#idle-shutdown),
decided from the thread files alone.

A thread file may go when nothing can still need it: no pending interrupt, no live lease, and no
activity for the retention period. Each removal re-reads the file under its lock, so a run admitted
a moment ago on another worker is never pruned from under it. "Live lease" is `state.lease`'s one
rule (`lease_is_live`): a run past its grace period counts while its worker's beacon lists it, so
idle shutdown never stops the server under another worker's live run. Cancel markers of runs that
are no longer live are removed too (the owner removes its own when its run ends; this catches the
rest, e.g. a worker that died).

The per-thread loops (lock, read, parse) run where the caller runs; under gevent that is the hub, so
they take a `yield_turn` callable called after each file (the service passes `runtime.sleep(0)`), and
one file's work is the longest the hub waits (docs/design.md#retention).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agui_bridge.config.settings import Settings
from agui_bridge.reattach.retention import OwnerAlive, sweep_records
from agui_bridge.reattach.status import OwnerLiveness
from agui_bridge.store import model
from agui_bridge.store.errors import InvalidThreadId
from agui_bridge.store.lease import LeaseCheck, lease_is_live, lease_key
from agui_bridge.store.store import StateError, ThreadStore
from agui_bridge.store.sweep import sweep_thread_dir
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import MAINTENANCE

DAY_MS = 24 * 3600 * 1000
#: A marker whose run cannot be read back (an interrupted write) goes after this many seconds.
UNREADABLE_MARKER_AGE_S = 600.0
#: What a record owner's liveness is judged with when the caller has no settings (`Settings`' defaults).
_DEFAULTS = Settings()
DEFAULT_BEACON_INTERVAL_S = _DEFAULTS.beacon_interval_s
DEFAULT_LEASE_GRACE_S = _DEFAULTS.lease_ttl_s


YieldTurn = Callable[[], None]


def _no_yield() -> None:
    """Plain threads (the CLI, tests): nothing else shares this thread."""


def _grace_only(lease: model.RunLease, now_ms: int) -> bool:
    return lease_is_live(lease, now_ms)


def prunable(state: model.ThreadState, now_ms: int, retention_ms: int, lease_live: LeaseCheck = _grace_only) -> bool:
    lease = state.active_run
    return (
        not state.execution.pending
        and (lease is None or not lease_live(lease, now_ms))
        and state.last_activity_ms <= now_ms - retention_ms
    )


def holds_work(state: model.ThreadState, now_ms: int, lease_live: LeaseCheck = _grace_only) -> bool:
    """A live lease or an unexpired pending interrupt: the server is not idle while one exists."""
    lease = state.active_run
    if lease is not None and lease_live(lease, now_ms):
        return True
    return any(entry.expires_at_ms > now_ms for entry in state.execution.pending.values())


@dataclass
class PruneReport:
    examined: int = 0
    removed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)  # orphaned lock and stale temp files (state.sweep)
    markers_removed: int = 0
    records_expired: int = 0  # run records past their replay retention, now tombstones (410 on reattach)
    tombstones_removed: int = 0
    records_evicted: int = 0  # ended records tombstoned early: replay/ was over its budget or short of disk
    records_skipped: bool = False  # another process was sweeping the records


def prune(
    store: ThreadStore,
    *,
    retention_days: float,
    now_ms: int | None = None,
    dry_run: bool = False,
    lease_live: LeaseCheck = _grace_only,
    replay_retention_s: float = 3600.0,
    replay_budget_bytes: int = 0,
    replay_min_free_bytes: int = 0,
    record_owner_alive: OwnerAlive | None = None,
    yield_turn: YieldTurn = _no_yield,
) -> PruneReport:
    """Remove (or with `dry_run` only list) the thread files past retention with nothing to keep,
    the cancel markers of runs that are no longer live, and the run records (reattach/record.py) past
    `replay_retention_s` (their tombstones go with the thread files' retention) or, oldest ended first,
    beyond `replay_budget_bytes` / short of `replay_min_free_bytes`. The records' sweep runs off the hub
    (docs/design.md#retention); `record_owner_alive` defaults to pid-or-beacon liveness (`OwnerLiveness`).
    `yield_turn` is called after each thread file and cancel marker, so a sweep on the hub lets the
    other greenlets run between files."""
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
                if state is None or not prunable(state, now, retention_ms, lease_live):
                    continue
                if not dry_run:
                    txn.delete()
                report.removed.append(thread_id)
        except StateError as exc:
            report.problems.append(f"{thread_id}: {exc}")
        finally:
            yield_turn()
    leftovers = functools.partial(sweep_thread_dir, store.threads_dir, now_s=now / 1000, dry_run=dry_run)
    report.swept = MAINTENANCE.run(leftovers).removed
    report.markers_removed = sweep_cancel_markers(store, now, lease_live, dry_run=dry_run, yield_turn=yield_turn)
    owner_alive = record_owner_alive or OwnerLiveness(
        store.root, beacon_interval_s=DEFAULT_BEACON_INTERVAL_S, grace_s=DEFAULT_LEASE_GRACE_S
    )
    sweep = functools.partial(
        sweep_records, store.root, retention_s=replay_retention_s, tombstone_retention_s=retention_days * 86400.0,
        now_s=now / 1000, owner_alive=owner_alive, dry_run=dry_run, budget_bytes=replay_budget_bytes,
        min_free_bytes=replay_min_free_bytes,
    )  # fmt: skip
    records = MAINTENANCE.run(sweep)
    report.records_expired, report.tombstones_removed = records.tombstoned, records.removed
    report.records_evicted, report.records_skipped = records.evicted, records.skipped
    return report


def prune_options(settings: Settings) -> dict[str, Any]:
    """`prune`'s retention, budget and liveness arguments from the settings (the server's and the CLI's)."""
    return {
        "retention_days": settings.state_retention_days,
        "replay_retention_s": settings.reattach_retention_s,
        "replay_budget_bytes": settings.reattach_budget_bytes,
        "replay_min_free_bytes": settings.reattach_min_free_bytes,
        "record_owner_alive": OwnerLiveness(
            settings.state_dir, beacon_interval_s=settings.beacon_interval_s, grace_s=settings.lease_ttl_s
        ),
    }


def sweep_cancel_markers(
    store: ThreadStore,
    now_ms: int,
    lease_live: LeaseCheck = _grace_only,
    *,
    dry_run: bool = False,
    yield_turn: YieldTurn = _no_yield,
) -> int:
    """Remove the cancel markers whose run no longer holds a live lease; returns how many."""
    removed = 0
    for marker in Beacons(store.root).cancel_markers():
        yield_turn()
        if marker.thread_id is None or marker.run_key is None:
            keep = marker.mtime * 1000 > now_ms - UNREADABLE_MARKER_AGE_S * 1000
        else:
            try:
                state = store.read(marker.thread_id)
            except InvalidThreadId:
                state = None  # names no thread file: no run can be live there
            except (StateError, ValueError):
                continue  # unreadable state: decided on a later sweep
            lease = state.active_run if state is not None else None
            keep = lease is not None and lease_key(lease) == marker.run_key and lease_live(lease, now_ms)
        if keep:
            continue
        removed += 1
        if not dry_run:
            try:
                marker.path.unlink()
            except OSError:
                removed -= 1
    return removed


def busy_since(
    store: ThreadStore, now_ms: int, lease_live: LeaseCheck = _grace_only, yield_turn: YieldTurn = _no_yield
) -> int | None:
    """None if some thread holds work (a live run or an unexpired interrupt; an unreadable file counts
    as work), else the latest activity recorded in any thread file (0 with no files). `yield_turn` runs
    before each file, as in `prune`."""
    latest = 0
    try:
        for thread_id in store.iter_thread_ids():
            yield_turn()
            state = store.read(thread_id)
            if state is None:
                continue
            if holds_work(state, now_ms, lease_live):
                return None
            latest = max(latest, state.last_activity_ms)
    except StateError:
        return None
    return latest
