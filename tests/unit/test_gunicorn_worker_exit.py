"""`worker_exit` (worker/hooks.py): a worker ends only once its drain is over, so a detached run the drain
stopped has written its terminal event first (docs/design.md#shutdown-drain)."""

from __future__ import annotations

import threading
import types

from agui_bridge.worker.hooks import DRAIN_ATTRIBUTE, gunicorn_settings, worker_exit


class _Config:
    """gunicorn's worker config: reading `graceful_timeout` lets the drain go on (it is read before the wait)."""

    def __init__(self, go: threading.Event) -> None:
        self._go = go

    @property
    def graceful_timeout(self) -> int:
        self._go.set()
        return 30


def test_a_worker_exits_only_after_its_drain_has_finished() -> None:
    go, finished = threading.Event(), threading.Event()

    def drain() -> None:
        go.wait(10)
        finished.set()

    thread = threading.Thread(target=drain, name="drain", daemon=True)
    worker = types.SimpleNamespace(cfg=_Config(go), **{DRAIN_ATTRIBUTE: thread})
    thread.start()
    worker_exit(None, worker)
    assert finished.is_set()


def test_a_worker_that_never_drained_exits_at_once() -> None:
    worker = types.SimpleNamespace(cfg=types.SimpleNamespace(graceful_timeout=30))
    worker_exit(None, worker)  # nothing to wait for: returns
    assert not hasattr(worker, DRAIN_ATTRIBUTE)


def test_the_served_configuration_installs_the_hook() -> None:
    from agui_bridge.config.settings import Settings

    assert gunicorn_settings(Settings())["worker_exit"] is worker_exit
