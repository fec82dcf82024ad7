"""Wait for a condition that another thread or process makes true, with a bounded deadline instead of a sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02) -> T:
    """Call `check` until it returns without an AssertionError; return its value.

    When the deadline passes, the last AssertionError is raised again, so the failure says what was
    still wrong rather than only that time ran out. Other exceptions propagate at once.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(interval_s)
