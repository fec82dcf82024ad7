"""`Mailbox`: what other greenlets and threads ask of one stream, and the wake-up that makes it see it at once.

Drain asks a stream to stop, the cancel channel to end as cancelled, the client-EOF watcher says the client
left, a detached run's reader watch stops a run nobody came back to. Each request sets a flag and puts
`WAKE` into the queue the stream waits on (docs/design.md#stream-pump-heartbeat); the stream's `Pacer` acts
on the flags at its next tick. The mailbox is its own part so that a run's parts that only make or read
requests (the `Detacher`) need not hold the pacer.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

from agui_bridge.worker.runtime import Runtime

log = logging.getLogger(__name__)


class Signal(Enum):
    """What a stream's queue may hold besides the kernel's items."""

    END = "end"  # the upstream has no more items
    WAKE = "wake"  # look up: a request came in, or the wait timed out


class Mailbox:
    __slots__ = ("_runtime", "_watched", "cancel_requested", "client_gone", "stop_requested")

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._watched: Any = None
        self.stop_requested = False
        self.cancel_requested = False
        self.client_gone = False

    def watch(self, queue: Any) -> None:
        """The queue the stream waits on now: requests put the wake-up into it."""
        self._watched = queue

    def request_stop(self) -> None:
        """End the run now (worker shutdown, a detached run's window passed); safe from any greenlet/thread."""
        self.stop_requested = True
        self._wake()

    def request_cancel(self) -> None:
        """The cancellation extension retired the run's execution (possibly from another worker)."""
        self.cancel_requested = True
        self._wake()

    def request_depart(self) -> None:
        """The client's socket reached EOF: act at once rather than at the next write."""
        self.client_gone = True
        self._wake()

    def forget_departure(self) -> None:
        """The departure was handled elsewhere (the run detached): the stream must not act on it again."""
        self.client_gone = False

    def _wake(self) -> None:
        queue = self._watched
        if queue is not None:
            try:
                self._runtime.queue_put(queue, Signal.WAKE, 0)
            except Exception:
                log.debug("wake-up not queued", exc_info=True)


__all__ = ["Mailbox", "Signal"]
