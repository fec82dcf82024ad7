"""The runs this process is streaming, shared by every app instance in it.

A lease names its owner process (`host:pid:start`), and the worker beacon says which runs that
process still streams. Usually a process holds one app, but the in-process test client (and a
legacy host mounting the app twice) may hold several; their streams all belong to the same owner,
so the registry that feeds the beacon and routes cancel requests is per process, not per app.
"""

from __future__ import annotations

import threading
from typing import Protocol


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


class Cancellable(Stoppable, Protocol):
    def request_cancel(self) -> None: ...


class RunRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leased: dict[str, Cancellable] = {}

    def add(self, run_id: str, stream: Cancellable) -> None:
        with self._lock:
            self._leased[run_id] = stream

    def remove(self, run_id: str) -> None:
        with self._lock:
            self._leased.pop(run_id, None)

    def holds(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._leased

    def snapshot(self) -> dict[str, Cancellable]:
        with self._lock:
            return dict(self._leased)


#: The process-wide registry (one owner id per process).
PROCESS_RUNS = RunRegistry()
