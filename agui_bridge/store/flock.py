"""The cross-process half of a thread's lock: `flock` on its sidecar `<file>.lock`, never polled
(docs/design.md#state-lock).

Uncontended, taking it is three system calls on the caller (open, a non-blocking `flock`, `fstat`).
Contended, a native helper thread makes the blocking `flock` call, so the kernel wakes it the moment the
holder lets go (a waiter that polled could only win if its poll fell into the microseconds between the
holder's release and its next take) while the gevent hub keeps running; the caller waits cooperatively
until the helper has the lock or its deadline passes. A helper that wins after its caller gave up
releases at once, unless a later caller of this process waiting for the same file adopted it meanwhile:
so there is at most one parked helper per file and process, even behind a holder that never lets go.

Nothing outlives a transaction but parked helpers. Release is an explicit unlock and close, and a forked
child closes every descriptor it inherited from here without unlocking (the lock belongs to the parent).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from contextlib import suppress
from typing import Any

from agui_bridge.store.errors import StateError, StateLockTimeout
from agui_bridge.store.filewrite import close_file
from agui_bridge.store.handoff import Waiter, native_primitives, new_waiter
from agui_bridge.worker.fork import after_fork_in_child

__all__ = ["acquire", "release"]

LOCK_FILE_MODE = 0o600
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CONTENDED = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})


class _Park:
    """A helper thread blocked in `flock(fd, LOCK_EX)` and the caller it works for (None: abandoned)."""

    __slots__ = ("error", "fd", "granted", "key", "waiter")

    def __init__(self, key: str, fd: int, waiter: Waiter) -> None:
        self.key = key
        self.fd = fd
        self.waiter: Waiter | None = waiter
        self.granted = False
        self.error: OSError | None = None


class _Registry:
    """This process's parked helpers and every descriptor handed out here (closed in a forked child)."""

    def __init__(self) -> None:
        lock, start_thread, patched = native_primitives()
        self.lock_factory = lock
        self.start_thread = start_thread
        self.patched = patched
        self.guard: Any = lock()  # native: helper threads take it too; held only for a few statements
        self.abandoned: dict[str, _Park] = {}
        self.fds: set[int] = set()


_registry: _Registry | None = None


def _current() -> _Registry:
    global _registry
    registry = _registry
    if registry is None:
        registry = _registry = _Registry()
    return registry


def _forget_inherited() -> None:
    """In a forked child: close what the parent held or waited on, without unlocking it."""
    global _registry
    registry, _registry = _registry, None
    if registry is not None:
        for fd in registry.fds:
            with suppress(OSError):
                close_file(fd)


after_fork_in_child(_forget_inherited)  # docs/design.md#fork-registry


def _open(path: str) -> int:
    """The lock file's descriptor; FileNotFoundError (its directory is missing) is left to the caller."""
    try:
        return os.open(path, _OPEN_FLAGS, LOCK_FILE_MODE)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StateError("thread file lock unavailable") from exc


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _CONTENDED:
            return False
        raise StateError("thread file lock unavailable") from exc
    return True


def _unlock_and_close(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)  # explicit: a copy of fd in a forked child must not keep the lock
    except OSError:
        pass
    finally:
        close_file(fd)


def release(fd: int) -> None:
    """Let go of a lock `acquire` returned."""
    registry = _current()
    registry.fds.discard(fd)
    _unlock_and_close(fd)


def acquire(path: str, deadline: float) -> int:
    """Lock the file `path` (created 0600 if missing) by `deadline` (`time.monotonic`); returns the locked
    descriptor for `release`. Raises `StateLockTimeout` at the deadline, `StateError` if unusable, and
    FileNotFoundError if the directory is missing (the store creates it on first use).

    The lock is always on the inode the path names when it is won: `state.sweep` removes orphaned lock
    files while holding them, and a waiter that opened such a file just before it was unlinked would win a
    lock nobody else can see, so it lets go and tries again.
    """
    registry = _current()
    while True:
        fd = _open(path)
        registry.fds.add(fd)
        try:
            locked = _try_lock(fd)
        except BaseException:
            release(fd)
            raise
        if not locked:
            fd = _wait(registry, path, fd, deadline)  # owns fd: adopts, hands over or releases it
        try:
            info = os.fstat(fd)
        except OSError as exc:
            release(fd)
            raise StateError("thread file lock unavailable") from exc
        if info.st_nlink == 0:
            release(fd)
            continue
        if not stat.S_ISREG(info.st_mode):
            release(fd)
            raise StateError("thread file lock is not a regular file")
        if stat.S_IMODE(info.st_mode) != LOCK_FILE_MODE and info.st_uid == os.geteuid():
            with suppress(OSError):
                os.fchmod(fd, LOCK_FILE_MODE)  # created under a umask that took bits away
        return fd


def _wait(registry: _Registry, path: str, fd: int, deadline: float) -> int:
    """Wait for the lock on a helper thread; returns the locked descriptor (`fd`, or an adopted helper's)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        release(fd)
        raise StateLockTimeout("thread file lock timed out")
    waiter = new_waiter(registry.patched, registry.lock_factory)
    with registry.guard:
        park = registry.abandoned.pop(path, None)
        if park is not None:
            park.waiter = waiter  # still blocked (a granted one leaves `abandoned` under the guard)
    if park is None:
        park = _Park(path, fd, waiter)
        try:
            registry.start_thread(_block, (registry, park), "agui-state-lock")
        except BaseException:
            release(fd)
            raise
    else:
        release(fd)  # the adopted helper's descriptor is queued in the kernel already
    try:
        waiter.wait(remaining)
    except BaseException:  # the waiting greenlet was killed: never leave a lock won for nobody
        if _settle(registry, park) or park.error is not None:
            release(park.fd)
        raise
    if _settle(registry, park):
        return park.fd
    if park.error is not None:
        release(park.fd)
        raise StateError("thread file lock unavailable") from park.error
    raise StateLockTimeout("thread file lock timed out")


def _settle(registry: _Registry, park: _Park) -> bool:
    """True if the helper won the lock for this caller; otherwise the caller gives the helper up."""
    with registry.guard:
        if park.granted:
            return True
        if park.error is None:
            park.waiter = None  # the helper lets go as soon as it wins, unless adopted again
            registry.abandoned.setdefault(park.key, park)
        return False


def _block(registry: _Registry, park: _Park) -> None:
    """Helper thread: one blocking `flock`, then hand the lock over (or let it go if nobody wants it)."""
    try:
        fcntl.flock(park.fd, fcntl.LOCK_EX)
    except OSError as exc:
        park.error = exc
    with registry.guard:
        park.granted = park.error is None
        waiter = park.waiter
        if waiter is not None:
            waiter.complete()  # under the guard: the caller settles under it too
        elif registry.abandoned.get(park.key) is park:
            del registry.abandoned[park.key]
    if waiter is None:
        registry.fds.discard(park.fd)
        _unlock_and_close(park.fd)
