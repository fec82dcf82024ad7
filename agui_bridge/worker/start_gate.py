"""The start gate: a burst of new runs is started a few at a time, so the worker keeps answering.

Under gevent the hub runs every ready greenlet once per loop turn. A burst of a thousand `POST /` makes a
thousand greenlets ready at once, each parsing, validating and admitting its run, then opening its kernel
stream, for milliseconds of CPU between waits: one loop turn takes seconds, and a `/health` probe, a
heartbeat or a cancel accepted meanwhile waits for all of them (docs/design.md#start-gate).

`PriorityGate` lets at most `limit` starts run at once; the others wait (not ready, so not in the loop
turn) in arrival order. Admissions (up to RUN_STARTED) go before kernel opens (the pump's first read), so
under a burst every client gets RUN_STARTED first and the kernel streams open behind them. A start that
waited `wait_s` for a slot goes through without one: the gate bounds the loop turn, it never refuses or
starves a run.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

#: Starts (admissions and kernel opens) in flight at once per worker (docs/design.md#start-gate). Group
#: commit still gets this many admissions per flush; a loop turn costs at most this many starts of CPU.
START_GATE_LIMIT = 16
#: Longest wait of an admission for a slot before it goes through anyway (a gate never refuses a run).
ADMIT_WAIT_S = 30.0
#: Longest wait of a kernel open behind admissions. Long enough for a whole burst to be admitted first: a
#: shorter wait let the opens of a 1,000-stream burst flood back in and delayed its last RUN_STARTED (about
#: 1.5x with 5 s). A steady load cannot starve an open: its client waits for the turn before the next run.
OPEN_WAIT_S = 30.0


class Event(Protocol):
    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class PriorityGate:
    """A counting semaphore with two classes of waiter: `urgent` ones are served before the others.

    Safe from greenlets of one hub and from threads (a short lock guards the counters; waits happen on
    `make_event()` outside it).
    """

    def __init__(self, limit: int, make_event: Callable[[], Event]) -> None:
        self._free = limit
        self._make_event = make_event
        self._lock = threading.Lock()
        self._urgent: deque[Event] = deque()
        self._later: deque[Event] = deque()

    def acquire(self, timeout: float, *, urgent: bool = True) -> bool:
        """Take a slot, waiting at most `timeout`; False: no slot (the caller goes on without one)."""
        with self._lock:
            ahead = self._urgent or (not urgent and self._later)
            if self._free > 0 and not ahead:
                self._free -= 1
                return True
            event = self._make_event()
            (self._urgent if urgent else self._later).append(event)
        try:
            granted = event.wait(max(timeout, 0.0))
        except BaseException:  # killed while waiting: a slot handed over meanwhile goes to the next one
            if self._withdraw(event, urgent):
                self.release()
            raise
        return granted or self._withdraw(event, urgent)

    def _withdraw(self, event: Event, urgent: bool) -> bool:
        """Stop waiting; True if a slot was handed over just before (the caller holds it then)."""
        with self._lock:
            if event.is_set():
                return True
            (self._urgent if urgent else self._later).remove(event)
            return False

    def release(self) -> None:
        """Give the slot to the next waiter (urgent first), or back to the pool."""
        with self._lock:
            queue = self._urgent or self._later
            if not queue:
                self._free += 1
                return
            event = queue.popleft()
            event.set()  # the slot passes to the waiter directly: nobody can take it in between


@contextmanager
def admission_slot(gate: PriorityGate, wait_s: float = ADMIT_WAIT_S) -> Iterator[None]:
    """Hold an urgent slot while a run request is admitted (its body is already read: a client that
    uploads slowly holds no slot), and give it back when admission ends, however it ends."""
    held = gate.acquire(wait_s)
    try:
        yield
    finally:
        if held:
            gate.release()


__all__ = ["ADMIT_WAIT_S", "OPEN_WAIT_S", "START_GATE_LIMIT", "PriorityGate", "admission_slot"]
