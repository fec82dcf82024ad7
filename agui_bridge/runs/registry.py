"""The runs this process is streaming, shared by every app instance in it.

A lease names its owner process (`host:pid:start`), and the worker beacon says which runs that
process still streams. Usually a process holds one app, but the in-process test client (and a
legacy host mounting the app twice) may hold several; their streams all belong to the same owner,
so the registry that feeds the beacon and routes cancel requests is per process, not per app.

Runs are registered under their run key (executionId/runId, `store/lease.py`): two threads may
both use runId `run-1`, and the end of one must never unregister the other. A removal names the
stream it removes, so a run that ends after its successor on the same execution (a resume sent
right after RUN_FINISHED) cannot unregister that successor.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


class Cancellable(Stoppable, Protocol):
    def request_cancel(self) -> None: ...


class TrackedRun(Stoppable, Protocol):
    """What the service tracks of a stream: its run key and the client socket it bounded."""

    @property
    def key(self) -> str: ...

    client_socket: Any


class RunRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leased: dict[str, Cancellable] = {}

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
