"""Waking a waiter from a native thread, under either back-end (docs/design.md#state-writer).

The state writer and the lock helper (`state.flock`) do their blocking work on real OS threads; the
greenlet (or thread) that asked waits here until that work is done. In a gevent-patched process the
wait parks the greenlet on a `gevent.hub.Waiter`; the native thread queues it for one async watcher
per hub (the only gevent primitive another thread may signal), whose callback switches to every
queued waiter's greenlet at once (an event would only schedule it for the loop's next pass of
callbacks, behind every greenlet that is ready meanwhile). That watcher is made once per hub and
process, not once per wait, so a hand-off costs the waiting greenlet two switches. Without patching,
the wait is on a native lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Protocol

from agui_bridge.worker.fork import after_fork_in_child

__all__ = ["Waiter", "native_primitives", "new_waiter"]


class Waiter(Protocol):
    def complete(self) -> None:
        """Wake the waiter; called once, from any thread."""

    def wait(self, timeout: float | None = None) -> bool:
        """Until completed (True) or `timeout` seconds have passed (False)."""


def _start_native_thread(target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
    threading.Thread(target=target, args=args, name=name, daemon=True).start()


def native_primitives() -> tuple[Callable[[], Any], Callable[..., None], bool]:
    """(lock factory, thread starter, patched): the real primitives even after gevent's patching."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a hard dependency
        return threading.Lock, _start_native_thread, False
    if not monkey.is_module_patched("threading"):
        return threading.Lock, _start_native_thread, False
    lock = monkey.get_original("threading", "Lock")
    start = monkey.get_original("_thread", "start_new_thread")

    def start_thread(target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
        del name  # a raw OS thread: never joined, dies with the process
        start(target, args)

    return lock, start_thread, True


class _NativeWaiter:
    """Plain threads (no gevent patching): a native lock, taken until released by `complete`."""

    __slots__ = ("_lock",)

    def __init__(self, lock_factory: Callable[[], Any]) -> None:
        self._lock = lock_factory()
        self._lock.acquire()

    def complete(self) -> None:
        with suppress(RuntimeError):
            self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        if not self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            return False
        self._lock.release()
        return True


class _HubSignal:
    """One async watcher of a hub; `send` may be called from any thread, the waiters resume in the hub."""

    def __init__(self, hub: Any) -> None:
        self._ready: deque[Any] = deque()
        self._waiting = 0
        self._watcher = hub.loop.async_()
        self._watcher.start(self._drain)
        self._watcher.ref = False  # keeps the loop alive only while someone waits (see `wait`)

    def _drain(self) -> None:
        """In the hub: switch to each completed waiter's greenlet at once (a gevent `Waiter`), rather than
        setting an event whose waiters are resumed only on the loop's next pass of callbacks."""
        ready = self._ready
        while ready:
            ready.popleft().switch(True)

    def send(self, waiter: Any) -> None:
        self._ready.append(waiter)
        self._watcher.send()

    def wait(self, waiter: Any, timeout: float | None) -> bool:
        """In the hub's thread: wait for `waiter`, the watcher holding the loop open meanwhile."""
        import gevent

        self._waiting += 1
        if self._waiting == 1:
            self._watcher.ref = True
        timer = gevent.Timeout(timeout)  # None: never fires
        timer.start()
        try:
            return bool(waiter.get())
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            return False  # a late `complete` finds no greenlet waiting and only stores its value
        finally:
            timer.close()
            self._waiting -= 1
            if self._waiting == 0:
                self._watcher.ref = False


_signals: dict[int, _HubSignal] = {}


def _forget_signals_after_fork() -> None:
    """A forked child's hub has a new loop: its waits need new watchers (docs/design.md#fork-registry)."""
    _signals.clear()


after_fork_in_child(_forget_signals_after_fork)


class _HubWaiter:
    """A greenlet's wait: a gevent `Waiter`, switched to in its hub by the hub's `_HubSignal`."""

    __slots__ = ("_signal", "_waiter")

    def __init__(self) -> None:
        import gevent
        from gevent.hub import Waiter as GeventWaiter

        hub = gevent.get_hub()
        key = id(hub)
        signal = _signals.get(key)
        if signal is None:
            signal = _signals[key] = _HubSignal(hub)
        self._signal = signal
        self._waiter = GeventWaiter(hub)

    def complete(self) -> None:
        self._signal.send(self._waiter)

    def wait(self, timeout: float | None = None) -> bool:
        return self._signal.wait(self._waiter, timeout)


def new_waiter(patched: bool, lock_factory: Callable[[], Any]) -> Waiter:
    """A waiter for the calling greenlet (`patched`) or thread."""
    return _HubWaiter() if patched else _NativeWaiter(lock_factory)
