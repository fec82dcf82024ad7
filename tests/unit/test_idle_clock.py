"""Idle shutdown reads the runtime's clock, as every other time of a run does (docs/design.md#runtime-backends)."""

from __future__ import annotations

from pathlib import Path

from agui_bridge.config.settings import Settings
from agui_bridge.runs.registry import RunRegistry
from agui_bridge.runs.service import BridgeService
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.runtime import ThreadRuntime
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
