"""File work of unbounded total cost, on a native thread instead of the gevent hub (docs/design.md#retention).

The retention sweep and the replay budget scan visit every file of `replay/`: bounded per file, not in
total. Under gevent the calling greenlet waits cooperatively (`state.handoff`) while a native thread does
the work, so every stream of the worker keeps running; without patching the work runs in the caller,
which is already a thread of its own (the thread back-end's maintenance thread, the CLI).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agui_bridge.state.handoff import native_primitives, new_waiter

_T = TypeVar("_T")


def run_off_hub(fn: Callable[..., _T], *args: Any, name: str = "agui-offload") -> _T:
    """`fn(*args)` on a native thread, waited for without blocking the hub; its exception is re-raised."""
    lock, start_thread, patched = native_primitives()
    if not patched:
        return fn(*args)
    waiter = new_waiter(True, lock)
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller, in its own greenlet
            outcome.append((False, exc))
        finally:
            waiter.complete()

    start_thread(work, (), name)
    waiter.wait(None)
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    result: _T = value
    return result


def start_off_hub(fn: Callable[[], None], *, name: str) -> None:
    """Start `fn()` on a native thread and do not wait (its caller reads what it leaves behind)."""
    _lock, start_thread, _patched = native_primitives()
    start_thread(fn, (), name)


__all__ = ["run_off_hub", "start_off_hub"]
