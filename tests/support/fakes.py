"""The one scripted A2A kernel of the unit tests, behind `agui_bridge.a2a.port.A2APort`.

`ScriptedA2A` answers each call from a per-method queue (a queued exception is raised instead) and
records every call in order; `streaming_a2a` builds one that answers every streaming call with the
same scripted stream and is what a test of a single run needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agui_bridge.a2a.port import A2APort, UpstreamStream
from agui_bridge.a2a.signals import A2AEvent, A2ATransportError
from agui_bridge.kernel.client import check_restore_reply

__all__ = ["ScriptedA2A", "ScriptedStream", "streaming_a2a"]


class ScriptedStream:
    """A stream that yields `batches` (after `delay_s` each), or, with a `gate`, blocks until aborted."""

    def __init__(
        self, batches: list[list[A2AEvent]], gate: threading.Event | None = None, delay_s: float = 0.0
    ) -> None:
        self._batches = batches
        self._gate = gate
        self._delay_s = delay_s

    def batches(self) -> Iterator[list[A2AEvent]]:
        if self._gate is not None:
            self._gate.wait(10)
            raise A2ATransportError("aborted")
        for batch in self._batches:
            if self._delay_s:
                time.sleep(self._delay_s)
            yield batch

    def abort(self) -> None:
        if self._gate is not None:
            self._gate.set()

    def close(self) -> None:
        pass


@dataclass
class ScriptedA2A:
    """Answers each call from a per-method queue; a queued exception is raised instead."""

    streams: dict[str, list[Any]] = field(default_factory=dict)
    tasks: list[Any] = field(default_factory=list)
    unary: list[Any] = field(default_factory=list)
    restored: tuple[int, object] = (200, {"status": "current"})
    pipeline: list[object] = field(default_factory=list)  # /iac-code/pipeline/state answers (None: 404)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    #: When set, the answer to every streaming call (the per-method queues are not consulted).
    every_stream: ScriptedStream | None = None

    def open_stream(self, method: str, params: dict[str, Any]) -> UpstreamStream:
        self.calls.append((method, params))
        if self.every_stream is not None:
            return self.every_stream
        item = self.streams[method].pop(0)
        if isinstance(item, Exception):
            raise item
        return item if isinstance(item, ScriptedStream) else ScriptedStream(item)

    def get_task(self, task_id: str, history_length: int = 100) -> A2AEvent:
        self.calls.append(("GetTask", task_id))
        return self._answer(self.tasks)

    def send_message(self, params: dict[str, Any]) -> A2AEvent:
        self.calls.append(("SendMessage", params))
        return self._answer(self.unary)

    def ensure_restored(self, cwd: str, session_id: str, task_id: str) -> None:
        self.calls.append(("ensure-restored", session_id))
        check_restore_reply(*self.restored)  # the scripted HTTP reply, read as the real client reads it

    def cancel_task(self, task_id: str) -> None:
        self.calls.append(("CancelTask", task_id))

    def pipeline_state(self, task_id: str, after_sequence: int) -> object | None:
        self.calls.append(("pipeline-state", after_sequence))
        return self.pipeline.pop(0) if self.pipeline else None

    def close(self) -> None:
        self.calls.append(("close", None))

    @staticmethod
    def _answer(queue: list[Any]) -> A2AEvent:
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        answer: A2AEvent = item
        return answer

    def methods(self) -> list[str]:
        return [name for name, _ in self.calls]

    @property
    def cancelled(self) -> list[str]:
        """The task ids of the CancelTask calls, in order."""
        return [str(task_id) for name, task_id in self.calls if name == "CancelTask"]


def streaming_a2a(batches: list[list[A2AEvent]], delay_s: float = 0.0) -> ScriptedA2A:
    """A kernel whose every streaming call yields `batches` (after `delay_s` each)."""
    return ScriptedA2A(every_stream=ScriptedStream(batches, delay_s=delay_s))


def _conforms(client: ScriptedA2A) -> A2APort:
    return client  # a type checker run over the tests proves the fake satisfies the port
