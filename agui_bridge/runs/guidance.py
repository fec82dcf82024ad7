"""The stream of an active-guidance request (docs/design.md#guidance): send, validate, never project.

Guidance adds a user message to a Pipeline task that another run is streaming, so it must not touch
that run: it holds no lease, writes no state, projects nothing and never cancels the task (not on
error, not on disconnect). Events are only checked for identity and for a state that ends the task.
It reads the kernel through the same pump, heartbeat and emitter as a run (`runs/pump.py`, `runs/emit.py`)
and maps kernel failures the same way (`runs/failures.py`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from agui_bridge.a2a.errors import A2AError
from agui_bridge.a2a.signals import A2AEvent
from agui_bridge.errors import A2AExecutionFailed, A2AProtocolError, A2AUnavailable, BridgeError, Cancelled
from agui_bridge.i18n.language import translate
from agui_bridge.observability import tracing
from agui_bridge.observability.logs import bind_log_context
from agui_bridge.protocol import events as ev
from agui_bridge.runs.admission import GuidanceTicket
from agui_bridge.runs.connection import ClientConnection
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.failures import bridge_error
from agui_bridge.runs.observer import Outcome
from agui_bridge.runs.pump import Pacer, Pump, Signal, StopRequested
from agui_bridge.runs.upstream import Upstream, user_message_params
from agui_bridge.validation.run_input import RunInput

log = logging.getLogger(__name__)

_FAILED_STATES = frozenset({"failed", "rejected", "auth-required"})


def check_event(event: A2AEvent, ticket: GuidanceTicket) -> None:
    """Identity and task state of one event; raises the BridgeError that ends the guidance."""
    if event.context_id is not None and event.context_id != ticket.context_id:
        raise A2AProtocolError("context_changed")
    if event.task_id is not None and event.task_id != ticket.task_id:
        raise A2AProtocolError("task_changed")
    if event.state in _FAILED_STATES:
        raise A2AExecutionFailed()
    if event.state == "canceled":
        raise Cancelled()


class GuidanceStream:
    """Iterable WSGI body for one guidance request."""

    def __init__(
        self, deps: StreamDeps, ticket: GuidanceTicket, run: RunInput, language: str, *, client_socket: Any = None
    ) -> None:
        self._deps = deps
        self._ticket = ticket
        self._run = run
        self._language = language
        self._pump: Pump | None = None
        self._started_at = time.monotonic()
        self._cleaned = False
        self.emitter = Emitter(deps.observer)  # every event this stream shows passes through it
        self._pacer = Pacer(deps.runtime, deps.settings.heartbeat_interval_s, self.emitter.heartbeat)
        self._outcome: Outcome | None = None
        self._connection = ClientConnection(client_socket, write_timeout_s=deps.settings.client_write_timeout_s)
        deps.observer.run_started()
        self._trace_parent = tracing.capture()  # the request's span: the body is iterated after it

    @property
    def key(self) -> str:
        """Guidance holds no lease; this key only tells it apart from every run and other guidance."""
        return f"guidance:{self._ticket.thread_id}/{self._ticket.run_id}"

    @property
    def execution_id(self) -> str | None:
        """The running execution this guidance joins (the `Agui-Execution-Id` response header)."""
        return self._ticket.execution_id

    @property
    def outcome(self) -> Outcome:
        return self._outcome or Outcome.DISCONNECTED

    def _conclude(self, outcome: Outcome) -> None:
        if self._outcome is None:
            self._outcome = outcome

    def request_stop(self) -> None:
        """Worker shutdown: end with RUN_ERROR CANCELLED; the task is left alone, as on a disconnect."""
        self._pacer.request_stop()

    def __iter__(self) -> Iterator[bytes]:
        ids = {"agui.thread_id": self._ticket.thread_id, "agui.run_id": self._ticket.run_id}
        return tracing.traced_iterator(self._events(), "agui.guidance", ids, parent=self._trace_parent,
                                       outcome=lambda: self.outcome)  # fmt: skip

    def close(self) -> None:
        self._cleanup()

    def _error(self, error: BridgeError) -> bytes:
        if isinstance(error, Cancelled):
            self._conclude(Outcome.SHUTDOWN if self._pacer.stop_requested else Outcome.CANCELLED)
        self._conclude(Outcome.ERROR)
        message = error.raw_message or translate(error.message_key, self._language, **error.params)
        return self.emitter.events([ev.run_error(str(error.code), message, [])])

    def _events(self) -> Iterator[bytes]:
        ticket = self._ticket
        bind_log_context(thread_id=ticket.thread_id, run_id=ticket.run_id)
        emit = self.emitter.events
        try:
            yield emit([ev.run_started(ticket.thread_id, ticket.run_id, ticket.parent_run_id)])
            try:
                yield from self._stream()
                self._conclude(Outcome.SUCCESS)
                yield emit([ev.run_finished(ticket.thread_id, ticket.run_id, {"type": "success"}, [])])
            except StopRequested:
                yield self._error(Cancelled("server_shutdown"))
            except BridgeError as error:
                yield self._error(error)
            except A2AError as exc:
                yield self._error(bridge_error(exc))
            except Exception:
                log.exception("AG-UI guidance run failed")
                yield self._error(A2AUnavailable())
        finally:
            self._cleanup()

    def _stream(self) -> Iterator[bytes]:
        """Send the guidance and check every event until the send's stream ends."""
        ticket = self._ticket
        deps = self._deps
        settings = deps.settings
        params = user_message_params(
            self._run, cwd=ticket.cwd, context_id=ticket.context_id, language=self._language, task_id=ticket.task_id
        )
        upstream = Upstream(deps.client).new_run(params)
        pump = Pump(
            deps.runtime, upstream, maxsize=settings.queue_maxsize, put_timeout_s=settings.client_stall_timeout_s
        )
        self._pump = pump
        self._pacer.watch(pump.queue)
        pump.start(name="guidance-pump")
        while True:
            item = pump.get(self._pacer.wait_s())
            if item is Signal.END:
                return
            if isinstance(item, list):
                for event in item:
                    check_event(event, ticket)
            yield from self._pacer.tick()

    def _cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        if self._pump is not None:
            self._pump.stop()
        self._deps.observer.run_ended(self.outcome, time.monotonic() - self._started_at)
        self._connection.release()
        self._deps.registry.close(self)  # its place in the worker's stream cap is free again
