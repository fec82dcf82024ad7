"""The SSE generator of one run: pump + bounded queue + heartbeat, commits, terminal events.

Design (architecture.md, stack-notes 2.6): a pump task reads the `Upstream` (one A2A call for a new
run; the answer calls and task follow-up for a resume) and puts the events of each network read into
a bounded queue; this generator reads the queue with a timeout that is the time left until the next
heartbeat, so `: heartbeat` goes out exactly after `heartbeat_interval_s` without an event. Unary
calls (resume preflight) run off the generator for the same reason. The lease is kept alive by the
worker's beacon (state/beacon.py), not by writes from each stream.

Recovery-critical facts (taskId, sessionId, an interrupt, an accepted answer) are committed before
anything that depends on them is shown (fail closed). The lease is released before the terminal event
is written (D7). If the client goes away mid-run, cleanup cancels the A2A task (D14) unless an
interrupt is still pending (9.1); a worker shutdown ends the run with RUN_ERROR (stack-notes 2.7).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from agui_bridge import tracing
from agui_bridge.a2a import messages as a2a_messages
from agui_bridge.a2a.client import A2AClient
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
    ExecutionExpired,
    ExecutionLost,
    SessionBackupNotReady,
    StatePersistenceFailed,
)
from agui_bridge.i18n import translate
from agui_bridge.logs import bind_log_context
from agui_bridge.projection.interrupts import InputRequest, build_interrupt, collect_inputs
from agui_bridge.projection.pipeline import PipelineMapper
from agui_bridge.projection.projector import RunProjector
from agui_bridge.runs import resume_plan
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.observer import NULL_OBSERVER, Outcome, RunObserver
from agui_bridge.runs.registry import TrackedRun
from agui_bridge.runs.upstream import Item, SendOpened, UnaryAccepted, Upstream
from agui_bridge.runtime import Empty, Runtime, TaskHandle
from agui_bridge.settings import Settings
from agui_bridge.state import model
from agui_bridge.state.store import StateError, ThreadStore
from agui_bridge.validation.content import user_message_parts
from agui_bridge.validation.run_input import RunInput
from agui_bridge.wire import events as ev
from agui_bridge.wire.events import Event
from agui_bridge.wire.sse import HEARTBEAT_FRAME, encode_events

log = logging.getLogger(__name__)

_END = object()
#: Upper bound of AG-UI events written in one socket write when the pump is ahead of the client.
_COALESCE_MAX_EVENTS = 256
_WAKE = object()  # put into the queue being waited on, so a stop request is seen at once
_T = TypeVar("_T")


@dataclass(frozen=True)
class _PumpFailed:
    error: Exception


@dataclass(frozen=True)
class StreamDeps:
    settings: Settings
    store: ThreadStore
    client: A2AClient
    runtime: Runtime
    on_run_end: Callable[[TrackedRun, str], None] | None = None
    observer: RunObserver = NULL_OBSERVER


#: Terminal error codes that mean the upstream kernel failed (counted by kind in metrics).
_UPSTREAM_CODES = frozenset(
    {ErrorCode.A2A_UNAVAILABLE, ErrorCode.A2A_PROTOCOL_ERROR, ErrorCode.A2A_EXECUTION_FAILED,
     ErrorCode.SESSION_BACKUP_NOT_READY}
)  # fmt: skip


def _pump(items: Iterable[Item], queue: Any, runtime: Runtime, put_timeout_s: float) -> None:
    """Runs in its own greenlet/thread. Catches Exception only: a kill must pass through."""
    try:
        for item in items:
            runtime.queue_put(queue, item, put_timeout_s)
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


class _StopRequested(Exception):
    """Internal: the worker is shutting down (graceful drain, stack-notes 2.7)."""


class _ClientGone(Exception):
    """Internal: the client closed its connection (`client_departed`): end as a disconnect."""


class _Terminal(Exception):
    """Internal: the run reached its terminal event (carried as the events to write)."""

    def __init__(self, events: list[Event]) -> None:
        super().__init__("terminal")
        self.events = events


class RunStream:
    """Iterable WSGI body for one admitted run."""

    #: When the service began validating the request (time to RUN_STARTED); None: construction time.
    began_at: float | None = None
    _upstream_since: float | None = None  # the first A2A call of the stream; None once an event was read
    error_code: str | None = None  # the code of the RUN_ERROR written, for the trace

    def __init__(self, deps: StreamDeps, ticket: RunTicket, run: RunInput, language: str) -> None:
        self._deps = deps
        self._settings = deps.settings
        self._ticket = ticket
        self._run = run
        self._language = language
        self._ledger = RunLedger(deps.store, ticket)
        self._projector = RunProjector(ticket.thread_id, ticket.run_id, ticket.text_digests)
        self._pipeline = PipelineMapper(
            self._projector, ticket.thread_id, ticket.pipeline_open_steps, ticket.pipeline_sequence
        )
        self._projector.envelope_mapper = self._pipeline.live
        self._ledger.pipeline_state = lambda: (self._pipeline.sequence, self._pipeline.durable_steps)
        self._catch_up_after_permissions = False  # 6.4: a Pipeline permission resume re-reads the state
        self._session_emitted = False
        self._upstream: Upstream | None = None
        self._pump: TaskHandle | None = None
        self._finished = False  # terminal event produced or the run is parked on an interrupt
        self._generator: Iterator[bytes] | None = None
        self._started = False
        self._cleaned = False
        self._started_at = time.monotonic()
        now = self._started_at
        self._next_heartbeat = now + self._settings.heartbeat_interval_s
        self._cancel_requested = False
        # Resume bookkeeping (6.4): answers being sent, those A2A has not accepted yet, and the
        # interrupt ids the next streamed event accepts.
        self._answers: dict[str, resume_plan.PreparedAnswer] = {}
        self._unaccepted: set[str] = set()
        self._awaiting: tuple[str, ...] = ()
        self._accepted = not ticket.is_resume
        self._stop_requested = False
        self._client_gone = False
        self._wait_queue: Any = None
        self._observer = deps.observer
        self._observer.run_started()
        self._trace_parent = tracing.capture()  # the request's span: the body is iterated after it
        self._outcome: Outcome | None = None
        self.client_socket: Any = None  # set by the service: the socket whose write deadline it set

    @property
    def key(self) -> str:
        """The run key (executionId/runId) this run is registered and signalled by."""
        return self._ticket.key

    @property
    def outcome(self) -> Outcome:
        """How the run ended; a run that never reached a decision was abandoned by its client."""
        return self._outcome or Outcome.DISCONNECTED

    def _conclude(self, outcome: Outcome) -> None:
        """Settle the outcome once: the first decision wins (a cancel stays a cancel on the error path)."""
        if self._outcome is None:
            self._outcome = outcome

    # ---- helpers ----------------------------------------------------------------------------

    def _message(self, error: BridgeError) -> str:
        if error.raw_message:
            return error.raw_message
        return translate(error.message_key, self._language, **error.params)

    def _encode(self, events: list[Event]) -> bytes:
        self._observer.events(event["type"] for event in events)
        return encode_events(events)

    def _error_events(self, error: BridgeError) -> list[Event]:
        self.error_code = str(error.code)
        if error.code in _UPSTREAM_CODES:
            self._observer.upstream_error(str(error.code))
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

    def _drop_execution(self, how: str = "dropped") -> None:
        """Pending cleared, execution retired, lease released: best effort (8.5)."""
        if self._ticket.pending:
            self._observer.interrupts_closed(len(self._ticket.pending), how)
        try:
            self._ledger.drop_execution(ev.now_ms())
        except StateError:
            log.warning("Failed to persist AG-UI thread state after dropping an execution", exc_info=True)
        self._ticket.pending = {}

    def _fail_closed(self, key: str) -> _Terminal:
        """A recovery-critical write failed: cancel the task, retire, report (behaviour.md 8.5)."""
        self._cancel_task_later(self._ticket.task_id)
        self._drop_execution()
        self._finished = True
        self._conclude(Outcome.ERROR)
        return _Terminal(self._error_events(StatePersistenceFailed(key)))

    def _refusal(self, error: BridgeError) -> _Terminal:
        """End a resume that may not touch A2A: nothing is cancelled, retired or cleared."""
        self._finished = True
        self._conclude(Outcome.ERROR)
        self._release(retire=False)
        return _Terminal(self._error_events(error))

    # ---- time: heartbeats --------------------------------------------------------------------

    def _wait_s(self) -> float:
        return self._next_heartbeat - time.monotonic()

    def _shown(self) -> None:
        """Something was written to the client: the heartbeat timer restarts."""
        self._next_heartbeat = time.monotonic() + self._settings.heartbeat_interval_s

    def request_cancel(self) -> None:
        """The cancellation extension retired this run's execution (possibly from another worker)."""
        self._cancel_requested = True
        self._wake()

    def request_stop(self) -> None:
        """Ask the run to end now with RUN_ERROR (worker shutdown); safe from any greenlet/thread."""
        self._stop_requested = True
        self._wake()

    def client_departed(self) -> None:
        """The client closed its socket (`runtime.watch_client_eof`): end now, as a disconnect would at
        the next write (task cancelled, lease released), instead of at the next heartbeat."""
        if not self._finished:
            self._client_gone = True
            self._wake()

    def _wake(self) -> None:
        queue = self._wait_queue
        if queue is not None:
            try:
                self._deps.runtime.queue_put(queue, _WAKE, 0)
            except Exception:
                log.debug("stop wake-up not queued", exc_info=True)

    def _tick(self) -> Iterator[bytes]:
        """Act on stop/cancel requests and send `: heartbeat` when it is due.

        The lease needs no renewal here: the worker's beacon keeps every run it streams alive.
        """
        if self._stop_requested:
            raise _StopRequested()
        if self._client_gone:
            raise _ClientGone()
        if self._cancel_requested:
            # The cancellation extension cancels the A2A task and retires the execution itself, right
            # after telling this worker (runs/cancel.py): doing either here as well would race it.
            raise Cancelled()
        now = time.monotonic()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self._settings.heartbeat_interval_s
            self._observer.heartbeat()
            yield HEARTBEAT_FRAME

    def _blocking(self, fn: Callable[..., _T], *args: Any) -> Generator[bytes, None, _T]:
        """Run one unary upstream call off the generator, heartbeating meanwhile."""
        runtime = self._deps.runtime
        box = runtime.make_queue(1)

        def call() -> None:
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except Exception as exc:  # noqa: BLE001 - re-raised in the generator
                outcome = (False, exc)
            runtime.queue_put(box, outcome, 1.0)

        runtime.spawn(call, name=f"call:{self._ticket.run_id}")
        self._wait_queue = box
        while True:
            try:
                item = runtime.queue_get(box, self._wait_s())
            except Empty:
                item = _WAKE
            if item is _WAKE:
                yield from self._tick()
                continue
            ok, value = item
            if ok:
                return value  # type: ignore[no-any-return]
            raise value

    # ---- the generator ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        if self._generator is None:
            self._generator = tracing.traced_iterator(
                self._events(), "agui.run", self._trace_attributes(), parent=self._trace_parent,
                outcome=lambda: self.outcome, error_code=lambda: self.error_code, link=self._ticket.trace_link,
            )  # fmt: skip
        return self._generator

    def close(self) -> None:
        """Called by the WSGI server when the response ends or the client went away."""
        if self._generator is not None and self._started:
            self._generator.close()  # type: ignore[attr-defined]
        self._cleanup()

    def _trace_attributes(self) -> dict[str, str | bool]:
        ticket = self._ticket
        ids = {"agui.thread_id": ticket.thread_id, "agui.run_id": ticket.run_id}
        return {**ids, "agui.execution_id": ticket.execution_id, "agui.resume": ticket.is_resume}

    def _events(self) -> Iterator[bytes]:
        self._started = True
        ticket = self._ticket
        bind_log_context(thread_id=ticket.thread_id, run_id=ticket.run_id, execution_id=ticket.execution_id)
        began = self._started_at if self.began_at is None else self.began_at
        self._observer.time_to_run_started(time.monotonic() - began)
        try:
            yield self._encode([ev.run_started(ticket.thread_id, ticket.run_id, ticket.parent_run_id)])
            reopened = self._pipeline.reopen()  # durable steps of an interrupted execution (5.6)
            if reopened:
                yield self._encode(reopened)
            for task_id in ticket.orphaned_task_ids + ticket.expired_task_ids:
                self._cancel_task_later(task_id)
            try:
                if ticket.is_resume:
                    upstream = yield from self._timed_preflight()
                else:
                    upstream = self._new_run_upstream()
                yield from self._pump_upstream(upstream)
            except _Terminal as terminal:
                yield self._encode(terminal.events)
            except _StopRequested:
                yield self._encode(self._shutdown())
            except _ClientGone:
                return  # nobody to tell: the clean-up below handles it as a disconnect
            except BridgeError as error:
                yield self._encode(self._end_with_error(error))
            except A2AError as exc:
                yield self._encode(self._end_with_error(_to_bridge_error(exc)))
            except Exception:
                log.exception("AG-UI A2A bridge run failed", extra={"run_id": ticket.run_id})
                yield self._encode(self._end_with_error(A2AUnavailable()))
        finally:
            self._cleanup()

    def _end_with_error(self, error: BridgeError, *, task_ended: bool = False) -> list[Event]:
        """Generic error path: cancel and retire unless an interrupt is pending (4.1).

        A task that already reached a terminal state (failed, canceled, ...) is not cancelled again.
        """
        self._conclude(Outcome.CANCELLED if isinstance(error, Cancelled) else Outcome.ERROR)
        if not self._finished:
            self._finished = True
            retire = not self._ticket.pending and not self._cancel_requested
            if retire and not task_ended and not isinstance(error, Cancelled):
                self._cancel_task_later(self._ticket.task_id)
            self._release(retire=retire)
        return self._error_events(error)

    def _shutdown(self) -> list[Event]:
        """The worker is stopping: like a disconnect, but the client is told (RUN_ERROR CANCELLED).

        The A2A task is cancelled synchronously, since the process may exit right after; a run whose
        interrupt is still pending (a resume not yet accepted) keeps it.
        """
        self._conclude(Outcome.SHUTDOWN)
        if not self._finished:
            self._finished = True
            ticket = self._ticket
            retire = not ticket.pending
            if retire and ticket.task_id:
                try:
                    self._deps.client.cancel_task(ticket.task_id)
                except Exception:  # noqa: BLE001 - best effort, logged
                    log.warning("CancelTask failed during shutdown", extra={"task_id": ticket.task_id})
            self._release(retire=retire)
        return self._error_events(Cancelled("server_shutdown"))

    def _new_run_upstream(self) -> Upstream:
        parts = user_message_parts(self._run.messages)
        message_id = last_user_message_id(self._run.messages)
        metadata = a2a_messages.iac_code_metadata(self._run.props, self._ticket.cwd, self._language)
        message = a2a_messages.user_message(message_id, parts, metadata, self._ticket.context_id)
        return Upstream(self._deps.client).new_run(a2a_messages.send_params(message))

    def _pump_upstream(self, upstream: Upstream) -> Iterator[bytes]:
        """Read the upstream items through the bounded queue until the run ends."""
        settings = self._settings
        runtime = self._deps.runtime
        self._upstream = upstream
        self._upstream_since = time.monotonic()
        queue = runtime.make_queue(settings.queue_maxsize)
        self._wait_queue = queue
        self._pump = runtime.spawn(
            _pump,
            upstream,
            queue,
            runtime,
            settings.client_stall_timeout_s,
            name=f"pump:{self._ticket.run_id}",
            on_stop=upstream.abort,
        )
        held: Any = None
        while True:
            if held is not None:
                item, held = held, None
            else:
                try:
                    item = runtime.queue_get(queue, self._wait_s())
                except Empty:
                    item = None
                    check_pump_alive(self._pump, queue, runtime)
            if item is _END:
                break
            if isinstance(item, _PumpFailed):
                raise item.error
            if isinstance(item, SendOpened):
                self._awaiting = item.interrupt_ids
            elif item is not None and item is not _WAKE:
                if self._upstream_since is not None and isinstance(item, list):
                    self._first_upstream_event()
                out: list[Event] = []
                try:
                    while True:
                        if isinstance(item, UnaryAccepted):
                            self._accept(item.interrupt_ids, out)
                        else:
                            for a2a_event in item:
                                self._handle(a2a_event, out)
                                if self._finished:
                                    break
                        # Coalesce: what the pump has already queued goes out in the same write.
                        if self._finished or len(out) >= _COALESCE_MAX_EVENTS:
                            break
                        try:
                            item = runtime.queue_get(queue, 0.0)
                        except Empty:
                            break
                        if not isinstance(item, (list, UnaryAccepted)):
                            held = item  # _END, _PumpFailed, SendOpened, _WAKE: the outer loop decides
                            break
                except (_Terminal, BridgeError, A2AError):
                    if out:  # what was projected before the failure is shown before its spans close
                        yield self._encode(out)
                    raise
                if out:
                    yield self._encode(out)
                    self._shown()
                if self._finished:  # an interrupt already wrote its RUN_FINISHED
                    return
            yield from self._tick()
        yield self._encode(self._finish())

    def _first_upstream_event(self) -> None:
        assert self._upstream_since is not None
        self._observer.first_upstream_event(time.monotonic() - self._upstream_since)
        self._upstream_since = None

    # ---- resume (6.3-6.5) -----------------------------------------------------------------------

    def _timed_preflight(self) -> Generator[bytes, None, Upstream]:
        """The preflight, measured (metrics) and traced; a failed one is measured too."""
        started = time.monotonic()
        try:
            return (yield from tracing.traced_generator(self._resume_preflight(), "agui.resume_preflight"))
        finally:
            self._observer.resume_preflight(time.monotonic() - started)

    def _resume_preflight(self) -> Generator[bytes, None, Upstream]:
        """Check, restore, reconcile and validate before anything reaches A2A; then plan the sends."""
        ticket = self._ticket
        client = self._deps.client
        answers = self._run.resume or ()
        task_id = ticket.task_id
        if task_id is None or not ticket.pending:
            try:
                resume_plan.check_nothing_pending(answers, ticket.applied)
            except BridgeError as error:
                raise self._refusal(error) from None
        if resume_plan.expired(ticket.pending, ev.now_ms()):
            raise self._expire(dismissed=resume_plan.dismisses_all(answers))
        if ticket.session_id is not None:
            status, body = yield from self._blocking(client.ensure_restored, ticket.cwd, ticket.session_id, task_id)
            _check_restored(status, body)
        snapshot = yield from self._blocking(client.get_task, task_id)
        context_id = snapshot.context_id
        if snapshot.task_id != task_id or (context_id is not None and context_id != ticket.context_id):
            raise A2AProtocolError("task_mismatch")
        self._learn_identity(snapshot, task=False)
        catch_up = yield from self._blocking(client.pipeline_state, task_id, self._pipeline.sequence)
        snapshot_inputs = collect_inputs(snapshot.iac) if snapshot.iac else []
        self._check_input_identity(snapshot_inputs)
        now_ms = ev.now_ms()
        reconciled = resume_plan.reconcile(
            ticket.pending,
            snapshot_inputs,
            snapshot_lists_inputs="input" in snapshot.iac or "pendingPermissions" in snapshot.iac,
            snapshot_terminal=snapshot.state in TERMINAL_STATES,
            answers=answers,
            applied=ticket.applied,
            now_ms=now_ms,
            ttl_ms=int(self._settings.interrupt_ttl_s * 1000),
        )
        if reconciled.changed:
            try:
                self._ledger.replace_pending(reconciled.pending, now_ms)
            except StateError:
                raise self._fail_closed("interrupt_commit_failed") from None
            self._observer.interrupts_announced(len(set(reconciled.pending) - set(ticket.pending)))
            replaced = len(set(ticket.pending) - set(reconciled.pending))
            if replaced:
                self._observer.interrupts_closed(replaced, "reconciled")
            ticket.pending = dict(reconciled.pending)
        selection = resume_plan.select(reconciled, answers, ticket.applied)
        if selection.new_interrupt:
            events = self._preflight_events(snapshot, catch_up)
            events.extend(self._interrupt([]))
            raise _Terminal(events)
        prepared = resume_plan.prepare(selection.answers)
        preflight_events = self._preflight_events(snapshot, catch_up)
        if preflight_events:
            yield self._encode(preflight_events)
            self._shown()
        if any(answer.cancelled and not answer.permission for answer in prepared):
            yield from self._blocking(client.cancel_task, task_id)
            self._drop_execution("cancelled")
            self._finished = True
            self._conclude(Outcome.CANCELLED)
            raise _Terminal(self._error_events(Cancelled("cancelled_by_answer")))
        metadata = a2a_messages.iac_code_metadata(self._run.props, ticket.cwd, self._language)
        plan = resume_plan.plan_sends(
            prepared, run_id=ticket.run_id, task_id=task_id, context_id=ticket.context_id, metadata=metadata
        )
        self._answers = {answer.interrupt_id: answer for answer in prepared}
        self._unaccepted = set(self._answers)
        self._catch_up_after_permissions = self._pipeline.sequence > 0 and any(a.permission for a in prepared)
        return Upstream(client).resume(plan, task_id)

    def _preflight_events(self, snapshot: A2AEvent, catch_up: object) -> list[Event]:
        """Shown only once the resume is valid: the snapshot (no text, no envelopes), then recovery."""
        events = self._projector.project(snapshot, text=False, pipeline=False)
        events.extend(self._pipeline.recover(catch_up))
        return events

    def _permission_catch_up(self) -> list[Event]:
        """6.4: after a Pipeline permission resume, the events A2A recorded while it waited."""
        if not self._catch_up_after_permissions or self._ticket.task_id is None:
            return []
        self._catch_up_after_permissions = False
        try:
            response = self._deps.client.pipeline_state(self._ticket.task_id, self._pipeline.sequence)
        except A2AError:
            log.warning("Pipeline catch-up after a permission resume failed", exc_info=True)
            return []
        return self._pipeline.recover(response)

    def _expire(self, *, dismissed: bool) -> _Terminal:
        """D1: an expired interrupt is never applied; the execution is dropped and its task cancelled.

        A resume that only cancels is what @ag-ui/client 1.0 must send for an expired interrupt
        ("Cancel it to continue the thread"); it gets the same clean-up but ends RUN_FINISHED
        `cancelled`, the one terminal event after which that client stops waiting for an answer.
        """
        ticket = self._ticket
        self._cancel_task_later(ticket.task_id)
        self._drop_execution("expired")
        self._finished = True
        if not dismissed:
            self._conclude(Outcome.EXPIRED)
            return _Terminal(self._error_events(ExecutionExpired()))
        self._conclude(Outcome.CANCELLED)
        events = self._projector.close_all()
        events.append(
            ev.run_finished(ticket.thread_id, ticket.run_id, {"type": "cancelled"}, self._projector.usage_entries())
        )
        return _Terminal(events)

    def _accept(self, interrupt_ids: tuple[str, ...], out: list[Event]) -> None:
        """A2A accepted these answers: persist that before showing anything that follows (6.7)."""
        ticket = self._ticket
        digests = {i: self._answers[i].digest for i in interrupt_ids if i in self._answers}
        try:
            self._ledger.accept_answers(digests, ev.now_ms())
        except StateError:
            raise self._fail_closed("answer_commit_failed") from None
        closed = [input_id for input_id in digests if input_id in ticket.pending]
        for input_id, digest in digests.items():
            ticket.pending.pop(input_id, None)
            ticket.applied[input_id] = digest
        if closed:
            self._observer.interrupts_closed(len(closed), "answered")
        self._unaccepted.difference_update(digests)
        if self._unaccepted or self._accepted:
            return
        self._accepted = True
        if not self._session_emitted:
            out.append(self._session_event())
        for answer in self._answers.values():
            if not answer.permission and answer.tool_use_id and answer.text:
                self._projector.tool_result(out, answer.tool_use_id, answer.text)

    # ---- per event ----------------------------------------------------------------------------

    def _learn_identity(self, event: A2AEvent, *, task: bool = True) -> None:
        """Check the task and iac-code session ids of an event; persist new ones in one write (4.3)."""
        ticket = self._ticket
        new_task = None
        if task and event.task_id is not None and event.task_id != ticket.task_id:
            if ticket.task_id is not None:
                raise A2AProtocolError("task_changed")
            new_task = event.task_id
        session_id = a2a_messages.session_id_of(event.iac) if event.iac else None
        new_session = None
        if session_id is not None and session_id != ticket.session_id:
            if ticket.session_id is not None:
                raise A2AProtocolError("session_changed")
            new_session = session_id
        if new_task is None and new_session is None:
            return
        try:
            self._ledger.record_identity(new_task, new_session)
        except StateError:
            if new_task is not None:
                ticket.task_id = new_task  # so the fail-closed path cancels it
            raise self._fail_closed("task_mapping_failed" if new_task else "session_mapping_failed") from None

    def _check_input_identity(self, inputs: list[InputRequest]) -> None:
        ticket = self._ticket
        for request in inputs:
            for key, expected, error_key in (
                ("requestTaskId", ticket.task_id, "interrupt_other_task"),
                ("contextId", ticket.context_id, "interrupt_other_context"),
            ):
                value = request.value.get(key)
                if isinstance(value, str) and value and expected is not None and value != expected:
                    raise A2AProtocolError(error_key)

    def _handle(self, event: A2AEvent, out: list[Event]) -> None:
        """Identity, commits, acceptance, session event, projection, interrupts."""
        ticket = self._ticket
        if event.context_id is not None and event.context_id != ticket.context_id:
            raise A2AProtocolError("context_changed")
        self._learn_identity(event)
        if self._awaiting:
            interrupt_ids, self._awaiting = self._awaiting, ()
            self._accept(interrupt_ids, out)
        if (
            self._accepted
            and not self._session_emitted
            and ticket.task_id is not None
            and ticket.session_id is not None
        ):
            out.append(self._session_event())
        out.extend(self._projector.project(event))
        inputs = [
            request
            for request in (collect_inputs(event.iac) if event.iac else [])
            if request.input_id not in ticket.applied and request.input_id not in self._answers
        ]
        if inputs:
            out.extend(self._interrupt(inputs))

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

    def _interrupt(self, inputs: list[InputRequest]) -> list[Event]:
        """Commit the interrupt durably, then close spans and announce it (6.2, fail closed)."""
        ticket = self._ticket
        now_ms = ev.now_ms()
        expires_ms = now_ms + int(self._settings.interrupt_ttl_s * 1000)
        expires_at = model.format_rfc3339_ms(expires_ms)
        self._check_input_identity(inputs)
        catch_up = self._permission_catch_up()
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
        self._observer.interrupts_announced(len(set(pending) - set(ticket.pending)))
        ticket.pending = pending
        self._finished = True
        self._conclude(Outcome.INTERRUPT)
        events = catch_up + self._projector.close_all()
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
        out = self._permission_catch_up()
        state = self._projector.last_state
        if state in ("completed", "input-required"):
            if not self._session_emitted:
                out.append(self._session_event())
            self._conclude(Outcome.SUCCESS)
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
            return out + self._end_with_error(Cancelled())
        return out + self._end_with_error(A2AExecutionFailed(), task_ended=state in TERMINAL_STATES)

    # ---- cleanup ------------------------------------------------------------------------------

    def _cleanup(self) -> None:
        """Stop the reader first, then close the socket it reads (stack-notes 2.6). Idempotent."""
        if self._cleaned:
            return
        self._cleaned = True
        stop_reading(self._pump, self._upstream)
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
                "outcome": str(self.outcome),
                "duration_ms": int((time.monotonic() - self._started_at) * 1000),
            },
        )
        self._observer.run_ended(str(self.outcome), time.monotonic() - self._started_at)
        if self._deps.on_run_end is not None:
            self._deps.on_run_end(self, str(self.outcome))


class PumpDied(A2AUnavailable):
    """The pump ended without handing over its end or its failure (killed, or its last item was
    dropped because the queue stayed full): the stream ends with RUN_ERROR instead of waiting forever."""


def check_pump_alive(pump: TaskHandle | None, queue: Any, runtime: Runtime) -> None:
    """Called when a wait on the queue timed out: raise PumpDied if nobody will ever fill it again.

    A pump's last put happens before it dies, so an empty queue after a dead pump (checked once more
    after seeing it dead) means its end or failure marker was lost.
    """
    if pump is None or pump.alive():
        return
    try:
        item = runtime.queue_get(queue, 0.0)
    except Empty:
        log.warning("the upstream pump died without reporting; ending the run")
        raise PumpDied() from None
    runtime.queue_put(queue, item, 0)  # not lost after all: hand it back (the queue was empty)


def stop_reading(pump: TaskHandle | None, upstream: Upstream | None) -> None:
    """Stop the reader first, then close the socket it reads (stack-notes 2.6)."""
    if pump is not None:
        try:
            pump.stop(2.0)
        except Exception:
            log.debug("stopping the pump failed", exc_info=True)
    if upstream is not None:
        upstream.close()


def _check_restored(status: int, body: object) -> None:
    """Session restore answers (behaviour.md 4.4); every failure keeps the interrupts pending."""
    if status == 200 and isinstance(body, dict) and body.get("status") in ("current", "restored"):
        return
    if status == 404:
        raise ExecutionLost("session_unavailable")
    error = body.get("error") if isinstance(body, dict) else None
    if status == 409 and isinstance(error, dict) and error.get("code") == "SESSION_BACKUP_NOT_READY":
        message = error.get("message")
        raise SessionBackupNotReady(raw_message=message if isinstance(message, str) and message else None)
    raise A2AUnavailable()


def last_user_message_id(messages: tuple[dict[str, Any], ...]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("id"), str):
            return str(message["id"])
    return "agui-user-message"


__all__ = ["ErrorCode", "RunStream", "StreamDeps"]
