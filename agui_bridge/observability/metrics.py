"""Prometheus metrics (prometheus_client; multiprocess mode under gunicorn, docs/design.md#observability).

Under `agui-bridge serve` the CLI points PROMETHEUS_MULTIPROC_DIR at a fresh directory before gunicorn
starts, so every worker writes its own files and a scrape on any worker sums them; gunicorn's
`child_exit` hook marks dead workers. Without that variable (Flask test client, legacy hosts) the
process-local default registry is used. Labels are bounded vocabularies only: never a thread or run id.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from agui_bridge.observability.labels import UPSTREAM_ERROR_KINDS, InterruptsClosed

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

RUNS = Counter("agui_runs_total", "Runs by how they ended.", ["outcome"])
RUN_DURATION = Histogram(
    "agui_run_duration_seconds", "Run duration, from admission to the end of the stream.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
)  # fmt: skip
ACTIVE_RUNS = Gauge("agui_active_runs", "Streams open now.", multiprocess_mode="livesum")
EVENTS = Counter("agui_sse_events_total", "AG-UI events written, by type.", ["type"])
HEARTBEATS = Counter("agui_heartbeats_total", "': heartbeat' comments written.")
UPSTREAM_ERRORS = Counter("agui_upstream_errors_total", "A2A failures that ended a run, by kind.", ["kind"])
INTERRUPTS_ANNOUNCED = Counter("agui_interrupts_announced_total", "Interrupts committed and announced.")
INTERRUPTS_CLOSED = Counter(
    "agui_interrupts_closed_total", "Pending interrupts that left the pending set, by how.", ["how"]
)
INTERRUPTS_PENDING = Gauge(
    "agui_interrupts_pending",
    "Interrupts announced and not yet closed by the live workers (approximate across worker restarts).",
    multiprocess_mode="livesum",
)
STATE_WRITE = Histogram(
    "agui_state_write_seconds", "Atomic thread-file writes (temp file, fsync, replace, directory fsync).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)  # fmt: skip
LOCK_WAIT = Histogram(
    "agui_lock_wait_seconds", "Time spent waiting for a thread's file lock.",
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
)  # fmt: skip
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TIME_TO_RUN_STARTED = Histogram(
    "agui_time_to_run_started_seconds",
    "From the start of run validation to RUN_STARTED handed to the server (validation and admission).",
    buckets=_LATENCY_BUCKETS,
)
TIME_TO_FIRST_UPSTREAM_EVENT = Histogram(
    "agui_time_to_first_upstream_event_seconds",
    "From the first A2A call of a run's stream to the first A2A event read (kernel latency).",
    buckets=_LATENCY_BUCKETS,
)
RESUME_PREFLIGHT = Histogram(
    "agui_resume_preflight_seconds",
    "Resume preflight: session restore, GetTask, Pipeline catch-up and reconciliation, before any answer.",
    buckets=_LATENCY_BUCKETS,
)

RUNS_DETACHED = Counter("agui_runs_detached_total", "Runs whose last reader left while they went on (reattach window).")
REATTACHES = Counter("agui_reattaches_total", "Reattach streams opened on a run's record.")
RUNS_WINDOW_EXPIRED = Counter(
    "agui_runs_window_expired_total", "Detached runs cancelled because no reader came back within the window."
)
HUB_BLOCKED = Counter(
    "agui_hub_blocked_total",
    "Stalls of a worker's gevent hub reported by the hub watchdog (--hub-watchdog-ms; 0 while it is off).",
)


def export_known_labels() -> None:
    """Create the child of every known label value, so `/metrics` shows each labelled counter at 0 from the
    start (a dashboard then shows 0 rather than "No data") and `rate()` sees the first increment."""
    for kind in UPSTREAM_ERROR_KINDS:
        UPSTREAM_ERRORS.labels(kind)
    for how in InterruptsClosed:
        INTERRUPTS_CLOSED.labels(how)


class PrometheusObserver:
    """Implements runs.observer.RunObserver and StoreObserver.

    Label children are cached: `labels()` per event showed up in the throughput profile.
    """

    def __init__(self) -> None:
        self._events: dict[str, Any] = {}
        export_known_labels()

    def run_started(self) -> None:
        ACTIVE_RUNS.inc()

    def run_ended(self, outcome: str, duration_s: float) -> None:
        ACTIVE_RUNS.dec()
        RUNS.labels(outcome).inc()
        RUN_DURATION.observe(duration_s)

    def events(self, types: Iterable[str]) -> None:
        children = self._events
        for event_type in types:
            child = children.get(event_type)
            if child is None:
                child = children[event_type] = EVENTS.labels(event_type)
            child.inc()

    def heartbeat(self) -> None:
        HEARTBEATS.inc()

    def upstream_error(self, kind: str) -> None:
        UPSTREAM_ERRORS.labels(kind).inc()

    def interrupts_announced(self, count: int) -> None:
        INTERRUPTS_ANNOUNCED.inc(count)
        INTERRUPTS_PENDING.inc(count)

    def interrupts_closed(self, count: int, how: InterruptsClosed) -> None:
        INTERRUPTS_CLOSED.labels(how).inc(count)
        INTERRUPTS_PENDING.dec(count)

    def lock_wait(self, seconds: float) -> None:
        LOCK_WAIT.observe(seconds)

    def state_write(self, seconds: float) -> None:
        STATE_WRITE.observe(seconds)

    def time_to_run_started(self, seconds: float) -> None:
        TIME_TO_RUN_STARTED.observe(seconds)

    def first_upstream_event(self, seconds: float) -> None:
        TIME_TO_FIRST_UPSTREAM_EVENT.observe(seconds)

    def resume_preflight(self, seconds: float) -> None:
        RESUME_PREFLIGHT.observe(seconds)

    def run_detached(self) -> None:
        RUNS_DETACHED.inc()

    def window_expired(self) -> None:
        RUNS_WINDOW_EXPIRED.inc()

    def reattached(self) -> None:
        REATTACHES.inc()


def render() -> tuple[bytes, str]:
    """The exposition text: summed over all workers in multiprocess mode."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
