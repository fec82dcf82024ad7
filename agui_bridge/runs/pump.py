"""The pump, the heartbeat and batching: how a stream reads the kernel without ever blocking on it.

Used by run and guidance streams alike (docs/design.md#stream-pump-heartbeat):

* `Pump` runs `read_into` in its own greenlet/thread: it iterates an `Upstream` and puts each network
  read's worth of A2A events into a bounded queue. A full queue blocks the pump, which stops reading
  the kernel, so a slow client slows the kernel down; a put that waits longer than the stall timeout
  ends the pump with an error. The stream takes items with `get` and, when the pump is ahead of the
  client, everything already queued with `ready`, so it can be shown in one write.
* `Pacer` is the stream's clock: the time left until the next `: heartbeat`, acting on the requests of
  its `Mailbox` (`runs/mailbox.py`: stop, cancel and departure requests from other greenlets, which wake
  whatever queue the stream waits on), and unary calls made off the generator while it keeps heartbeating.

Under gevent the generator itself must never block on the kernel: every wait is a queue get with a
timeout no longer than the time to the next heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from agui_bridge.errors import A2AUnavailable, Cancelled
from agui_bridge.runs.mailbox import Mailbox, Signal
from agui_bridge.runs.upstream import Item, UnaryAccepted
from agui_bridge.worker.runtime import Empty, Runtime, TaskHandle
from agui_bridge.worker.start_gate import OPEN_WAIT_S

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: How long `Pump.stop` waits for the reader to end before closing the socket it reads.
STOP_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class PumpFailed:
    """Queued by the pump in place of its next item: reading the upstream raised `error`."""

    error: Exception


class PumpDied(A2AUnavailable):
    """The pump ended without handing over its end or its failure (killed, or its last item was
    dropped because the queue stayed full): the stream ends with RUN_ERROR instead of waiting forever."""


class StopRequested(Exception):
    """The worker is shutting down (docs/design.md#shutdown-drain)."""


#: An empty frame the stream's body stops on when its client left and the run detaches (writes nothing).
DEPARTED = b""


class ClientGone(Exception):
    """The client closed its connection: the run ends as a disconnect (docs/design.md#close-and-disconnect)."""


def read_into(items: Iterable[Any], queue: Any, runtime: Runtime, put_timeout_s: float) -> None:
    """The pump's body. Catches Exception only: a kill must pass through.

    Opening the kernel stream (up to its first item) takes a slot of the worker's start gate behind the
    admissions waiting for one (docs/design.md#start-gate): a burst gets its RUN_STARTED first.
    """
    gate = runtime.start_gate
    held = gate.acquire(OPEN_WAIT_S, urgent=False)
    try:
        for item in items:
            if held:
                held = False
                gate.release()
            runtime.queue_put(queue, item, put_timeout_s)
            del item  # the stream owns it now: not kept while the next read waits (docs/design.md#stream-memory)
        runtime.queue_put(queue, Signal.END, put_timeout_s)
    except Exception as exc:  # noqa: BLE001 - reported to the stream as an item
        try:
            runtime.queue_put(queue, PumpFailed(exc), put_timeout_s)
        except Exception:
            log.debug("pump could not report its failure", exc_info=True)
    finally:
        if held:
            gate.release()


class PumpSource(Protocol):
    """What a pump reads (`runs/upstream.Upstream`): items in order, and two ways to end the reading."""

    def __iter__(self) -> Iterator[Any]: ...

    def abort(self) -> None:
        """Wake the reader blocked in another thread (the pump's `on_stop`)."""
        ...

    def close(self) -> None: ...


class Pump:
    """One upstream read into one bounded queue by one greenlet/thread."""

    def __init__(self, runtime: Runtime, upstream: PumpSource, *, maxsize: int, put_timeout_s: float) -> None:
        self._runtime = runtime
        self._upstream = upstream
        self._put_timeout_s = put_timeout_s
        self.queue: Any = runtime.make_queue(maxsize)
        self._task: TaskHandle | None = None
        self._held: Any = None  # an item `ready` took but may not batch: the next `get` returns it

    def start(self, name: str) -> None:
        self._task = self._runtime.spawn(
            read_into, self._upstream, self.queue, self._runtime, self._put_timeout_s,
            name=name, on_stop=self._upstream.abort,
        )  # fmt: skip

    def get(self, timeout_s: float) -> Item | Signal:
        """The next item, `Signal.END`, or `Signal.WAKE` (woken, or nothing came within the timeout).

        Raises what reading the upstream raised, or `PumpDied` if nothing will ever come again.
        """
        if self._held is not None:
            item, self._held = self._held, None
        else:
            try:
                item = self._runtime.queue_get(self.queue, timeout_s)
            except Empty:
                item = self._check_alive()
        if isinstance(item, PumpFailed):
            raise item.error
        return item  # type: ignore[no-any-return]

    def ready(self) -> Iterator[list[Any] | UnaryAccepted]:
        """What the pump already queued that may go out in the same write (events, unary acceptances).

        Stops at the first other item, which the next `get` returns; takes nothing the caller does not ask for.
        """
        while self._held is None:
            try:
                item = self._runtime.queue_get(self.queue, 0.0)
            except Empty:
                return
            if not isinstance(item, (list, UnaryAccepted)):
                self._held = item
                return
            yield item

    def _check_alive(self) -> Any:
        """A wait timed out: raise PumpDied if nobody will ever fill the queue again.

        A pump's last put happens before it dies, so an empty queue after a dead pump (checked once
        more after seeing it dead) means its end or failure marker was lost.
        """
        task = self._task
        if task is None or task.alive():
            return Signal.WAKE
        try:
            return self._runtime.queue_get(self.queue, 0.0)  # not lost after all
        except Empty:
            log.warning("the upstream pump died without reporting; ending the run")
            raise PumpDied() from None

    def stop(self) -> None:
        """Stop the reader first, then close the socket it reads (docs/design.md#close-and-disconnect)."""
        if self._task is not None:
            try:
                self._task.stop(STOP_TIMEOUT_S)
            except Exception:
                log.debug("stopping the pump failed", exc_info=True)
        self._upstream.close()


def _never() -> bool:
    return False


class Pacer:
    """A stream's clock: heartbeats, the requests of its `Mailbox`, unary calls off the generator."""

    __slots__ = ("_clock", "_detaches_on_departure", "_heartbeat", "_interval_s", "_next_heartbeat", "_runtime",
                 "mailbox")  # fmt: skip

    def __init__(
        self,
        runtime: Runtime,
        interval_s: float,
        heartbeat: Callable[[], bytes],
        *,
        mailbox: Mailbox | None = None,
        detaches_on_departure: Callable[[], bool] = _never,
    ) -> None:
        self._runtime = runtime
        #: The runtime's clock, looked up once: a test's fake clock paces heartbeats without sleeping.
        self._clock = runtime.monotonic
        self._interval_s = interval_s
        self._heartbeat = heartbeat
        self._next_heartbeat = self._clock() + interval_s
        self.mailbox = mailbox if mailbox is not None else Mailbox(runtime)
        #: Asked when the client left: True means the stream detaches (tick yields DEPARTED for its body to
        #: stop on) rather than ending with `ClientGone`.
        self._detaches_on_departure = detaches_on_departure

    @property
    def stop_requested(self) -> bool:
        return self.mailbox.stop_requested

    def wait_s(self) -> float:
        """How long the stream may wait for its next item: the time to the next heartbeat."""
        return self._next_heartbeat - self._clock()

    def shown(self) -> None:
        """Something was written to the client: the heartbeat timer restarts."""
        self._next_heartbeat = self._clock() + self._interval_s

    def watch(self, queue: Any) -> None:
        """The queue the stream waits on now: requests put `Signal.WAKE` into it, so they are seen at once."""
        self.mailbox.watch(queue)

    def request_stop(self) -> None:
        """Worker shutdown; safe from any greenlet/thread."""
        self.mailbox.request_stop()

    def request_cancel(self) -> None:
        """The cancellation extension retired the run's execution (possibly from another worker)."""
        self.mailbox.request_cancel()

    def tick(self) -> Iterator[bytes]:
        """Act on stop, departure and cancel requests (`StopRequested`, `ClientGone`, `Cancelled`) and send
        `: heartbeat` when due.

        A lease needs no renewal here: the worker's beacon keeps every run it streams alive.
        """
        mailbox = self.mailbox
        if mailbox.stop_requested:
            raise StopRequested()
        if mailbox.client_gone:
            mailbox.forget_departure()
            if self._detaches_on_departure():
                yield DEPARTED
                return
            raise ClientGone()
        if mailbox.cancel_requested:
            # The cancellation extension cancels the A2A task and retires the execution itself, right
            # after telling this worker (runs/cancel.py): doing either here as well would race it.
            raise Cancelled()
        now = self._clock()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self._interval_s
            yield self._heartbeat()

    def call(self, fn: Callable[..., _T], *args: Any, name: str) -> Generator[bytes, None, _T]:
        """Run one unary upstream call in its own task, heartbeating meanwhile; return or raise its result."""
        runtime = self._runtime
        box = runtime.make_queue(1)

        def call() -> None:
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except Exception as exc:  # noqa: BLE001 - re-raised in the generator
                outcome = (False, exc)
            runtime.queue_put(box, outcome, 1.0)

        runtime.spawn(call, name=name)
        self.watch(box)
        while True:
            try:
                item = runtime.queue_get(box, self.wait_s())
            except Empty:
                item = Signal.WAKE
            if item is Signal.WAKE:
                yield from self.tick()
                continue
            ok, value = item
            if ok:
                return value  # type: ignore[no-any-return]
            raise value


__all__ = ["Pacer", "Pump", "PumpDied", "PumpFailed", "Signal", "StopRequested", "read_into"]
