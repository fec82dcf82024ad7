"""What runs and the state store report for metrics, without knowing who listens (no prometheus here).

`app.create_app` plugs in `agui_bridge.observability.metrics.PrometheusObserver` when metrics are on; everything
else (tests, legacy hosts with metrics off) gets the no-op observer.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

from agui_bridge.observability.labels import InterruptsClosed


class Outcome(StrEnum):
    """How a run ended: the `outcome` label of `agui_runs_total` and the "run ended" log field.

    A stream settles its outcome once, at the first decision (see `runs/ending.RunEnd.end`); a later
    path (the generic error path after a cancel, say) cannot overwrite it. Observers, the log line and
    the trace receive this enum, never a bare string.
    """

    SUCCESS = "success"
    INTERRUPT = "interrupt"
    ERROR = "error"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SHUTDOWN = "shutdown"
    DISCONNECTED = "disconnected"


class RunObserver(Protocol):
    def run_started(self) -> None: ...
    def run_ended(self, outcome: Outcome, duration_s: float) -> None: ...
    def events(self, types: Iterable[str]) -> None: ...
    def heartbeat(self) -> None: ...
    def upstream_error(self, kind: str) -> None: ...
    def interrupts_announced(self, count: int) -> None: ...
    def interrupts_closed(self, count: int, how: InterruptsClosed) -> None: ...
    def time_to_run_started(self, seconds: float) -> None: ...
    def first_upstream_event(self, seconds: float) -> None: ...
    def resume_preflight(self, seconds: float) -> None: ...
    def run_detached(self) -> None: ...
    def window_expired(self) -> None: ...
    def reattached(self) -> None: ...


class NullObserver:
    """RunObserver and store.store.StoreObserver, doing nothing."""

    def run_started(self) -> None:
        pass

    def run_ended(self, outcome: Outcome, duration_s: float) -> None:
        pass

    def events(self, types: Iterable[str]) -> None:
        pass

    def heartbeat(self) -> None:
        pass

    def upstream_error(self, kind: str) -> None:
        pass

    def interrupts_announced(self, count: int) -> None:
        pass

    def interrupts_closed(self, count: int, how: InterruptsClosed) -> None:
        pass

    def lock_wait(self, seconds: float) -> None:
        pass

    def state_write(self, seconds: float) -> None:
        pass

    def time_to_run_started(self, seconds: float) -> None:
        pass

    def first_upstream_event(self, seconds: float) -> None:
        pass

    def resume_preflight(self, seconds: float) -> None:
        pass

    def run_detached(self) -> None:
        pass

    def window_expired(self) -> None:
        pass

    def reattached(self) -> None:
        pass


NULL_OBSERVER = NullObserver()
