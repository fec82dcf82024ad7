"""What a forked child must not inherit, reset in one place (docs/design.md#fork-registry).

A gunicorn worker is a fork of the master (and tests fork too): threads do not survive a fork, locks may be
copied while held, descriptors and caches describe the parent. Every per-process object that cares (the
state writer, the lock helpers' registry, the hand-off watchers, the thread pools, the document cache, ...)
registers a reset here when it is made, and the one `os.register_at_fork` hook below runs them all in the
child, before any other code of the child. So no object compares `os.getpid()` on every use.

Stdlib only: the gunicorn master imports this before gevent patches anything.
"""

from __future__ import annotations

import inspect
import os
import threading
import types
import weakref
from collections.abc import Callable

__all__ = ["after_fork_in_child", "registered"]

_Reset = Callable[[], None]

#: Resets in the order registered: a plain function strongly, a bound method weakly (an object that is
#: gone needs no reset, and registering must not keep it alive).
_resets: dict[int, Callable[[], _Reset | None]] = {}
_next_key = 0
_guard = threading.Lock()


def after_fork_in_child(reset: _Reset) -> None:
    """Call `reset` in every child forked from now on, first thing after the fork."""
    global _next_key
    with _guard:
        key = _next_key
        _next_key += 1
        if inspect.ismethod(reset):
            _resets[key] = _weak_method(reset.__self__, reset.__func__, key)
        else:
            _resets[key] = lambda: reset


def _weak_method(owner: object, func: Callable[[object], None], key: int) -> Callable[[], _Reset | None]:
    """`owner.func`, while `owner` lives; its entry leaves the table with it. (Not `weakref.WeakMethod`,
    whose callback fails at interpreter exit when the WeakMethod goes before its object.) The callback holds
    the table itself, not the module global, which is gone at interpreter exit."""
    resets = _resets

    def forget(_ref: weakref.ref[object]) -> None:
        resets.pop(key, None)

    owner_ref = weakref.ref(owner, forget)

    def bound() -> _Reset | None:
        alive = owner_ref()
        return None if alive is None else types.MethodType(func, alive)

    return bound


def registered() -> int:
    """How many resets are registered and alive (tests and diagnostics)."""
    return sum(1 for ref in list(_resets.values()) if ref() is not None)


def _run_resets_in_child() -> None:
    """The child is single-threaded here: the guard is made anew first, then every reset runs
    even if one fails (the first failure is raised afterwards, reported by Python as unraisable)."""
    global _guard
    _guard = threading.Lock()  # it may have been copied while another thread of the parent held it
    first_error: BaseException | None = None
    for ref in list(_resets.values()):
        reset = ref()
        if reset is None:
            continue
        try:
            reset()
        except Exception as exc:  # noqa: BLE001 - the others still run; the first is raised below
            first_error = first_error or exc
    if first_error is not None:
        raise first_error


os.register_at_fork(after_in_child=_run_resets_in_child)
