"""The stream of an active-guidance request (behaviour.md 3.6): send, validate, never project.

Guidance adds a user message to a Pipeline task that another run is streaming, so it must not touch
that run: it holds no lease, writes no state, projects nothing and never cancels the task (not on
error, not on disconnect). Events are only checked for identity and for a state that ends the task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from agui_bridge import tracing
from agui_bridge.a2a import messages as a2a_messages
from agui_bridge.a2a.signals import A2AError, A2AEvent, A2ARpcError
from agui_bridge.errors import (
    A2AExecutionFailed,
    A2AProtocolError,
    A2AUnavailable,
    BridgeError,
    Cancelled,
    SessionBackupNotReady,
)
from agui_bridge.i18n import translate
from agui_bridge.logs import bind_log_context
from agui_bridge.runs.admission import GuidanceTicket
from agui_bridge.runs.observer import Outcome
from agui_bridge.runs.stream import (
    StreamDeps,
    _pump,
    _PumpFailed,
    check_pump_alive,
    last_user_message_id,
    stop_reading,
)
from agui_bridge.runs.upstream import Upstream
from agui_bridge.runtime import Empty, TaskHandle
from agui_bridge.validation.content import user_message_parts
from agui_bridge.validation.run_input import RunInput
from agui_bridge.wire import events as ev
from agui_bridge.wire.events import Event
from agui_bridge.wire.sse import HEARTBEAT_FRAME, encode_events

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

    def __init__(self, deps: StreamDeps, ticket: GuidanceTicket, run: RunInput, language: str) -> None:
        self._deps = deps
        self._ticket = ticket
        self._run = run
        self._language = language
        self._upstream: Upstream | None = None
        self._pump: TaskHandle | None = None
        self._started_at = time.monotonic()
        self._cleaned = False
        self._stop_requested = False
        self._queue: Any = None
        self._outcome: Outcome | None = None
        self.client_socket: Any = None  # set by the service: the socket whose write deadline it set
        deps.observer.run_started()
        self._trace_parent = tracing.capture()  # the request's span: the body is iterated after it

    @property
    def key(self) -> str:
        """Guidance holds no lease; this key only tells it apart from every run and other guidance."""
        return f"guidance:{self._ticket.thread_id}/{self._ticket.run_id}"

    @property
    def outcome(self) -> Outcome:
        return self._outcome or Outcome.DISCONNECTED

    def _conclude(self, outcome: Outcome) -> None:
        if self._outcome is None:
            self._outcome = outcome

    def request_stop(self) -> None:
        """Worker shutdown: end with RUN_ERROR CANCELLED; the task is left alone, as on a disconnect."""
        self._stop_requested = True
        if self._queue is not None:
            try:
                self._deps.runtime.queue_put(self._queue, None, 0)
            except Exception:
                log.debug("stop wake-up not queued", exc_info=True)

    def __iter__(self) -> Iterator[bytes]:
        ids = {"agui.thread_id": self._ticket.thread_id, "agui.run_id": self._ticket.run_id}
        return tracing.traced_iterator(self._events(), "agui.guidance", ids, parent=self._trace_parent,
                                       outcome=lambda: self.outcome)  # fmt: skip

    def close(self) -> None:
        self._cleanup()

    def _encode(self, events: list[Event]) -> bytes:
        self._deps.observer.events(event["type"] for event in events)
        return encode_events(events)

    def _error(self, error: BridgeError) -> bytes:
        if isinstance(error, Cancelled):
            self._conclude(Outcome.SHUTDOWN if self._stop_requested else Outcome.CANCELLED)
        self._conclude(Outcome.ERROR)
        message = error.raw_message or translate(error.message_key, self._language, **error.params)
        return self._encode([ev.run_error(self._ticket.thread_id, self._ticket.run_id, str(error.code), message, [])])

    def _events(self) -> Iterator[bytes]:
        ticket = self._ticket
        bind_log_context(thread_id=ticket.thread_id, run_id=ticket.run_id)
        try:
            yield self._encode([ev.run_started(ticket.thread_id, ticket.run_id, ticket.parent_run_id)])
            try:
                yield from self._stream()
                self._conclude(Outcome.SUCCESS)
                yield self._encode([ev.run_finished(ticket.thread_id, ticket.run_id, {"type": "success"}, [])])
            except BridgeError as error:
                yield self._error(error)
            except A2ARpcError as exc:
                backup = exc.session_backup_not_ready
                yield self._error(SessionBackupNotReady() if backup else A2AUnavailable())
            except A2AError:
                yield self._error(A2AUnavailable())
            except Exception:
                log.exception("AG-UI guidance run failed")
                yield self._error(A2AUnavailable())
        finally:
            self._cleanup()

    def _stream(self) -> Iterator[bytes]:
        ticket = self._ticket
        deps = self._deps
        settings = deps.settings
        parts = user_message_parts(self._run.messages)
        metadata = a2a_messages.iac_code_metadata(self._run.props, ticket.cwd, self._language)
        message_id = last_user_message_id(self._run.messages)
        message = a2a_messages.user_message(message_id, parts, metadata, ticket.context_id, ticket.task_id)
        upstream = Upstream(deps.client).new_run(a2a_messages.send_params(message))
        self._upstream = upstream
        queue = deps.runtime.make_queue(settings.queue_maxsize)
        self._queue = queue
        self._pump = deps.runtime.spawn(
            _pump, upstream, queue, deps.runtime, settings.client_stall_timeout_s,
            name="guidance-pump", on_stop=upstream.abort,
        )  # fmt: skip
        while True:
            try:
                item: Any = deps.runtime.queue_get(queue, settings.heartbeat_interval_s)
            except Empty:
                item = None
                check_pump_alive(self._pump, queue, deps.runtime)
            if self._stop_requested:
                raise Cancelled("server_shutdown")
            if item is None:
                deps.observer.heartbeat()
                yield HEARTBEAT_FRAME
                continue
            if isinstance(item, _PumpFailed):
                raise item.error
            if not isinstance(item, list):
                return  # the end of the stream
            for event in item:
                check_event(event, ticket)

    def _cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        stop_reading(self._pump, self._upstream)
        self._deps.observer.run_ended(str(self.outcome), time.monotonic() - self._started_at)
        if self._deps.on_run_end is not None:
            self._deps.on_run_end(self, str(self.outcome))
