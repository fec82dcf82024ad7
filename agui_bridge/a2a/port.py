"""What the run streams need from the A2A kernel, as Protocols (docs/design.md#a2a-methods).

`A2AClient` (requests) satisfies `A2APort`; so does the scripted fake of the tests, so a test hands a
fake to the same code without `type: ignore`. Kept small on purpose: a method joins only when the
orchestration layer calls it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from agui_bridge.a2a.signals import A2AEvent

__all__ = ["A2APort", "UpstreamStream"]


class UpstreamStream(Protocol):
    """An open streaming call: the events of each network read, and two ways to end it."""

    def batches(self) -> Iterator[list[A2AEvent]]: ...

    def abort(self) -> None:
        """Wake a reader blocked in another thread, then close."""
        ...

    def close(self) -> None: ...


class A2APort(Protocol):
    """The JSON-RPC methods and the two iac-code HTTP extensions the bridge calls."""

    def open_stream(self, method: str, params: dict[str, Any]) -> UpstreamStream: ...

    def cancel_task(self, task_id: str) -> object:
        """The answer is not used: a cancel is best effort."""
        ...

    def get_task(self, task_id: str, history_length: int = 100) -> A2AEvent: ...

    def send_message(self, params: dict[str, Any]) -> A2AEvent: ...

    def ensure_restored(self, cwd: str, session_id: str, task_id: str) -> None: ...

    def pipeline_state(self, task_id: str, after_sequence: int) -> object | None: ...

    def close(self) -> None: ...
