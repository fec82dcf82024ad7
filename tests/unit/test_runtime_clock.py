"""Both runtime back-ends tell the time a run reads (docs/design.md#where-time-comes-from), and the tests'
fake clock stands in for it."""

from __future__ import annotations

import queue
import time

import pytest

from agui_bridge.worker.runtime import Empty, GeventRuntime, Runtime, ThreadRuntime
from tests.support.clock import EPOCH_START_MS, ClockedRuntime, FakeClock


@pytest.mark.parametrize("runtime", [ThreadRuntime(), GeventRuntime()], ids=["threads", "gevent"])
def test_each_back_end_reads_the_system_clocks(runtime: Runtime) -> None:
    before_ms, before_s = time.time_ns() // 1_000_000, time.monotonic()
    now_ms, now_s = runtime.now_ms(), runtime.monotonic()
    assert before_ms <= now_ms <= time.time_ns() // 1_000_000
    assert before_s <= now_s <= time.monotonic()


def test_a_clocked_runtime_tells_the_fake_time_and_moves_only_when_told() -> None:
    clock = FakeClock()
    runtime = ClockedRuntime(ThreadRuntime(), clock)
    assert (runtime.monotonic(), runtime.now_ms()) == (1_000.0, EPOCH_START_MS)
    clock.advance(2.5)
    assert (runtime.monotonic(), runtime.now_ms()) == (1_002.5, EPOCH_START_MS + 2_500)
    with pytest.raises(AssertionError):
        clock.advance(-1.0)


def test_a_queue_wait_that_times_out_lets_its_timeout_pass_on_the_fake_clock() -> None:
    clock = FakeClock()
    runtime = ClockedRuntime(ThreadRuntime(), clock)
    waiting: queue.Queue[str] = runtime.make_queue(1)
    with pytest.raises(Empty):
        runtime.queue_get(waiting, 0.01)
    assert runtime.monotonic() == pytest.approx(1_000.01)
    runtime.queue_put(waiting, "item", None)
    assert runtime.queue_get(waiting, 0.01) == "item" and runtime.monotonic() == pytest.approx(1_000.01)
