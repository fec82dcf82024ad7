"""The SSE generator of one run: pump + bounded queue + heartbeat, commits, terminal events.

Design (architecture.md, stack-notes 2.6): a pump task reads the upstream A2A stream and puts the
events of each network read into a bounded queue; this generator reads the queue with a timeout
that is the time left until the next heartbeat or lease renewal, so `: heartbeat` goes out exactly
after `heartbeat_interval_s` without an event. Recovery-critical ids are committed before anything
that depends on them is shown (fail closed). The lease is released before the terminal event is
written (D7). If the client goes away mid-run, cleanup cancels the A2A task (D14).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agui_bridge.a2a import messages as a2a_messages
from agui_bridge.a2a.client import A2AClient, A2AStream
from agui_bridge.a2a.signals import (
    TERMINAL_STATES,
    A2AError,
    A2AEvent,
    A2ARpcError,
)
from agui_bridge.errors import (
    A2AExecutionFailed,
    A2AProtocolError,
    A2AUnavailable,
    BridgeError,
    Cancelled,
    ErrorCode,
    ExecutionLost,
    SessionBackupNotReady,
    StatePersistenceFailed,
)
from agui_bridge.i18n import translate
from agui_bridge.projection.interrupts import build_interrupt, collect_inputs
from agui_bridge.projection.projector import RunProjector
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runtime import Empty, Runtime, TaskHandle
from agui_bridge.settings import Settings
from agui_bridge.state import model
from agui_bridge.state.store import StateError, ThreadStore
from agui_bridge.validation.content import user_message_parts
from agui_bridge.validation.run_input import RunInput
from agui_bridge.wire import events as ev
from agui_bridge.wire.events import Event
from agui_bridge.wire.sse import HEARTBEAT_FRAME, encode_event, encode_events

log = logging.getLogger(__name__)

_END = object()


@dataclass(frozen=True)
class _PumpFailed:
    error: Exception


@dataclass(frozen=True)
class StreamDeps:
    settings: Settings
    store: ThreadStore
    client: A2AClient
    runtime: Runtime
    on_run_end: Callable[[str, str], None] | None = None


def _pump(stream: A2AStream, queue: Any, runtime: Runtime, put_timeout_s: float) -> None:
    """Runs in its own greenlet/thread. Catches Exception only: a kill must pass through."""
    try:
        for batch in stream.batches():
            runtime.queue_put(queue, batch, put_timeout_s)
        runtime.queue_put(queue, _END, put_timeout_s)
    except Exception as exc:  # noqa: BLE001 - reported to the stream as an item
        try:
            runtime.queue_put(queue, _PumpFailed(exc), put_timeout_s)
        except Exception:
            log.debug("pump could not report its failure", exc_info=True)


def _to_bridge_error(exc: A2AError) -> BridgeError:
    if isinstance(exc, A2ARpcError) and exc.session_backup_not_ready:
        return SessionBackupNotReady(raw_message=exc.message or None)
    return A2AUnavailable()


class _Terminal(Exception):
    """Internal: the run reached its terminal event (carried as the events to write)."""

    def __init__(self, events: list[Event]) -> None:
        super().__init__("terminal")
        self.events = events


class RunStream:
    """Iterable WSGI body for one admitted run."""

    def __init__(self, deps: StreamDeps, ticket: RunTicket, run: RunInput, language: str) -> None:
        self._deps = deps
        self._settings = deps.settings
        self._ticket = ticket
        self._run = run
        self._language = language
        self._ledger = RunLedger(deps.store, ticket)
        self._projector = RunProjector(ticket.thread_id, ticket.run_id, ticket.text_digests)
        self._session_emitted = False
        self._upstream: A2AStream | None = None
        self._pump: TaskHandle | None = None
        self._finished = False  # terminal event produced or the run is parked on an interrupt
        self._generator: Iterator[bytes] | None = None
        self._started = False
        self._cleaned = False
        self._started_at = time.monotonic()
        self.outcome = "disconnected"

    # ---- helpers ----------------------------------------------------------------------------

    def _message(self, error: BridgeError) -> str:
        if error.raw_message:
            return error.raw_message
        return translate(error.message_key, self._language, **error.params)

    def _error_events(self, error: BridgeError) -> list[Event]:
        events = self._projector.close_all()
        events.append(
            ev.run_error(
                self._ticket.thread_id,
                self._ticket.run_id,
                str(error.code),
                self._message(error),
                self._projector.usage_entries(),
            )
        )
        return events

    def _cancel_task_later(self, task_id: str | None) -> None:
        if not task_id:
            return
        client = self._deps.client

        def cancel() -> None:
            try:
                client.cancel_task(task_id)
            except Exception:  # noqa: BLE001 - best effort, logged
                log.warning("CancelTask failed for an abandoned run", extra={"task_id": task_id})

        self._deps.runtime.spawn(cancel, name=f"cancel:{self._ticket.run_id}")

    def _release(self, *, retire: bool) -> None:
        """Release the lease before the terminal event (D7); failures are logged, not fatal."""
        try:
            self._ledger.finish(ev.now_ms(), retire=retire)
        except StateError:
            log.warning("Failed to persist AG-UI thread state at run end", exc_info=True)

    def _fail_closed(self, key: str) -> _Terminal:
        """A recovery-critical write failed: cancel the task, retire, report (behaviour.md 8.5)."""
        self._cancel_task_later(self._ticket.task_id)
        try:
            self._ledger.fail_closed(ev.now_ms())
        except StateError:
            log.warning("Failed to persist AG-UI thread state after a failed commit", exc_info=True)
        self._finished = True
        self.outcome = "error"
        return _Terminal(self._error_events(StatePersistenceFailed(key)))

    # ---- the generator ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        if self._generator is None:
            self._generator = self._events()
        return self._generator

    def close(self) -> None:
        """Called by the WSGI server when the response ends or the client went away."""
        if self._generator is not None and self._started:
            self._generator.close()  # type: ignore[attr-defined]
        self._cleanup()

    def _events(self) -> Iterator[bytes]:
        self._started = True
        ticket = self._ticket
        try:
            yield encode_event(ev.run_started(ticket.thread_id, ticket.run_id, ticket.parent_run_id))
            for task_id in ticket.orphaned_task_ids + ticket.expired_task_ids:
                self._cancel_task_later(task_id)
            try:
                yield from self._run_upstream()
            except _Terminal as terminal:
                yield encode_events(terminal.events)
            except BridgeError as error:
                yield encode_events(self._end_with_error(error))
            except A2AError as exc:
                yield encode_events(self._end_with_error(_to_bridge_error(exc)))
            except Exception:
                log.exception("AG-UI A2A bridge run failed", extra={"run_id": ticket.run_id})
                yield encode_events(self._end_with_error(A2AUnavailable()))
        finally:
            self._cleanup()

    def _end_with_error(self, error: BridgeError, *, task_ended: bool = False) -> list[Event]:
        """Generic error path: cancel and retire unless an interrupt is pending (4.1).

        A task that already reached a terminal state (failed, canceled, ...) is not cancelled again.
        """
        self.outcome = "error"
        if not self._finished:
            self._finished = True
            retire = not self._ticket.pending
            if retire and not task_ended and not isinstance(error, Cancelled):
                self._cancel_task_later(self._ticket.task_id)
            self._release(retire=retire)
        return self._error_events(error)

    def _run_upstream(self) -> Iterator[bytes]:
        ticket = self._ticket
        settings = self._settings
        if ticket.is_resume:
            raise _Terminal(self._error_events_unsupported_resume())
        parts = user_message_parts(self._run.messages)
        message_id = _last_user_message_id(self._run.messages)
        metadata = a2a_messages.iac_code_metadata(self._run.props, ticket.cwd, self._language)
        message = a2a_messages.user_message(message_id, parts, metadata, ticket.context_id)
        self._upstream = self._deps.client.open_stream("SendStreamingMessage", a2a_messages.send_params(message))
        runtime = self._deps.runtime
        queue = runtime.make_queue(settings.queue_maxsize)
        self._pump = runtime.spawn(
            _pump,
            self._upstream,
            queue,
            runtime,
            settings.client_stall_timeout_s,
            name=f"pump:{ticket.run_id}",
            on_stop=self._upstream.abort,
        )
        heartbeat_s = settings.heartbeat_interval_s
        renew_s = settings.lease_renew_interval_s
        lease_ttl_ms = int(settings.lease_ttl_s * 1000)
        now = time.monotonic()
        next_heartbeat = now + heartbeat_s
        next_renew = now + renew_s
        while True:
            try:
                item = runtime.queue_get(queue, min(next_heartbeat, next_renew) - time.monotonic())
            except Empty:
                item = None
            if item is _END:
                break
            if isinstance(item, _PumpFailed):
                raise item.error
            if item is not None:
                out: list[Event] = []
                try:
                    done = any(self._handle(a2a_event, out) for a2a_event in item)
                except (_Terminal, BridgeError, A2AError):
                    if out:  # what was projected before the failure is shown before its spans close
                        yield encode_events(out)
                    raise
                if out:
                    yield encode_events(out)
                    next_heartbeat = time.monotonic() + heartbeat_s
                if done:
                    break
            now = time.monotonic()
            if now >= next_renew:  # also while events flow, so a busy run never loses its lease
                next_renew = now + renew_s
                if self._renew(lease_ttl_ms):
                    self._cancel_task_later(ticket.task_id)
                    raise Cancelled()
            if now >= next_heartbeat:
                next_heartbeat = now + heartbeat_s
                yield HEARTBEAT_FRAME
        if not self._finished:  # an interrupt already wrote its RUN_FINISHED
            yield encode_events(self._finish())

    def _renew(self, lease_ttl_ms: int) -> bool:
        try:
            return self._ledger.renew(ev.now_ms(), lease_ttl_ms)
        except StateError:
            log.warning("lease renewal failed", exc_info=True)
            return False

    def _error_events_unsupported_resume(self) -> list[Event]:
        self._finished = True
        self.outcome = "error"
        self._release(retire=False)
        return self._error_events(ExecutionLost("task_unavailable"))

    # ---- per event ----------------------------------------------------------------------------

    def _handle(self, event: A2AEvent, out: list[Event]) -> bool:
        """Identity, commits, session event, projection, interrupts; True when the run ends."""
        ticket = self._ticket
        if event.context_id is not None and event.context_id != ticket.context_id:
            raise A2AProtocolError("context_changed")
        if event.task_id is not None and event.task_id != ticket.task_id:
            if ticket.task_id is not None:
                raise A2AProtocolError("task_changed")
            try:
                self._ledger.record_task(event.task_id)
            except StateError:
                ticket.task_id = event.task_id
                raise self._fail_closed("task_mapping_failed") from None
        session_id = a2a_messages.session_id_of(event.iac) if event.iac else None
        if session_id is not None and session_id != ticket.session_id:
            if ticket.session_id is not None:
                raise A2AProtocolError("session_changed")
            try:
                self._ledger.record_session(session_id)
            except StateError:
                raise self._fail_closed("session_mapping_failed") from None
        if not self._session_emitted and ticket.task_id is not None and ticket.session_id is not None:
            out.append(self._session_event())
        out.extend(self._projector.project(event))
        inputs = collect_inputs(event.iac) if event.iac else []
        if inputs:
            out.extend(self._interrupt(inputs))
            return True
        state = event.state
        return state is not None and (state in TERMINAL_STATES or state == "input-required")

    def _session_event(self) -> Event:
        self._session_emitted = True
        ticket = self._ticket
        return ev.custom(
            ev.SESSION_EVENT,
            {
                "schemaVersion": 1,
                "threadId": ticket.thread_id,
                "aguiRunId": ticket.run_id,
                "executionId": ticket.execution_id,
                "contextId": ticket.context_id,
                "taskId": ticket.task_id,
                "rosInvocationId": ticket.ros_invocation_id,
                "sessionId": ticket.session_id,
            },
        )

    def _interrupt(self, inputs: list[Any]) -> list[Event]:
        """Commit the interrupt durably, then close spans and announce it (6.2, fail closed)."""
        ticket = self._ticket
        now_ms = ev.now_ms()
        expires_ms = now_ms + int(self._settings.interrupt_ttl_s * 1000)
        expires_at = model.format_rfc3339_ms(expires_ms)
        for request in inputs:
            for key in ("requestTaskId", "contextId"):
                expected = ticket.task_id if key == "requestTaskId" else ticket.context_id
                value = request.value.get(key)
                if isinstance(value, str) and value and expected is not None and value != expected:
                    raise A2AProtocolError(
                        "interrupt_other_task" if key == "requestTaskId" else "interrupt_other_context"
                    )
        pending = dict(ticket.pending)
        for request in inputs:
            previous = pending.get(request.input_id)
            announced = build_interrupt(request.value, expires_at)
            pending[request.input_id] = model.PendingInterrupt(
                value=request.value,
                sideband=request.sideband or bool(previous and previous.sideband),
                expires_at_ms=expires_ms,
                announced=announced,
            )
        self._projector.finalise_all_text()
        try:
            self._ledger.commit_interrupt(pending, self._projector.text_digests, now_ms)
        except StateError:
            raise self._fail_closed("interrupt_commit_failed") from None
        ticket.pending = pending
        self._finished = True
        self.outcome = "interrupt"
        events = self._projector.close_all()
        interrupts = [p.announced or build_interrupt(p.value, expires_at) for p in pending.values()]
        events.append(
            ev.run_finished(
                ticket.thread_id,
                ticket.run_id,
                {"type": "interrupt", "interrupts": interrupts},
                self._projector.usage_entries(),
            )
        )
        return events

    def _finish(self) -> list[Event]:
        """The upstream turn ended (terminal state or closed stream): decide the outcome (5.9)."""
        state = self._projector.last_state
        if state in ("completed", "input-required"):
            out: list[Event] = []
            if not self._session_emitted:
                out.append(self._session_event())
            self.outcome = "success"
            self._finished = True
            self._release(retire=True)
            out.extend(self._projector.close_all())
            out.append(
                ev.run_finished(
                    self._ticket.thread_id,
                    self._ticket.run_id,
                    {"type": "success"},
                    self._projector.usage_entries(),
                )
            )
            return out
        if state == "canceled":
            self.outcome = "cancelled"
            return self._end_with_error(Cancelled())
        return self._end_with_error(A2AExecutionFailed(), task_ended=state in TERMINAL_STATES)

    # ---- cleanup ------------------------------------------------------------------------------

    def _cleanup(self) -> None:
        """Stop the reader first, then close the socket it reads (stack-notes 2.6). Idempotent."""
        if self._cleaned:
            return
        self._cleaned = True
        if self._pump is not None:
            try:
                self._pump.stop(2.0)
            except Exception:
                log.debug("stopping the pump failed", exc_info=True)
        if self._upstream is not None:
            self._upstream.close()
        if not self._finished:
            # The client went away (or the server is stopping) mid-run: D14, behaviour.md 9.1.
            self._finished = True
            if not self._ticket.pending:
                self._cancel_task_later(self._ticket.task_id)
            self._release(retire=not self._ticket.pending)
        log.info(
            "run ended",
            extra={
                "thread_id": self._ticket.thread_id,
                "run_id": self._ticket.run_id,
                "execution_id": self._ticket.execution_id,
                "outcome": self.outcome,
                "duration_ms": int((time.monotonic() - self._started_at) * 1000),
            },
        )
        if self._deps.on_run_end is not None:
            self._deps.on_run_end(self._ticket.run_id, self.outcome)


def _last_user_message_id(messages: tuple[dict[str, Any], ...]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("id"), str):
            return str(message["id"])
    return "agui-user-message"


__all__ = ["ErrorCode", "RunStream", "StreamDeps"]
