"""The worker's own loops: the beacon, retention and idle shutdown, and the drain wait.

They belong to the process that serves, not to the use cases: each loop asks the service
(`runs/service.BridgeService`, through the protocols below) only plain questions and commands, and
the worker's start-up decides when they run (docs/design.md#process-model): the gunicorn hooks and
`deploy/waitress_serve.py` start the maintenance loop and drain on SIGTERM; the beacon starts with a
worker's first admission on every host (`worker/host.py`), since uWSGI and mod_wsgi have no start-up hook.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from agui_bridge.protocol.events import now_ms
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import Runtime

#: The retention sweep (docs/design.md#retention) runs about hourly in every worker.
SWEEP_INTERVAL_S = 3600.0
#: The first sweep comes at a random time in this range after start, so workers started together spread out.
FIRST_SWEEP_S = (60.0, SWEEP_INTERVAL_S)
#: How often the beacon loop removes beacons and markers of workers gone for `STALE_BEACON_S`.
BEACON_CLEANUP_S = 600.0
STALE_BEACON_S = 3600.0
#: The drain's look at whether the active runs have ended on their own.
DRAIN_POLL_S = 0.1

log = logging.getLogger(__name__)


class HeldRun(Protocol):
    def request_cancel(self) -> None: ...


class BeaconSource(Protocol):
    """What the beacon loop publishes: this worker's owner id and the runs it streams."""

    owner: str
    beacons: Beacons

    def held_runs(self) -> Mapping[str, HeldRun]: ...


class Maintained(Protocol):
    def sweep_retention(self) -> None: ...

    def is_idle(self) -> bool: ...


class Drained(Protocol):
    @property
    def active_runs(self) -> int: ...

    def begin_drain(self) -> None:
        """Refuse new runs from now on and stop the runs nobody is reading."""

    def stop_streams(self) -> int:
        """Ask every stream still open to stop; how many there were."""


class WorkerService(BeaconSource, Maintained, Drained, Protocol):
    """Everything the worker's loops ask of the use cases."""


@dataclass
class BeaconState:
    """What one beacon pass remembers for the next."""

    published: frozenset[str] | None = None
    next_publish: float = 0.0
    next_cleanup: float = 0.0


def beacon_pass(source: BeaconSource, interval_s: float, state: BeaconState, now: float) -> None:
    """Pass on cancel markers addressed to this worker's runs; publish the beacon every interval or when
    the set of runs changed (docs/design.md#leases-and-beacons). OSError propagates."""
    holders = source.held_runs()
    for key in source.beacons.take_cancels(holders):
        holders[key].request_cancel()
    current = frozenset(holders)
    if current != state.published or now >= state.next_publish:
        source.beacons.publish(source.owner, current, now_ms())
        state.published, state.next_publish = current, now + interval_s
    if now >= state.next_cleanup:
        state.next_cleanup = now + BEACON_CLEANUP_S
        source.beacons.forget_stale(older_than_s=STALE_BEACON_S)


def maintenance_tick_s(idle_shutdown_s: float) -> float:
    """How often the maintenance loop wakes: often enough to notice idleness within a quarter of it."""
    return min(5.0, max(0.1, idle_shutdown_s / 4)) if idle_shutdown_s > 0 else 60.0


class WorkerLoops:
    """The loops of one worker process around one service."""

    def __init__(self, runtime: Runtime, service: WorkerService, *, beacon_interval_s: float, idle_shutdown_s: float):
        self.runtime = runtime
        self.service = service
        self.beacon_interval_s = beacon_interval_s
        self.idle_shutdown_s = idle_shutdown_s
        self._beacon_lock = threading.Lock()
        self._beacon_started = False

    # ---- beacon ------------------------------------------------------------------------------

    def ensure_beacon(self) -> None:
        """Start the beacon loop once (the app factory spawns nothing: the first admission calls this)."""
        with self._beacon_lock:
            if self._beacon_started:
                return
            self._beacon_started = True
        self.runtime.spawn(self._beacon_loop, name="beacon")

    def _beacon_loop(self) -> None:
        """Every second (or every interval when shorter): one `beacon_pass`."""
        state = BeaconState(next_cleanup=time.monotonic() + 60.0)
        while True:
            try:
                beacon_pass(self.service, self.beacon_interval_s, state, time.monotonic())
            except OSError:
                log.warning("worker beacon update failed", exc_info=True)
            self.runtime.sleep(min(1.0, self.beacon_interval_s))

    # ---- retention and idle shutdown ---------------------------------------------------------

    def start_maintenance(self, request_exit: Callable[[], None]) -> None:
        """The hourly retention sweep and, if configured, the idle-shutdown monitor (docs/design.md#idle-shutdown)."""
        self.runtime.spawn(self.maintain, request_exit, name="maintenance")

    def maintain(self, request_exit: Callable[[], None]) -> None:
        """Sweep about hourly; once the server is idle, ask for a graceful exit and end."""
        tick_s = maintenance_tick_s(self.idle_shutdown_s)
        next_sweep = time.monotonic() + random.uniform(*FIRST_SWEEP_S)
        while True:
            self.runtime.sleep(tick_s)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + SWEEP_INTERVAL_S
                self.service.sweep_retention()
            if self.service.is_idle():
                log.info("idle for %.1f s: requesting a graceful exit", self.idle_shutdown_s)
                request_exit()
                return

    # ---- drain -------------------------------------------------------------------------------

    def drain(self, wait_s: float, *, accepted_grace_s: float = 0.0) -> int:
        """Graceful shutdown (docs/design.md#shutdown-drain): refuse new runs, give active ones `wait_s` to end
        on their own, then stop the rest with RUN_ERROR (their A2A tasks cancelled). Returns how many
        streams had to be stopped.

        A host that stopped accepting connections first passes `accepted_grace_s`: the requests of the
        connections it took just before are still read and admitted for that long (they are its own work, and
        no other instance can serve them); only later requests (keep-alive) are refused."""
        deadline = time.monotonic() + wait_s
        grace = min(accepted_grace_s, wait_s)
        if grace > 0:
            self.runtime.sleep(grace)
        self.service.begin_drain()
        while self.service.active_runs and time.monotonic() < deadline:
            self.runtime.sleep(DRAIN_POLL_S)
        return self.service.stop_streams()
