"""The streams this process serves, shared by every app instance in it: the one registry of runs.

Everything that asks "what is this worker streaming?" reads this registry: the capacity check (runs,
admissions under way and reattach followers share the worker's stream cap), drain, idle shutdown (open
streams and the time of the last activity), the worker beacon and the cancel channel (the leased runs,
by run key). A stream is opened here by the service once it is admitted and closes itself when its
body ends (docs/design.md#run-built-once): nothing calls the service back.

A lease names its owner process (`host:pid:start`), and the worker beacon says which runs that
process still streams. Usually a process holds one app, but the in-process test client (and a
legacy host mounting the app twice) may hold several; their streams all belong to the same owner
and share the process's connections and host threads, so the registry is per process, not per app.

Leased runs are kept under their run key (executionId/runId, `store/lease.py`): two threads may
both use runId `run-1`, and the end of one must never unregister the other. A removal names the
stream it removes, so a run that ends after its successor on the same execution (a resume sent
right after RUN_FINISHED) cannot unregister that successor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


class Cancellable(Stoppable, Protocol):
    def request_cancel(self) -> None: ...


class RunRegistry:
    """`clock` is the runtime's `monotonic` (docs/design.md#runtime-backends): the process-wide registry's is
    `time.monotonic`, the clock of both production runtimes; a test on a `FakeClock` builds its own registry on
    that clock, so idle shutdown follows the time the test moves."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._leased: dict[str, Cancellable] = {}
        self._open: dict[Stoppable, None] = {}  # every open stream (runs and guidance), by identity
        self._admitting = 0  # requests between the capacity check and their stream's opening
        self._followers = 0  # reattach bodies open: they share the stream cap
        self._last_activity = self._clock()

    # ---- capacity ------------------------------------------------------------------------------

    def reserve(self, limit: int) -> bool:
        """Take an admission's place in the stream cap, if one is left (check and take are one step, so a
        burst on the thread back-end cannot overshoot the cap while its admissions wait on file locks).
        Every True is followed by exactly one `open` or `unreserve`."""
        with self._lock:
            if self._taken() >= limit:
                return False
            self._admitting += 1
            return True

    def unreserve(self) -> None:
        """The admission failed: its place is free again."""
        with self._lock:
            self._admitting -= 1

    def admit_follower(self, limit: int) -> Callable[[], None] | None:
        """A reattach follower's place in the stream cap, or None when full. Returns the release (idempotent)."""
        with self._lock:
            if self._taken() >= limit:
                return None
            self._followers += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._followers -= 1
                self._last_activity = self._clock()

        return release

    def _taken(self) -> int:
        return len(self._open) + self._admitting + self._followers

    # ---- open streams --------------------------------------------------------------------------

    def open(self, stream: Stoppable) -> None:
        """An admitted stream takes over its reservation."""
        with self._lock:
            self._admitting -= 1
            self._open[stream] = None
            self._last_activity = self._clock()

    def open_leased(self, run_key: str, stream: Cancellable) -> None:
        """An admitted run takes over its reservation; the beacon and the cancel channel know it by its key."""
        with self._lock:
            self._admitting -= 1
            self._open[stream] = None
            self._leased[run_key] = stream
            self._last_activity = self._clock()

    def close(self, stream: Stoppable, run_key: str | None = None) -> None:
        """The stream's body ended: it gives its place back (a stream never opened here changes nothing)."""
        with self._lock:
            if stream in self._open:
                del self._open[stream]
                self._last_activity = self._clock()
            if run_key is not None and self._leased.get(run_key) is stream:
                del self._leased[run_key]

    @property
    def active(self) -> int:
        """Streams open now (runs and guidance)."""
        return len(self._open)

    @property
    def taken(self) -> int:
        """Places taken in the stream cap: open streams, admissions under way and followers."""
        with self._lock:
            return self._taken()

    @property
    def admitting(self) -> int:
        return self._admitting

    @property
    def followers(self) -> int:
        return self._followers

    @property
    def last_activity(self) -> float:
        """The registry clock's time of the last admission, stream end or follower release (idle shutdown)."""
        return self._last_activity

    def touch(self) -> None:
        """Count now as activity (a worker's start: idleness is measured from it)."""
        with self._lock:
            self._last_activity = self._clock()

    def streams(self) -> list[Stoppable]:
        """Every open stream, for drain."""
        with self._lock:
            return list(self._open)

    # ---- leased runs, by run key (beacon, cancel routing) ---------------------------------------

    def add(self, run_key: str, stream: Cancellable) -> None:
        with self._lock:
            self._leased[run_key] = stream

    def remove(self, run_key: str, stream: Cancellable) -> None:
        """Unregister `stream`; a different stream registered under the same key stays."""
        with self._lock:
            if self._leased.get(run_key) is stream:
                del self._leased[run_key]

    def holds(self, run_key: str) -> bool:
        with self._lock:
            return run_key in self._leased

    def get(self, run_key: str) -> Cancellable | None:
        with self._lock:
            return self._leased.get(run_key)

    def snapshot(self) -> dict[str, Cancellable]:
        with self._lock:
            return dict(self._leased)


#: The process-wide registry (one owner id per process).
PROCESS_RUNS = RunRegistry()
