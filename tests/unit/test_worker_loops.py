"""The worker's loops (worker/maintenance.py): the beacon pass, retention and idle shutdown, and the drain
wait, driven against a stand-in service through the plain methods `BridgeService` offers them
(docs/design.md#leases-and-beacons, #retention, #idle-shutdown, #shutdown-drain)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.worker import maintenance
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.maintenance import BeaconState, HeldRun, WorkerLoops, beacon_pass, maintenance_tick_s
from agui_bridge.worker.runtime import ThreadRuntime

OWNER = "host.invalid:7:1"


class _Run:
    def __init__(self) -> None:
        self.cancelled = 0

    def request_cancel(self) -> None:
        self.cancelled += 1


class _Service:
    """Just the plain methods the loops ask of the use cases."""

    def __init__(self, root: Path) -> None:
        self.owner = OWNER
        self.beacons = Beacons(root)
        self.runs: dict[str, _Run] = {}
        self.idle_answers: list[bool] = []
        self.sweeps = 0
        self.calls: list[str] = []
        self.active = 0
        self.open_streams = 0

    def held_runs(self) -> Mapping[str, HeldRun]:
        return dict(self.runs)

    def sweep_retention(self) -> None:
        self.sweeps += 1

    def is_idle(self) -> bool:
        return self.idle_answers.pop(0) if self.idle_answers else False

    @property
    def active_runs(self) -> int:
        return self.active

    def begin_drain(self) -> None:
        self.calls.append("begin_drain")

    def stop_streams(self) -> int:
        self.calls.append("stop_streams")
        return self.open_streams


class _CountingRuntime(ThreadRuntime):
    """Sleeps return at once; each one may change the service (runs ending on their own)."""

    def __init__(self, service: _Service, runs_left_after_sleeps: list[int] | None = None) -> None:
        super().__init__()
        self.service = service
        self.sleeps: list[float] = []
        self.runs_left_after_sleeps = runs_left_after_sleeps or []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.runs_left_after_sleeps:
            self.service.active = self.runs_left_after_sleeps.pop(0)


def _published(root: Path) -> list[object]:
    (beacon,) = (root / "owners").glob("*.json")
    runs: list[object] = json.loads(beacon.read_text())["runs"]
    return runs


def test_a_beacon_pass_publishes_the_runs_and_passes_cancels_on(tmp_path: Path) -> None:
    service = _Service(tmp_path)
    service.runs = {"exec-1/run-1": _Run(), "exec-2/run-1": _Run()}
    service.beacons.request_cancel("exec-2/run-1", "thread-2")
    state = BeaconState()
    beacon_pass(service, 5.0, state, now=100.0)
    assert _published(tmp_path) == ["exec-1/run-1", "exec-2/run-1"]
    assert (service.runs["exec-1/run-1"].cancelled, service.runs["exec-2/run-1"].cancelled) == (0, 1)
    assert state.next_publish == 105.0
    del service.runs["exec-1/run-1"]
    beacon_pass(service, 5.0, state, now=101.0)  # the set of runs changed: published before the interval
    assert _published(tmp_path) == ["exec-2/run-1"]
    assert service.runs["exec-2/run-1"].cancelled == 1  # a marker is taken once


@pytest.mark.parametrize(("idle_s", "tick_s"), [(0.0, 60.0), (0.2, 0.1), (2.0, 0.5), (60.0, 5.0)])
def test_maintenance_wakes_often_enough_to_notice_idleness(idle_s: float, tick_s: float) -> None:
    assert maintenance_tick_s(idle_s) == tick_s


def test_maintenance_sweeps_and_asks_for_an_exit_once_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maintenance, "FIRST_SWEEP_S", (0.0, 0.0))
    service = _Service(tmp_path)
    service.idle_answers = [False, False, True]
    runtime = _CountingRuntime(service)
    exits: list[str] = []
    loops = WorkerLoops(runtime, service, beacon_interval_s=5.0, idle_shutdown_s=2.0)
    loops.maintain(lambda: exits.append("exit"))  # returns once it asked for the exit
    assert exits == ["exit"]
    assert runtime.sleeps == [0.5, 0.5, 0.5]
    assert service.sweeps == 1  # the first sweep was due at once; the next one an hour later


def test_a_drain_waits_for_runs_to_end_then_stops_the_rest(tmp_path: Path) -> None:
    service = _Service(tmp_path)
    service.active = 2
    runtime = _CountingRuntime(service, runs_left_after_sleeps=[2, 1, 0])
    loops = WorkerLoops(runtime, service, beacon_interval_s=5.0, idle_shutdown_s=0.0)
    assert loops.drain(60.0) == 0  # every run ended on its own within the wait
    assert service.calls == ["begin_drain", "stop_streams"]
    assert len(runtime.sleeps) == 3


def test_a_drain_stops_what_is_still_open_when_the_wait_is_over(tmp_path: Path) -> None:
    service = _Service(tmp_path)
    service.active = service.open_streams = 3
    runtime = _CountingRuntime(service)
    loops = WorkerLoops(runtime, service, beacon_interval_s=5.0, idle_shutdown_s=0.0)
    assert loops.drain(0.0) == 3
    assert service.calls == ["begin_drain", "stop_streams"] and runtime.sleeps == []


@pytest.mark.parametrize(("grace_s", "wait_s", "first_sleep"), [(1.0, 60.0, 1.0), (1.0, 0.5, 0.5)])
def test_a_drain_admits_runs_of_connections_already_taken_for_the_grace_then_refuses(
    tmp_path: Path, grace_s: float, wait_s: float, first_sleep: float
) -> None:
    service = _Service(tmp_path)
    runtime = _CountingRuntime(service)
    original_sleep = runtime.sleep

    def sleep_before_refusal(seconds: float) -> None:
        assert "begin_drain" not in service.calls  # new runs are still admitted during the grace
        original_sleep(seconds)

    runtime.sleep = sleep_before_refusal  # type: ignore[method-assign]
    loops = WorkerLoops(runtime, service, beacon_interval_s=5.0, idle_shutdown_s=0.0)
    assert loops.drain(wait_s, accepted_grace_s=grace_s) == 0
    assert runtime.sleeps == [first_sleep]  # never longer than the whole wait
    assert service.calls == ["begin_drain", "stop_streams"]


def test_the_beacon_loop_is_started_once(tmp_path: Path) -> None:
    service = _Service(tmp_path)
    spawned: list[str] = []

    class _SpawnRecorder(_CountingRuntime):
        def spawn(
            self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
        ) -> Any:
            spawned.append(name)  # not run: the real loop never ends

    loops = WorkerLoops(_SpawnRecorder(service), service, beacon_interval_s=5.0, idle_shutdown_s=0.0)
    loops.ensure_beacon()
    loops.ensure_beacon()
    assert spawned == ["beacon"]
