"""The start gate (docs/design.md#start-gate): bursts admitted a few at a time, admissions before kernel opens."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest

from agui_bridge.runs import pump as pump_mod
from agui_bridge.runs.detach import check_interval
from agui_bridge.runs.pump import PumpFailed, Signal, read_into
from agui_bridge.worker.runtime import GeventRuntime, ThreadRuntime
from agui_bridge.worker.start_gate import PriorityGate, admission_slot


def test_at_most_limit_holders_and_release_returns_the_slot() -> None:
    gate = PriorityGate(2, threading.Event)
    assert gate.acquire(0) and gate.acquire(0)
    assert not gate.acquire(0.01)  # full: a timed-out wait holds nothing
    gate.release()
    assert gate.acquire(0)


def test_urgent_waiters_are_served_before_later_ones_in_arrival_order() -> None:
    gate = PriorityGate(1, gevent.event.Event)
    assert gate.acquire(0)
    order: list[str] = []

    def take(name: str, urgent: bool) -> None:
        assert gate.acquire(5, urgent=urgent)
        order.append(name)
        gevent.sleep(0.01)
        gate.release()

    waiters = [gevent.spawn(take, "open-1", False), gevent.spawn(take, "admit-1", True)]
    gevent.sleep(0)
    waiters += [gevent.spawn(take, "open-2", False), gevent.spawn(take, "admit-2", True)]
    gevent.sleep(0)
    gate.release()
    gevent.joinall(waiters, timeout=5, raise_error=True)
    assert order == ["admit-1", "admit-2", "open-1", "open-2"]


def test_a_later_request_does_not_overtake_queued_ones() -> None:
    gate = PriorityGate(1, gevent.event.Event)
    assert gate.acquire(0)
    waiter = gevent.spawn(gate.acquire, 5, urgent=False)
    gevent.sleep(0)
    gate.release()  # handed to the waiter, not to the pool
    assert not gate.acquire(0, urgent=False)
    assert waiter.get(timeout=5) is True


def test_a_waiter_killed_after_the_handover_passes_its_slot_on() -> None:
    gates: list[PriorityGate] = []

    class DyingEvent(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            gates[0].release()  # the holder leaves: its slot is handed to this waiter...
            raise KeyboardInterrupt  # ...which is killed before it runs

    gate = PriorityGate(1, DyingEvent)
    gates.append(gate)
    assert gate.acquire(0)
    with pytest.raises(KeyboardInterrupt):
        gate.acquire(5)
    assert gate.acquire(0)  # back in the pool, not lost with the dead waiter


def test_a_waiter_killed_while_queued_leaves_no_trace() -> None:
    gate = PriorityGate(1, gevent.event.Event)
    assert gate.acquire(0)
    doomed = gevent.spawn(gate.acquire, 5)
    gevent.sleep(0)
    doomed.kill(block=True)
    gate.release()
    assert gate.acquire(0)


def test_runtimes_carry_one_gate_each() -> None:
    assert isinstance(ThreadRuntime().start_gate, PriorityGate)
    assert isinstance(GeventRuntime().start_gate, PriorityGate)


def test_an_admission_holds_its_slot_only_while_it_is_admitted() -> None:
    gate = PriorityGate(1, threading.Event)
    with admission_slot(gate):
        assert not gate.acquire(0)  # held meanwhile
    assert gate.acquire(0)  # given back


def test_the_slot_is_released_when_admission_raises() -> None:
    gate = PriorityGate(1, threading.Event)
    with pytest.raises(RuntimeError), admission_slot(gate):
        raise RuntimeError("admission failed")
    assert gate.acquire(0)


def test_a_full_gate_delays_a_run_but_never_refuses_it() -> None:
    gate = PriorityGate(1, threading.Event)
    assert gate.acquire(0)
    admitted = False
    with admission_slot(gate, wait_s=0.05):
        admitted = True
    assert admitted
    gate.release()
    assert gate.acquire(0)  # the admission that went through without a slot gave none back


def test_a_run_request_takes_its_slot_only_after_its_body_was_read(tmp_path: Path) -> None:
    """A client that uploads slowly holds no slot: only admission does (docs/design.md#start-gate)."""
    from agui_bridge.app import create_app
    from agui_bridge.config.settings import Settings

    app = create_app(Settings(state_dir=tmp_path, a2a_url="http://127.0.0.1:9/"))
    gate = app.extensions["agui_bridge"].runtime.start_gate
    free_while_reading: list[bool] = []
    body = b'{"threadId": "t-1"}'

    class Body:
        def __init__(self) -> None:
            self._data = body

        def read(self, size: int = -1) -> bytes:
            free = gate.acquire(0)
            if free:
                gate.release()
            free_while_reading.append(free)
            chunk, self._data = (self._data, b"") if size < 0 else (self._data[:size], self._data[size:])
            return chunk

    response = app.test_client().post(
        "/", data=body, content_type="application/json", environ_overrides={"wsgi.input": Body()}
    )
    assert response.status_code == 400  # not a valid RunAgentInput: refused after the gate, no slot kept
    assert free_while_reading and all(free_while_reading)
    for _ in range(16):
        assert gate.acquire(0)  # every slot is free again


class _Runtime(ThreadRuntime):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.start_gate = PriorityGate(limit, threading.Event)


def test_the_pump_holds_a_slot_until_its_first_item(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _Runtime(1)
    free_while_opening: list[bool] = []

    def items() -> Any:
        free = runtime.start_gate.acquire(0)
        free_while_opening.append(free)
        yield [1]
        yield [2]

    out: queue.Queue[Any] = queue.Queue()
    read_into(items(), out, runtime, 1.0)
    assert free_while_opening == [False]
    assert [out.get_nowait() for _ in range(3)] == [[1], [2], Signal.END]
    assert runtime.start_gate.acquire(0)


def test_a_failed_open_releases_the_slot_and_reports() -> None:
    runtime = _Runtime(1)

    def items() -> Any:
        raise ConnectionError("kernel down")
        yield  # pragma: no cover

    out: queue.Queue[Any] = queue.Queue()
    read_into(items(), out, runtime, 1.0)
    assert isinstance(out.get_nowait(), PumpFailed)
    assert runtime.start_gate.acquire(0)


def test_a_pump_behind_a_full_gate_opens_anyway_after_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump_mod, "OPEN_WAIT_S", 0.05)
    runtime = _Runtime(1)
    assert runtime.start_gate.acquire(0)
    out: queue.Queue[Any] = queue.Queue()
    began = time.monotonic()
    read_into(iter([[1]]), out, runtime, 1.0)
    assert time.monotonic() - began < 2.0
    assert out.get_nowait() == [1]


@pytest.mark.parametrize(("window_s", "interval_s"), [(0.4, 0.25), (2.0, 0.5), (30.0, 1.0), (0.0, 0.25)])
def test_detached_runs_look_for_readers_at_most_once_a_second(window_s: float, interval_s: float) -> None:
    assert check_interval(window_s) == interval_s
