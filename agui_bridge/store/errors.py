"""State-layer exceptions, kept free of I/O imports so the pure model can raise them.

Nothing here maps to HTTP: callers turn `StateError` into STATE_UNAVAILABLE (admission, cancel) or
STATE_PERSISTENCE_FAILED (in-stream commits).
"""

from __future__ import annotations


class StateError(Exception):
    """Any failure to read, lock or write a thread's state."""


class StateCorrupt(StateError):
    """The thread file exists but is not a valid schemaVersion 1 document (docs/design.md#state-load).

    `reason` names the broken rule; it never contains user text from the file.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StateLockTimeout(StateError):
    """The thread's file lock could not be taken within `lock_timeout_s` (retryable)."""


class StateWriteFailed(StateError):
    """An atomic write (or delete) did not complete; the previous file is left in place."""


class InvalidThreadId(StateError):
    """The thread id cannot name a state file (empty, or not encodable as UTF-8)."""
