"""Hub watchdog: report a greenlet that keeps the gevent hub from running (docs/design.md#hub-watchdog).

Built on gevent's monitor thread: every 1/`SAMPLES_PER_THRESHOLD` of the threshold it checks whether any
greenlet switch happened since its last check, and publishes `gevent.events.EventLoopBlocked` (with the
blocked greenlet's stack) when none did. One such window is not yet a report here: consecutive windows of
the same greenlet add up, each counting only the time the hub's thread was not waiting for a CPU
(`/proc/self/task/<tid>/schedstat`, where the kernel keeps it), directly or behind another thread of the
process that held the GIL and was itself waiting for a CPU. A loaded machine that leaves the thread runnable
but unscheduled therefore reports nothing, while a greenlet that holds the hub (CPU loop, fsync, whole-file
read, a lock that blocks the thread) is reported once per stall when its own time reaches the threshold.
Only stdlib at module level: gunicorn_config imports this in the master.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The monitor samples this many times per threshold: a stall is always caught once it held the hub for
#: 1 + 2/SAMPLES_PER_THRESHOLD thresholds (whole windows count), and reported one window later (BlockAccounting).
SAMPLES_PER_THRESHOLD = 4
#: The message of every report's log record (the test suite and the bench find reports by it).
REPORT_MESSAGE = "hub blocked"
LOGGER_NAME = __name__
#: How agui_bridge.observability.logs.TextFormatter indents the lines of a record's stack.
CONTINUATION = "    "


@dataclass(frozen=True)
class BlockReport:
    """One stall: who held the hub, for how long (own time so far), since when, and where."""

    greenlet: str
    blocked_ms: int
    started_at: float  # time.time() of the first window without a switch
    stack: str


@dataclass
class _Stall:
    greenlet: object
    own_s: float
    started_at: float
    stack: str = ""
    reported: bool = False


class BlockAccounting:
    """Turns the monitor's windows into reports; pure (fed samples, no clock, no I/O).

    The kernel adds a wait for a CPU to the thread's count only when the wait ends, so a wait still going
    on when a window closes shows up in the next one: a stall's total is confirmed one window later, with
    that window's wait taken off, before it is reported.
    """

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self._stall: _Stall | None = None

    @property
    def counting(self) -> bool:
        """A stall is being counted (its next window may still confirm or take off time)."""
        return self._stall is not None

    def sample(
        self, blocked: object | None, wall_s: float, waited_s: float, now: float, stack: str = ""
    ) -> BlockReport | None:
        """A window of `wall_s` seconds ended at `now`: `blocked` is the greenlet that ran through it without a
        switch (None: the hub ran); `waited_s` is how long the thread waited for a CPU meanwhile."""
        waited_s = max(0.0, waited_s)
        report = None
        stall = self._stall
        if stall is not None and not stall.reported and stall.own_s - waited_s >= self.threshold_s:
            stall.reported = True
            own_ms = round((stall.own_s - waited_s) * 1000)
            report = BlockReport(str(stall.greenlet), own_ms, stall.started_at, stall.stack)
        if blocked is None:
            self._stall = None
            return report
        if stall is None or stall.greenlet is not blocked:
            stall = self._stall = _Stall(blocked, 0.0, now - wall_s)
        stall.own_s = max(0.0, stall.own_s + wall_s - waited_s)
        stall.stack = stack
        return report


def run_queue_wait_s(schedstat: Path) -> float:
    """Seconds this thread spent runnable but waiting for a CPU (0 where the kernel does not say)."""
    try:
        return int(schedstat.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def others_waited_s(before: dict[int, float], now: dict[int, float]) -> float:
    """The longest wait for a CPU of any other thread between two readings (threads in both only).

    A thread of this process that is runnable holds the GIL (or runs native code without it); while it waits
    for a CPU, the hub waits for the GIL behind it, sleeping, which its own count does not show."""
    return max((now[tid] - waited for tid, waited in before.items() if tid in now), default=0.0)


def blocked_stack(report_lines: list[str]) -> str:
    """The blocked greenlet's stack out of gevent's report (its lines between 'Blocked Stack' and 'Info:')."""
    text = "\n".join(report_lines)
    start = text.find("Blocked Stack")
    end = text.find("\nInfo:", start)
    if start < 0:
        return text
    body = text[text.find("\n", start) + 1 : end if end >= 0 else len(text)]
    return body.rstrip("\n")


class HubWatchdog:
    """Runs in gevent's monitor thread; hands each report to `emit` in the hub's own thread."""

    def __init__(self, threshold_s: float, emit: Callable[[BlockReport], None]) -> None:
        self.accounting = BlockAccounting(threshold_s)
        self.threshold_s = threshold_s
        self._emit = emit
        self._pending: Any = None
        self._tid = _native_thread_id()
        self._schedstat = Path(f"/proc/self/task/{self._tid}/schedstat")
        self._last_at = time.monotonic()
        self._last_waited = run_queue_wait_s(self._schedstat)
        #: The other threads' waits at the last window, read only while a stall is counted (a dozen small
        #: /proc reads per window then, none otherwise).
        self._others: dict[int, float] | None = None
        self._hub: Any = None

    def install(self) -> None:
        """Start gevent's monitor on this thread's hub at the sampling period, with our accounting after it."""
        import gevent
        from gevent import events

        period = self.threshold_s / SAMPLES_PER_THRESHOLD
        gevent.config.monitor_thread = True
        gevent.config.max_blocking_time = period
        gevent.config.print_blocking_reports = False  # one log record per stall instead (see _deliver)
        self._hub = gevent.get_hub()
        events.subscribers.append(self._on_event)
        with warnings.catch_warnings():  # gevent's memory monitor wants psutil; we do not use it
            warnings.filterwarnings("ignore", message="Unable to monitor memory usage")
            monitor = self._hub.start_periodic_monitoring_thread()
        gevent.config.monitor_thread = False  # a hub another thread may start later gets no monitor of its own
        monitor.add_monitoring_function(self._on_window, period)

    def _on_event(self, event: object) -> None:
        """zope.event subscriber (monitor thread): keep this window's EventLoopBlocked for _on_window."""
        from gevent.events import EventLoopBlocked

        if isinstance(event, EventLoopBlocked) and getattr(event, "hub", None) is self._hub:
            self._pending = event

    def _on_window(self, hub: Any) -> None:
        """Monitor thread, right after gevent's own check of the same window."""
        self.window_ended(hub, time.monotonic())

    def window_ended(self, hub: Any, now: float) -> None:
        """One window of the monitor, ended at `now` (monotonic seconds)."""
        event, self._pending = self._pending, None
        waited = run_queue_wait_s(self._schedstat)
        wall, wait = now - self._last_at, waited - self._last_waited
        self._last_at, self._last_waited = now, waited
        if event is not None or self.accounting.counting:
            wait = max(wait, self._others_waited())
        else:
            self._others = None
        blocked = None if event is None else event.greenlet
        stack = "" if event is None else blocked_stack(list(event.info))
        report = self.accounting.sample(blocked, wall, wait, time.time(), stack)
        if report is not None:
            hub.loop.run_callback_threadsafe(self._deliver, report)

    def _others_waited(self) -> float:
        """How long another thread of this process waited for a CPU since the last window of this stall (0 for
        its first window: no reading before it)."""
        now = _other_threads_waits(self._tid)
        before, self._others = self._others, now
        return 0.0 if before is None else others_waited_s(before, now)

    def _deliver(self, report: BlockReport) -> None:
        """In the hub: a greenlet of its own logs (logging's lock must never be taken by the hub itself)."""
        import gevent

        gevent.spawn(self._emit, report)


def _other_threads_waits(own_tid: int) -> dict[int, float]:
    """Each other thread's run-queue wait so far, by thread id (threads that end meanwhile are skipped)."""
    try:
        tids = [int(name) for name in os.listdir("/proc/self/task")]
    except (OSError, ValueError):
        return {}
    return {tid: run_queue_wait_s(Path(f"/proc/self/task/{tid}/schedstat")) for tid in tids if tid != own_tid}


def _native_thread_id() -> int:
    """The kernel's id of this thread (gevent may patch `threading`; the original answers)."""
    from gevent import monkey

    get_native_id: Callable[[], int] = monkey.get_original("threading", "get_native_id")
    return get_native_id()


def log_report(report: BlockReport) -> None:
    """The production sink: one WARNING record per stall. The blocked greenlet's stack is the record's
    stack, so both log formats render it as they render a traceback (indented lines, or `stack` in JSON)."""
    if not log.isEnabledFor(logging.WARNING):
        return
    record = log.makeRecord(
        log.name, logging.WARNING, __file__, 0, "%s for at least %d ms by %s",
        (REPORT_MESSAGE, report.blocked_ms, report.greenlet), None,
        extra={"blocked_ms": report.blocked_ms, "blocked_since": round(report.started_at, 3)},
        sinfo="Blocked stack (most recent call last):\n" + report.stack,
    )  # fmt: skip
    log.handle(record)


def count_and_log_report(report: BlockReport) -> None:
    """With metrics on: `agui_hub_blocked_total` counts the stalls the log shows."""
    from agui_bridge.observability.metrics import HUB_BLOCKED

    HUB_BLOCKED.inc()
    log_report(report)


def start_hub_watchdog(threshold_ms: float, emit: Callable[[BlockReport], None]) -> HubWatchdog | None:
    """Called in a patched process, on the hub's thread (gunicorn's post_worker_init); 0 is off. `emit` gets
    each report in a greenlet of its own."""
    if threshold_ms <= 0:
        return None
    watchdog = HubWatchdog(threshold_ms / 1000.0, emit)
    watchdog.install()
    log.info("hub watchdog on: reporting stalls of %g ms or more", threshold_ms)
    return watchdog


@dataclass(frozen=True)
class LoggedReport:
    """A report read back out of a server's log (the test suite fails on it, the bench records it)."""

    blocked_ms: int
    blocked_since: float
    stack: str
    record: str


def logged_reports(text: str) -> list[LoggedReport]:
    """Every watchdog record in a log's text, JSON or text format (other records are skipped)."""
    found = [_parse_record(lines) for lines in _records(text)]
    return [report for report in found if report is not None]


def _records(text: str) -> list[list[str]]:
    """Log lines grouped per record: a text record's continuation lines are indented
    (agui_bridge.observability.logs)."""
    grouped: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(CONTINUATION) and grouped:
            grouped[-1].append(line)
        else:
            grouped.append([line])
    return grouped


def _parse_record(lines: list[str]) -> LoggedReport | None:
    line = lines[0]
    if LOGGER_NAME not in line or REPORT_MESSAGE not in line:
        return None
    if line.lstrip().startswith("{"):
        try:
            document = json.loads(line)
        except ValueError:
            return None
        if document.get("logger") != LOGGER_NAME:
            return None
        return LoggedReport(
            int(document.get("blocked_ms", 0)), float(document.get("blocked_since", 0.0)),
            str(document.get("stack", "")), line,
        )  # fmt: skip
    stack = "\n".join(continued[len(CONTINUATION) :] for continued in lines[1:])
    return LoggedReport(
        int(_text_field(line, "blocked_ms") or 0), float(_text_field(line, "blocked_since") or 0.0),
        stack, "\n".join(lines),
    )  # fmt: skip


def _text_field(line: str, name: str) -> str | None:
    """`name=value` of agui_bridge.observability.logs.TextFormatter (a quoted value is a JSON string)."""
    marker = f" {name}="
    start = line.find(marker)
    if start < 0:
        return None
    rest = line[start + len(marker) :]
    if rest.startswith('"'):
        value, _ = json.JSONDecoder().raw_decode(rest)
        return str(value)
    return rest.split(" ", 1)[0]
