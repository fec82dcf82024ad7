"""A fake clock a test advances, and a runtime that tells its time, instead of sleeping for time to pass.

Runs read the time through their injected `Runtime` (`monotonic()` for heartbeat pacing, `now_ms()` for
interrupt expiry and leases: docs/design.md#runtime-backends), so a test that checks what happens once an
interval has passed moves this clock past it and asserts at once: no sleep, no timing margin to tune.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agui_bridge.worker.runtime import Empty, Runtime, TaskHandle
from agui_bridge.worker.start_gate import PriorityGate

#: 2026-01-01T00:00:00Z: a fixed wall-clock start, so stamps written by a test are the same on every run.
EPOCH_START_MS = 1_767_225_600_000


class FakeClock:
    """Both clocks of a runtime, moving only when the test says; they move together."""

    def __init__(self, monotonic_s: float = 1_000.0, now_ms: int = EPOCH_START_MS) -> None:
        self._monotonic_s = monotonic_s
        self._now_ms = now_ms

    def monotonic(self) -> float:
        return self._monotonic_s

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a monotonic clock never goes back"
        self._monotonic_s += seconds
        self._now_ms += round(seconds * 1000)


class ClockedRuntime:
    """A runtime whose time is a `FakeClock`'s; tasks, queues and sleeps are the wrapped one's. A queue wait
    that times out lets its timeout pass on the clock too, as a real one would have: a stream waiting for
    its next item then finds its heartbeat due."""

    def __init__(self, inner: Runtime, clock: FakeClock) -> None:
        self._inner = inner
        self.clock = clock
        self.name = inner.name
        self.start_gate: PriorityGate = inner.start_gate

    def monotonic(self) -> float:
        return self.clock.monotonic()

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def spawn(
        self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
    ) -> TaskHandle:
        return self._inner.spawn(fn, *args, name=name, on_stop=on_stop)

    def make_queue(self, maxsize: int) -> Any:
        return self._inner.make_queue(maxsize)

    def queue_get(self, q: Any, timeout: float) -> Any:
        try:
            return self._inner.queue_get(q, timeout)
        except Empty:
            self.clock.advance(max(timeout, 0.0))
            raise

    def queue_put(self, q: Any, item: Any, timeout: float | None) -> None:
        self._inner.queue_put(q, item, timeout)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def stream_limit(self, max_active_runs: int, max_thread_streams: int) -> int:
        return self._inner.stream_limit(max_active_runs, max_thread_streams)


def _conforms(runtime: ClockedRuntime) -> Runtime:
    return runtime  # a type checker run over the tests proves it satisfies the port
