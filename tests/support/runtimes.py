"""A thread runtime whose background tasks a test can wait for, instead of sleeping and hoping.

A run does some work off the caller's thread through its injected `Runtime` (a CancelTask after a
failure, for instance). A test that must show such work did *not* happen cannot wait for it to appear;
it waits until every task the run spawned has finished (`settle`), then asserts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agui_bridge.worker.runtime import Runtime, TaskHandle, ThreadRuntime
from agui_bridge.worker.start_gate import PriorityGate


class SettlingRuntime:
    """`ThreadRuntime`, recording each spawned task so that `settle()` can wait for all of them."""

    name = "threads"

    def __init__(self) -> None:
        self._threads = ThreadRuntime()
        self.start_gate: PriorityGate = self._threads.start_gate
        self._finished: list[tuple[str, threading.Event]] = []

    def spawn(
        self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
    ) -> TaskHandle:
        finished = threading.Event()
        self._finished.append((name, finished))

        def run(*call_args: Any) -> None:
            try:
                fn(*call_args)
            finally:
                finished.set()

        return self._threads.spawn(run, *args, name=name, on_stop=on_stop)

    def settle(self, timeout_s: float = 5.0) -> list[str]:
        """Wait until every task spawned so far has finished; returns their names, in spawn order."""
        for name, finished in list(self._finished):
            assert finished.wait(timeout_s), f"the background task {name} did not finish"
        return [name for name, _ in self._finished]

    def make_queue(self, maxsize: int) -> Any:
        return self._threads.make_queue(maxsize)

    def queue_get(self, q: Any, timeout: float) -> Any:
        return self._threads.queue_get(q, timeout)

    def queue_put(self, q: Any, item: Any, timeout: float | None) -> None:
        self._threads.queue_put(q, item, timeout)

    def sleep(self, seconds: float) -> None:
        self._threads.sleep(seconds)

    def monotonic(self) -> float:
        return self._threads.monotonic()

    def now_ms(self) -> int:
        return self._threads.now_ms()

    def stream_limit(self, max_active_runs: int, max_thread_streams: int) -> int:
        return self._threads.stream_limit(max_active_runs, max_thread_streams)


def _conforms(runtime: SettlingRuntime) -> Runtime:
    return runtime  # a type checker run over the tests proves it satisfies the port
