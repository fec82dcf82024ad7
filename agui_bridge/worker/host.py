"""The one seam between the web layer and the worker it runs in (docs/design.md#layers).

A view never looks at gevent, the start gate or the beacon itself: it asks the `WorkerHost` the app
factory built (a start-gate slot for an admission, the runtime a follower waits with) and reads bodies
with the helpers below, which pick the gevent or the thread way themselves (docs/design.md#runtime-backends).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from agui_bridge.worker.maintenance import WorkerLoops
from agui_bridge.worker.runtime import OffHubPool, Runtime, socket_is_patched
from agui_bridge.worker.start_gate import admission_slot

_T = TypeVar("_T")
#: Where `create_app` keeps the app's `WorkerHost` (`app.extensions`), for the views and the worker's hooks.
WORKER_KEY = "agui_bridge.worker"


class ReadTimedOut(Exception):
    """A body read did not return before its deadline (gevent only: a blocked thread read cannot be cut)."""


class WorkerHost:
    """What the web layer may ask of its worker: built once per app by `create_app`."""

    def __init__(self, runtime: Runtime, loops: WorkerLoops) -> None:
        self.runtime = runtime
        self.loops = loops

    @contextmanager
    def admission_slot(self) -> Iterator[None]:
        """Hold an urgent start-gate slot while a run is admitted (docs/design.md#start-gate); the worker's
        first admission also starts its beacon loop (docs/design.md#leases-and-beacons)."""
        self.loops.ensure_beacon()
        with admission_slot(self.runtime.start_gate):
            yield


#: Native threads that decode and validate large bodies, per worker process: a pool of its own, so hostile
#: bodies queue here and never in front of the hub's own threadpool (gevent's DNS resolution) or other
#: offloaded work; two threads at most, so they cannot take every core.
BODY_DECODE = OffHubPool(2, "agui-body-decode")


def decode_off_hub(fn: Callable[..., _T], *args: Any) -> _T:
    """Run CPU-bound `fn` in a native thread (the hub keeps running); directly where gevent is not used."""
    return BODY_DECODE.run(fn, *args)


def read_within(stream: IO[bytes], size: int, timeout_s: float) -> bytes:
    """One read of at most `size` bytes, cut off after `timeout_s` under gevent (`ReadTimedOut`); a blocked
    socket read cannot be cut under threads, so there the caller checks its deadline after the read."""
    if not socket_is_patched():
        return stream.read(size)
    import gevent

    timer = gevent.Timeout(timeout_s)
    timer.start()
    try:
        return stream.read(size)
    except gevent.Timeout as exc:
        if exc is not timer:
            raise
        raise ReadTimedOut() from None
    finally:
        timer.close()


def let_the_hub_run() -> None:
    """Under gevent, let every other ready greenlet run once (nothing to do with threads)."""
    if socket_is_patched():
        import gevent

        gevent.sleep(0)


__all__ = [
    "BODY_DECODE",
    "WORKER_KEY",
    "ReadTimedOut",
    "WorkerHost",
    "decode_off_hub",
    "let_the_hub_run",
    "read_within",
]
