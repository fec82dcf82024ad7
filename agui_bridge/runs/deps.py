"""What a stream needs from its worker: the collaborators `runs/service.py` builds once per worker."""

from __future__ import annotations

from dataclasses import dataclass

from agui_bridge.a2a.port import A2APort
from agui_bridge.config.settings import Settings
from agui_bridge.runs.observer import NULL_OBSERVER, RunObserver
from agui_bridge.runs.registry import PROCESS_RUNS, RunRegistry
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import Runtime


@dataclass(frozen=True, slots=True)
class StreamDeps:
    settings: Settings
    store: ThreadStore
    client: A2APort
    runtime: Runtime
    observer: RunObserver = NULL_OBSERVER
    #: Where a stream gives its place back when its body closes (a stream never opened there changes nothing).
    registry: RunRegistry = PROCESS_RUNS
    #: The cancel channel's markers: a run's end removes the one left for it, so none outlives its run.
    cancel_markers: Beacons | None = None


__all__ = ["StreamDeps"]
