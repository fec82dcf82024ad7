"""`RunStream`, the WSGI body of one admitted run: the parts of a run, put together in order.

The life cycle is docs/design.md#run-life-cycle; each concept lives in its own module:

* `runs/pump.py`: the pump that reads the kernel into a bounded queue, the heartbeat clock, batching;
* `runs/preflight.py`: the resume preflight, which ends in the `Upstream` that sends the answers;
* `runs/turn.py`: what each A2A event does (identity, commits, acceptance, projection, interrupts);
* `runs/ending.py`: the one way a run ends (outcome, task, lease, terminal event);
* `runs/failures.py`: what a failed kernel call means to the client;
* `runs/emit.py`: the one way out: every event shown passes through `Emitter`, numbered;
* `runs/detach.py`: the run's record, and detach instead of cancel when its client leaves;
* `runs/context.py`: `build_run`, which builds all of the above once, each with what it needs.

This module only sequences them: RUN_STARTED, reopened Pipeline steps, the preflight or the new
run's send, the read loop, the terminal event, and the clean-up when the server closes the body,
which gives the run's place in the worker's registry back (docs/design.md#run-built-once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from functools import partial
from itertools import chain
from typing import Any

from agui_bridge.a2a.errors import A2AError
from agui_bridge.a2a.signals import TERMINAL_STATES
from agui_bridge.errors import A2AUnavailable, BridgeError, Cancelled, ErrorCode
from agui_bridge.observability import tracing
from agui_bridge.observability.logs import bind_log_context
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.reattach.record import RunRecord
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.connection import ClientConnection
from agui_bridge.runs.context import build_run
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.ending import RunEnded
from agui_bridge.runs.failures import bridge_error
from agui_bridge.runs.observer import Outcome
from agui_bridge.runs.preflight import ResumePreflight
from agui_bridge.runs.pump import ClientGone, Pump, Signal, StopRequested
from agui_bridge.runs.upstream import Item, SendOpened, UnaryAccepted, Upstream, user_message_params
from agui_bridge.validation.run_input import RunInput

log = logging.getLogger(__name__)

#: Upper bound of AG-UI events written in one socket write when the pump is ahead of the client.
_COALESCE_MAX_EVENTS = 256


class RunStream:
    """Iterable WSGI body for one admitted run.

    `client_socket` is the socket the response goes out on (None in tests): the stream holds it with a write
    deadline and watches it for the client leaving. `began_at` is when the service began validating the
    request (time to RUN_STARTED counts validation and admission); None: construction time.
    """

    def __init__(
        self, deps: StreamDeps, ticket: RunTicket, run: RunInput, language: str,
        *, client_socket: Any = None, began_at: float | None = None,
    ) -> None:  # fmt: skip
        self._context = context = build_run(deps, ticket, run, language)
        self._settings = context.settings
        self._ticket = ticket
        self._run = run
        self._language = language
        self._observer = observer = context.observer
        self._end = context.end
        self._turn = context.turn
        self._pacer = context.pacer
        self._detacher = context.detacher
        self._pump: Pump | None = None
        self._generator: Iterator[bytes] | None = None
        self._started = False
        self._cleaned = False
        self._started_at = time.monotonic()
        self._began_at = self._started_at if began_at is None else began_at
        self._upstream_since: float | None = None  # the first A2A call of the stream; None once an event was read
        observer.run_started()
        self._trace_parent = tracing.capture()  # the request's span: the body is iterated after it
        # The client's EOF acts at once: the run detaches or ends (docs/operations.md#capacity).
        timeout_s, departed = context.settings.client_write_timeout_s, context.detacher.client_departed
        self._connection = ClientConnection(client_socket, write_timeout_s=timeout_s, on_eof=departed)

    @property
    def emitter(self) -> Emitter:
        """Every event this run shows passes through it (its sink is the run's record)."""
        return self._context.emitter

    @property
    def key(self) -> str:
        """The run key (executionId/runId) this run is registered and signalled by."""
        return self._ticket.key

    @property
    def execution_id(self) -> str | None:
        """The run's execution (the `Agui-Execution-Id` response header, docs/http-api.md#execution-id-header)."""
        return self._ticket.execution_id

    @property
    def record(self) -> RunRecord | None:
        """The run's record for reattach (None when recording is off)."""
        return self._detacher.record

    @property
    def detached(self) -> bool:
        """The client left and the run goes on in the background (docs/design.md#reattach)."""
        return self._detacher.detached

    @property
    def outcome(self) -> Outcome:
        """How the run ended; a run that never reached a decision was abandoned by its client."""
        return self._end.outcome

    @property
    def error_code(self) -> str | None:
        """The code of the RUN_ERROR written, for the trace."""
        return self._end.error_code

    def request_cancel(self) -> None:
        """The cancellation extension retired this run's execution (possibly from another worker)."""
        self._end.cancelled_elsewhere = True
        self._context.mailbox.request_cancel()

    def request_stop(self) -> None:
        """Ask the run to end now with RUN_ERROR (worker shutdown); safe from any greenlet/thread."""
        self._context.mailbox.request_stop()

    # ---- the WSGI body ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        if self._generator is None:
            self._generator = tracing.traced_iterator(
                self._events(), "agui.run", self._trace_attributes(), parent=self._trace_parent,
                outcome=lambda: self.outcome, error_code=lambda: self.error_code, link=self._ticket.trace_link,
            )  # fmt: skip
        return self._detacher.body(self._generator)

    def close(self) -> None:
        """Called by the WSGI server when the response ends or the client went away."""
        if self._generator is not None and self._detacher.can_detach():
            self._connection.release()  # the server closes the socket now; the run goes on without it
            self._detacher.detach(self._generator, self._cleanup)
            return
        if self._generator is not None and self._started:
            self._generator.close()  # type: ignore[attr-defined]
        self._cleanup()

    def _trace_attributes(self) -> dict[str, str | bool]:
        ticket = self._ticket
        ids = {"agui.thread_id": ticket.thread_id, "agui.run_id": ticket.run_id}
        return {**ids, "agui.execution_id": ticket.execution_id, "agui.resume": ticket.is_resume}

    def _cancel_before_new_message(self, task_id: str, *, waiting: bool) -> Iterator[bytes]:
        """Cancel an abandoned task of this context and wait for the answer before the next message.

        The kernel drops the context's runtime while it handles the cancel of a running or waiting task;
        a turn sent to the same context meanwhile fails ("A2A context runtime missing"). An orphan whose
        turn already ended has nothing to cancel (the kernel refuses: -32002). A failed cancel is logged,
        not fatal (docs/design.md#cancellation).
        """
        client = self._context.client
        try:
            if not waiting:
                snapshot = yield from self._pacer.call(client.get_task, task_id, name=f"get:{self.key}")
                ended = snapshot.state == "input-required" and "input" not in snapshot.iac
                if ended or snapshot.state in TERMINAL_STATES:
                    return
            yield from self._pacer.call(client.cancel_task, task_id, name=f"cancel:{self.key}")
        except A2AError:
            log.warning("CancelTask failed for an abandoned run", extra={"task_id": task_id})

    def _events(self) -> Iterator[bytes]:
        self._started = True
        ticket = self._ticket
        emit = self.emitter.events
        bind_log_context(thread_id=ticket.thread_id, run_id=ticket.run_id, execution_id=ticket.execution_id)
        self._observer.time_to_run_started(time.monotonic() - self._began_at)
        try:
            yield emit([ev.run_started(ticket.thread_id, ticket.run_id, ticket.parent_run_id)])
            reopened = self._turn.pipeline.reopen()  # durable steps of an interrupted execution
            if reopened:
                yield emit(reopened)
            for task_id in ticket.orphaned_task_ids:
                yield from self._cancel_before_new_message(task_id, waiting=False)
            for task_id in ticket.expired_task_ids:
                yield from self._cancel_before_new_message(task_id, waiting=True)
            try:
                if ticket.is_resume:
                    upstream = yield from self._preflight().run()
                else:
                    upstream = self._new_run_upstream()
                yield from self._read(upstream)
            except RunEnded as ended:
                yield emit(ended.events)
            except StopRequested:
                yield emit(self._end.window_expired() if self._detacher.window_expired else self._end.shutdown())
            except ClientGone:
                return  # nobody to tell and no reattach window: the clean-up handles it as a disconnect
            except BridgeError as error:
                yield emit(self._end.fail(error))
            except A2AError as exc:
                yield emit(self._end.fail(bridge_error(exc)))
            except Exception:
                log.exception("AG-UI A2A bridge run failed", extra={"run_id": ticket.run_id})
                yield emit(self._end.fail(A2AUnavailable()))
        finally:
            self._cleanup()

    def _preflight(self) -> ResumePreflight:
        return ResumePreflight(self._context)

    def _new_run_upstream(self) -> Upstream:
        ticket = self._ticket
        params = user_message_params(self._run, cwd=ticket.cwd, context_id=ticket.context_id, language=self._language)
        return Upstream(self._context.client).new_run(params)

    # ---- the read loop ----------------------------------------------------------------------

    def _read(self, upstream: Upstream) -> Iterator[bytes]:
        """Read the upstream items through the pump until the run ends (docs/design.md#stream-pump-heartbeat)."""
        settings = self._settings
        pacer = self._pacer
        emit = self.emitter.events
        self._upstream_since = time.monotonic()
        runtime = self._context.runtime
        pump = Pump(runtime, upstream, maxsize=settings.queue_maxsize, put_timeout_s=settings.client_stall_timeout_s)
        self._pump = pump
        pacer.watch(pump.queue)
        pump.start(name=f"pump:{self._ticket.run_id}")
        while True:
            item = pump.get(pacer.wait_s())
            if item is Signal.END:
                break
            if isinstance(item, SendOpened):
                self._turn.send_opened(item.interrupt_ids)
            elif item is not Signal.WAKE:
                if self._upstream_since is not None and isinstance(item, list):
                    self._first_upstream_event()
                out: list[Event] = []
                try:
                    self._batch(item, pump, out)
                except (RunEnded, BridgeError, A2AError):
                    if out:  # what was projected before the failure is shown before its spans close
                        yield emit(out)
                    raise
                if out:
                    yield emit(out)
                    pacer.shown()
                # Shown: neither the batch nor its events stay referenced while the stream waits for the next
                # one (docs/design.md#stream-memory).
                del item, out
                if self._end.finished:  # an interrupt already wrote its RUN_FINISHED
                    return
            yield from pacer.tick()
        yield emit(self._turn.finish())

    def _batch(self, first: Item, pump: Pump, out: list[Event]) -> None:
        """Handle `first` and what the pump already queued behind it, up to one write's worth."""
        for item in chain([first], pump.ready()):
            if isinstance(item, UnaryAccepted):
                self._turn.accept(item.interrupt_ids, out)
            elif isinstance(item, list):
                for a2a_event in item:
                    self._turn.handle(a2a_event, out)
                    if self._end.finished:
                        break
            if self._end.finished or len(out) >= _COALESCE_MAX_EVENTS:
                break

    def _first_upstream_event(self) -> None:
        assert self._upstream_since is not None
        self._observer.first_upstream_event(time.monotonic() - self._upstream_since)
        self._upstream_since = None

    # ---- clean-up -----------------------------------------------------------------------------

    def _cleanup(self) -> None:
        """Stop the reader, end an abandoned run, log and report once, and give the run's place in the worker
        back (docs/design.md#close-and-disconnect)."""
        if self._cleaned:
            return
        self._cleaned = True
        if self._pump is not None:
            self._pump.stop()
        end = self._end
        abandoned = not end.finished and self._started
        end.abandon()  # a no-op for a run that already ended
        self._detacher.close_record(
            partial(end.unshown_error_events, Cancelled("client_disconnected")) if abandoned else None
        )
        outcome = self.outcome
        duration_s = time.monotonic() - self._started_at
        ticket = self._ticket
        log.info(
            "run ended",
            extra={
                "thread_id": ticket.thread_id,
                "run_id": ticket.run_id,
                "execution_id": ticket.execution_id,
                "outcome": str(outcome),
                "duration_ms": int(duration_s * 1000),
            },
        )
        self._observer.run_ended(outcome, duration_s)
        context = self._context
        self._connection.release()
        context.registry.close(self, ticket.key)  # its lease is released: the beacon stops listing it
        if context.cancel_markers is not None:
            context.cancel_markers.discard_cancel(ticket.key)  # no cancel marker outlives its run


__all__ = ["ErrorCode", "RunStream", "StreamDeps"]
