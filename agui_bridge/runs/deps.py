"""What a stream needs from its worker: the collaborators `runs/service.py` builds once per worker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agui_bridge.config.settings import Settings
from agui_bridge.kernel.client import A2AClient
from agui_bridge.runs.observer import NULL_OBSERVER, Outcome, RunObserver
from agui_bridge.runs.registry import TrackedRun
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.runtime import Runtime


@dataclass(frozen=True)
class StreamDeps:
    settings: Settings
    store: ThreadStore
    client: A2AClient
    runtime: Runtime
    #: Called once when a stream has ended, with the stream and its outcome (the service unregisters it).
    on_run_end: Callable[[TrackedRun, Outcome], None] | None = None
    observer: RunObserver = NULL_OBSERVER


__all__ = ["StreamDeps"]
