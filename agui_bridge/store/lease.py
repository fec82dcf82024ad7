"""The one rule that says whether a run lease is live, and the identity a live run is known by.

A runId is unique only within its thread, so every structure that tracks active runs (the process
registry, the worker beacons, the cancel markers) uses the *run key*: executionId + runId. An
executionId is a server-made UUID, unique across threads.

A lease is live while its owner process exists and either its grace period (`expires_at_ms`) has
not ended or the owner still streams the run (its beacon, or this process's own registry, lists the
run key). Admission, the status extension, cancel, retention (prune) and idle shutdown all ask
`lease_is_live`; nothing else decides it.
"""

from __future__ import annotations

from collections.abc import Callable

from agui_bridge.store.model import RunLease
from agui_bridge.store.owner import owner_is_alive
from agui_bridge.worker.beacon import Beacons

#: Whether `owner` still streams the run with this run key (beacon or in-process registry).
HoldsRun = Callable[[str, str], bool]
#: A bound liveness check: `(lease, now_ms) -> live?`.
LeaseCheck = Callable[[RunLease, int], bool]


def run_key(execution_id: str, run_id: str) -> str:
    """The identity of one run across threads (an executionId never repeats across threads)."""
    return f"{execution_id}/{run_id}"


def lease_key(lease: RunLease) -> str:
    return run_key(lease.execution_id, lease.run_id)


def lease_is_live(
    lease: RunLease | None,
    now_ms: int,
    *,
    is_alive: Callable[[str], bool] = owner_is_alive,
    holds_run: HoldsRun | None = None,
) -> bool:
    """A live owner keeps a lease through its grace period, then only while it streams the run."""
    if lease is None or not is_alive(lease.owner):
        return False
    if lease.expires_at_ms > now_ms:
        return True
    return holds_run is not None and holds_run(lease.owner, lease_key(lease))


def beacon_check(beacons: Beacons, fresh_ms: int, is_alive: Callable[[str], bool] = owner_is_alive) -> LeaseCheck:
    """The liveness check of a process that streams nothing itself (`state prune`): beacons only."""

    def check(lease: RunLease, now_ms: int) -> bool:
        def holds(owner: str, key: str) -> bool:
            return beacons.holds(owner, key, now_ms, fresh_ms)

        return lease_is_live(lease, now_ms, is_alive=is_alive, holds_run=holds)

    return check
