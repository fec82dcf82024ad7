"""Concurrency back-ends: gevent greenlets in a patched worker, threads everywhere else.

gunicorn's gevent worker patches the process; there greenlets pump upstream streams. Anywhere the
socket module is not patched (Flask dev server, legacy WSGI hosts, an unpatched test client) real
threads are used instead, because a greenlet blocked in an unpatched recv() would freeze the
response (docs/design.md#runtime-backends).
"""

from __future__ import annotations

import contextvars
import queue as std_queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agui_bridge.worker.fork import after_fork_in_child
from agui_bridge.worker.start_gate import START_GATE_LIMIT, PriorityGate


class Empty(Exception):
    """queue_get timed out."""


class TaskHandle(Protocol):
    def stop(self, timeout: float) -> None: ...

    def alive(self) -> bool: ...


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: what leases, interrupt expiries and record stamps are written in."""
    return time.time_ns() // 1_000_000


class Runtime(Protocol):
    """What a run borrows from its worker: concurrency, and the time (docs/design.md#runtime-backends)."""

    name: str
    #: The worker's start gate (docs/design.md#start-gate): admissions and kernel opens of a burst.
    start_gate: PriorityGate

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: heartbeat pacing and other intervals."""
        ...

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch: interrupt expiry, leases, activity stamps."""
        ...

    def spawn(
        self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
    ) -> TaskHandle:
        """Run `fn` concurrently. `on_stop` wakes `fn` where it cannot be killed (threads)."""
        ...

    def make_queue(self, maxsize: int) -> Any: ...

    def queue_get(self, q: Any, timeout: float) -> Any: ...

    def queue_put(self, q: Any, item: Any, timeout: float | None) -> None: ...

    def sleep(self, seconds: float) -> None: ...

    def stream_limit(self, max_active_runs: int, max_thread_streams: int) -> int:
        """How many streams this process may hold open before new runs get 503 + Retry-After."""
        ...


class _ThreadHandle:
    def __init__(self, thread: threading.Thread, on_stop: Callable[[], None] | None) -> None:
        self._thread = thread
        self.on_stop = on_stop

    def stop(self, timeout: float) -> None:
        if self.on_stop is not None:
            self.on_stop()
        self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread.is_alive()


class ThreadRuntime:
    name = "threads"
    monotonic = staticmethod(time.monotonic)
    now_ms = staticmethod(wall_clock_ms)

    def __init__(self) -> None:
        self.start_gate = PriorityGate(START_GATE_LIMIT, threading.Event)

    def spawn(
        self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
    ) -> _ThreadHandle:
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(fn, *args), name=name, daemon=True)
        thread.start()
        return _ThreadHandle(thread, on_stop)

    def make_queue(self, maxsize: int) -> std_queue.Queue[Any]:
        return std_queue.Queue(maxsize)

    def queue_get(self, q: std_queue.Queue[Any], timeout: float) -> Any:
        try:
            return q.get(timeout=max(timeout, 0.0))
        except std_queue.Empty:
            raise Empty from None

    def queue_put(self, q: std_queue.Queue[Any], item: Any, timeout: float | None) -> None:
        q.put(item, timeout=timeout)

    def sleep(self, seconds: float) -> None:
        threading.Event().wait(seconds)

    def stream_limit(self, max_active_runs: int, max_thread_streams: int) -> int:
        """Each open stream holds a host request thread and a pump thread: the smaller cap wins, so a
        thread host answers 503 while it still has threads for /health and cancel, instead of queueing."""
        return min(max_active_runs, max_thread_streams)


class _GreenletHandle:
    def __init__(self, greenlet: Any) -> None:
        self._greenlet = greenlet

    def stop(self, timeout: float) -> None:
        self._greenlet.kill(block=True, timeout=timeout)

    def alive(self) -> bool:
        return not self._greenlet.dead


class GeventRuntime:
    name = "gevent"
    monotonic = staticmethod(time.monotonic)
    now_ms = staticmethod(wall_clock_ms)

    def __init__(self) -> None:
        import gevent
        import gevent.event
        import gevent.queue

        self._gevent = gevent
        self._queue_mod = gevent.queue
        self.start_gate = PriorityGate(START_GATE_LIMIT, gevent.event.Event)

    def spawn(
        self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None
    ) -> _GreenletHandle:
        """`on_stop` is not needed: a kill raises GreenletExit at the blocking read."""
        context = contextvars.copy_context()
        greenlet = self._gevent.Greenlet(context.run, fn, *args)
        greenlet.name = name
        greenlet.start()
        return _GreenletHandle(greenlet)

    def make_queue(self, maxsize: int) -> Any:
        # SimpleQueue: Queue without join()/task_done(), which nothing here uses (their bookkeeping: 0.3 KiB
        # per held stream, docs/design.md#stream-memory). It takes a maxsize since gevent 25.4.1 (before, the
        # stdlib's argument-less _PySimpleQueue): setup.cfg's floor.
        return self._queue_mod.SimpleQueue(maxsize)

    def queue_get(self, q: Any, timeout: float) -> Any:
        try:
            return q.get(timeout=max(timeout, 0.0))
        except self._queue_mod.Empty:
            raise Empty from None

    def queue_put(self, q: Any, item: Any, timeout: float | None) -> None:
        q.put(item, timeout=timeout)

    def sleep(self, seconds: float) -> None:
        self._gevent.sleep(seconds)

    def stream_limit(self, max_active_runs: int, max_thread_streams: int) -> int:
        """Greenlets are cheap: only --max-active-runs applies."""
        return max_active_runs


def socket_is_patched() -> bool:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a hard dependency
        return False
    return bool(monkey.is_module_patched("socket"))


def select_runtime(choice: str = "auto") -> Runtime:
    """`auto` picks gevent exactly when the socket module is patched (docs/design.md#runtime-backends)."""
    if choice == "gevent" or (choice == "auto" and socket_is_patched()):
        return GeventRuntime()
    return ThreadRuntime()


def require_patched(modules: tuple[str, ...] = ("socket", "ssl", "threading", "time")) -> None:
    """Fail at worker boot, not at the first stuck stream, if gevent patching is incomplete."""
    from gevent import monkey

    missing = [m for m in modules if not monkey.is_module_patched(m)]
    if missing:
        raise RuntimeError(f"gevent did not patch: {', '.join(missing)}")


class _IoWatchHandle:
    """A libev read watcher on a client socket: a few hundred bytes, where a parked greenlet per stream
    cost tens of KiB (bench/results)."""

    def __init__(self, watcher: Any) -> None:
        self._watcher = watcher

    def stop(self, timeout: float) -> None:
        del timeout  # stopping a watcher never waits
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
            watcher.close()

    def alive(self) -> bool:
        return self._watcher is not None


def watch_client_eof(sock: Any, on_eof: Callable[[], None]) -> TaskHandle | None:
    """Call `on_eof` as soon as the client closes its end of `sock`, without waiting for a write.

    A streaming WSGI response only learns of a departure when a write fails
    (docs/design.md#close-and-disconnect), so an idle
    stream noticed it at its next heartbeat. Under gevent a read watcher on the socket wakes the hub when
    it becomes readable (no polling, no CPU while the client is quiet); readable with nothing to read is
    EOF, and `on_eof` then runs in a new greenlet. Bytes sent by the client (a pipelined request) are left
    for the server, and the watch ends. Returns None where it cannot watch (no socket, or the thread
    back-end: a blocked OS thread per stream is not worth it). Stop the handle in the same thread.
    """
    if sock is None or not socket_is_patched():
        return None
    try:
        fileno = sock.fileno()
        family, kind = sock.family, sock.type
    except (AttributeError, OSError):
        return None
    import socket as socket_mod

    import gevent

    def peek() -> bytes:
        # A duplicate descriptor with a zero timeout: the server's socket object keeps its own timeout.
        probe = socket_mod.fromfd(fileno, family, kind)
        try:
            probe.settimeout(0.0)
            return probe.recv(1, socket_mod.MSG_PEEK)
        finally:
            probe.close()

    watcher = gevent.get_hub().loop.io(fileno, 1)
    handle = _IoWatchHandle(watcher)

    def readable() -> None:  # runs in the hub: nothing here may block or switch
        try:
            data = peek()
        except BlockingIOError:
            return  # spurious wake-up: keep watching
        except OSError:
            data = b""  # reset by the peer: gone as well
        handle.stop(0)
        if data == b"":
            gevent.spawn(on_eof)

    watcher.start(readable)
    return handle


_T = TypeVar("_T")


class OffHubPool:
    """A few native threads per worker process for blocking work: gevent's own thread pool, made after fork
    on first use, one pool per kind of work so that one kind queues behind itself only
    (docs/design.md#runtime-backends). Where gevent is not used, the caller is already a thread of its own:
    `run` calls in place and `start` starts a thread."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._pool: Any = None
        after_fork_in_child(self._forget_pool)

    def _forget_pool(self) -> None:
        """In a forked child: the parent's pool threads do not exist here (docs/design.md#fork-registry)."""
        self._pool = None

    def _threads(self) -> Any:
        if self._pool is None:
            from gevent.threadpool import ThreadPool

            self._pool = ThreadPool(self.size)
        return self._pool

    def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)` on a pool thread, waited for without blocking the hub; its exception is re-raised."""
        if not socket_is_patched():
            return fn(*args)
        result: _T = self._threads().apply(fn, args)
        return result

    def start(self, fn: Callable[[], None]) -> None:
        """`fn()` on a pool thread, not waited for (its caller reads what it leaves behind)."""
        if not socket_is_patched():
            threading.Thread(target=fn, name=self.name, daemon=True).start()
            return
        self._threads().spawn(fn)


#: Bounded file reads of reattach (its tail scan and backlog chunks): hostile readers queue here, never in
#: front of the hub's own threadpool or the body decoder.
READS = OffHubPool(2, "agui-reattach-read")
#: File work whose total grows with the number of files (the retention sweeps, the replay budget's scan):
#: one thread, so a sweep never takes the reattach readers' or the decoder's threads.
MAINTENANCE = OffHubPool(1, "agui-maintenance")


def read_off_hub(fn: Callable[..., _T], *args: Any) -> _T:
    """A blocking file read of reattach off the hub (docs/design.md#reattach)."""
    return READS.run(fn, *args)


class FileWatch(Protocol):
    def wait(self, timeout: float) -> None:
        """Return when the file changed (or may have), or after `timeout` seconds at most."""

    def close(self) -> None: ...


#: A follower's longest wait for a record without a change notice (a missed or unavailable one).
WATCH_FALLBACK_S = 0.25
#: Where no notice exists (the thread back-end), a follower polls at this interval.
THREAD_POLL_S = 0.02


class _PollWatch:
    """The thread back-end: a short sleep (the follower holds a host thread anyway)."""

    def wait(self, timeout: float) -> None:
        threading.Event().wait(max(0.0, min(timeout, THREAD_POLL_S)))

    def close(self) -> None:
        return None


class _StatWatch:
    """libev's stat watcher (inotify on Linux): the follower sleeps until the record grows, with a slow
    poll as the fallback, instead of waking every 20 ms."""

    def __init__(self, path: str) -> None:
        import gevent
        import gevent.event

        self._changed = gevent.event.Event()
        self._watcher: Any = gevent.get_hub().loop.stat(path, WATCH_FALLBACK_S)
        self._watcher.start(self._changed.set)

    def wait(self, timeout: float) -> None:
        self._changed.wait(max(0.0, min(timeout, WATCH_FALLBACK_S)))
        self._changed.clear()

    def close(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
            watcher.close()


def watch_file(path: str) -> FileWatch:
    """A wait that ends when `path` changes: a stat watcher under gevent, a short poll elsewhere."""
    if not socket_is_patched():
        return _PollWatch()
    try:
        return _StatWatch(path)
    except (OSError, AttributeError, ValueError):
        return _PollWatch()
