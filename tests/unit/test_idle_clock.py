"""Idle shutdown and the reattach window read the runtime's clock, as every other time of a run does.

(docs/design.md#runtime-backends)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agui_bridge.config.settings import Settings
from agui_bridge.runs.detach import Detacher
from agui_bridge.runs.mailbox import Mailbox
from agui_bridge.runs.observer import NULL_OBSERVER
from agui_bridge.runs.registry import RunRegistry
from agui_bridge.runs.service import BridgeService
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.runtime import TaskHandle, ThreadRuntime
from tests.support.clock import ClockedRuntime, FakeClock
from tests.support.fakes import ScriptedA2A

IDLE_S = 30.0


class _Stream:
    """A stream as the registry sees it: something it may ask to stop."""

    def request_stop(self) -> None:
        return None


def _service(tmp_path: Path, clock: FakeClock) -> BridgeService:
    settings = Settings(state_dir=tmp_path / "state", idle_shutdown_s=IDLE_S)
    runtime = ClockedRuntime(ThreadRuntime(), clock)
    registry = RunRegistry(clock=runtime.monotonic)
    return BridgeService(settings, ThreadStore(settings.state_dir), ScriptedA2A(), runtime, registry=registry)


def test_idle_shutdown_follows_the_fake_clock_from_the_workers_start(tmp_path: Path) -> None:
    clock = FakeClock(monotonic_s=0.0)  # far from the real monotonic clock: a stamp read from it never looks idle
    service = _service(tmp_path, clock)
    assert not service.is_idle()
    clock.advance(IDLE_S - 1)
    assert not service.is_idle()
    clock.advance(1)
    assert service.is_idle()


def test_idle_shutdown_counts_from_the_last_stream_end_on_the_fake_clock(tmp_path: Path) -> None:
    clock = FakeClock(monotonic_s=0.0)
    service = _service(tmp_path, clock)
    registry = service.registry
    stream = _Stream()
    assert registry.reserve(1)
    registry.open(stream)
    clock.advance(IDLE_S * 10)
    assert not service.is_idle()  # a stream is open
    registry.close(stream)
    clock.advance(IDLE_S - 1)
    assert not service.is_idle()
    clock.advance(1)
    assert service.is_idle()


class _SleepsOnTheClock(ClockedRuntime):
    """Tasks run inline and a sleep moves the fake clock; a bounded number of sleeps, so a watch that never
    sees time pass fails instead of spinning."""

    def __init__(self, clock: FakeClock, max_sleeps: int) -> None:
        super().__init__(ThreadRuntime(), clock)
        self.sleeps_left = max_sleeps

    def spawn(
        self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
    ) -> TaskHandle:
        fn(*args)
        return _Done()

    def sleep(self, seconds: float) -> None:
        assert self.sleeps_left > 0, "the reattach window never passed on the runtime's clock"
        self.sleeps_left -= 1
        self.clock.advance(seconds)


class _Done:
    def stop(self, timeout: float) -> None:
        return None

    def alive(self) -> bool:
        return False


class _Record:
    """A run record no reader ever comes back to."""

    stopped = False
    finished = False

    def readers_present(self, now_s: float | None = None) -> bool:
        return False


class _Running:
    finished = False


def test_the_reattach_window_of_a_detached_run_passes_on_the_fake_clock() -> None:
    window_s = 10.0
    runtime = _SleepsOnTheClock(FakeClock(monotonic_s=0.0), max_sleeps=100)
    mailbox = Mailbox(runtime)
    record: Any = _Record()
    emitter: Any = None  # only the record's close writes through it; this run is never closed
    detacher = Detacher(
        window_s, record, run_id="run-1", end=_Running(), mailbox=mailbox, emitter=emitter,
        runtime=runtime, observer=NULL_OBSERVER,
    )  # fmt: skip
    assert list(detacher.body(iter([b"frame"]))) == [b"frame"]  # the run is live from its body's first step
    detacher.detach(iter(()), lambda: None)
    assert detacher.window_expired and mailbox.stop_requested
    assert runtime.clock.monotonic() >= window_s
