"""`RunStream`, the WSGI body of one admitted run: the parts of a run, put together in order.

The life cycle is docs/design.md#run-life-cycle; each concept lives in its own module:

* `runs/pump.py`: the pump that reads the kernel into a bounded queue, the heartbeat clock, batching;
* `runs/preflight.py`: the resume preflight, which ends in the `Upstream` that sends the answers;
* `runs/turn.py`: what each A2A event does (identity, commits, acceptance, projection, interrupts);
* `runs/ending.py`: the one way a run ends (outcome, task, lease, terminal event);
* `runs/failures.py`: what a failed kernel call means to the client;
* `runs/emit.py`: the one way out: every event shown passes through `Emitter`, numbered;
* `runs/detach.py`: the run's record, and detach instead of cancel when its client leaves.

This module only sequences them: RUN_STARTED, reopened Pipeline steps, the preflight or the new
run's send, the read loop, the terminal event, and the clean-up when the server closes the body.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from itertools import chain
from typing import Any

from agui_bridge.a2a.errors import A2AError
from agui_bridge.a2a.signals import TERMINAL_STATES
from agui_bridge.errors import A2AUnavailable, BridgeError, ErrorCode
from agui_bridge.observability import tracing
from agui_bridge.observability.logs import bind_log_context
from agui_bridge.projection.pipeline import PipelineMapper
from agui_bridge.projection.projector import RunProjector
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.reattach.record import RunRecord
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.detach import Detacher
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.ending import RunEnd, RunEnded
from agui_bridge.runs.failures import bridge_error
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.observer import Outcome
from agui_bridge.runs.preflight import ResumePreflight
from agui_bridge.runs.pump import ClientGone, Pacer, Pump, Signal, StopRequested
from agui_bridge.runs.turn import RunTurn
from agui_bridge.runs.upstream import Item, SendOpened, UnaryAccepted, Upstream, user_message_params
from agui_bridge.validation.run_input import RunInput
from agui_bridge.worker.runtime import TaskHandle

log = logging.getLogger(__name__)

#: Upper bound of AG-UI events written in one socket write when the pump is ahead of the client.
_COALESCE_MAX_EVENTS = 256


class RunStream:
    """Iterable WSGI body for one admitted run."""

    #: When the service began validating the request (time to RUN_STARTED); None: construction time.
    began_at: float | None = None

    def __init__(self, deps: StreamDeps, ticket: RunTicket, run: RunInput, language: str) -> None:
        self._deps = deps
        self._settings = settings = deps.settings
        self._ticket = ticket
        self._run = run
        self._language = language
        self._observer = observer = deps.observer
        self._ledger = ledger = RunLedger(deps.store, ticket)
        projector = RunProjector(ticket.thread_id, ticket.run_id, ticket.text_digests)
        pipeline = PipelineMapper(projector, ticket.thread_id, ticket.pipeline_open_steps, ticket.pipeline_sequence)
        projector.envelope_mapper = pipeline.live
        ledger.pipeline_state = lambda: (pipeline.sequence, pipeline.durable_steps)
        self._end = RunEnd(
            ticket, ledger, projector, client=deps.client, runtime=deps.runtime, observer=observer, language=language
        )
        self._turn = RunTurn(
            ticket, ledger, self._end, projector, pipeline,
            client=deps.client, observer=observer, interrupt_ttl_s=settings.interrupt_ttl_s,
        )  # fmt: skip
        self.emitter = Emitter(observer)  # every event this run shows passes through it (a recorder's seam)
        self._pacer = Pacer(deps.runtime, settings.heartbeat_interval_s, self.emitter.heartbeat)
        self._detacher = Detacher(
            settings,
            ticket,
            self._end,
            self._pacer,
            self.emitter,
            runtime=deps.runtime,
            live=self._live,
            observer=observer,
        )  # the record is the emitter's sink from here on
        self._pump: Pump | None = None
        self._generator: Iterator[bytes] | None = None
        self._started = False
        self._cleaned = False
        self._started_at = time.monotonic()
        self._upstream_since: float | None = None  # the first A2A call of the stream; None once an event was read
        observer.run_started()
        self._trace_parent = tracing.capture()  # the request's span: the body is iterated after it
        self.client_socket: Any = None  # set by the service: the socket whose write deadline it set
        #: The client-EOF watcher the service armed (gevent only); stopped before the socket is given up.
        self.client_watch: TaskHandle | None = None

    @property
    def key(self) -> str:
        """The run key (executionId/runId) this run is registered and signalled by."""
        return self._ticket.key

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
        self._pacer.request_cancel()

    def request_stop(self) -> None:
        """Ask the run to end now with RUN_ERROR (worker shutdown); safe from any greenlet/thread."""
        self._pacer.request_stop()

    def client_departed(self) -> None:
        """The client closed its socket (`runtime.watch_client_eof`): act now, as a disconnect would at
        the next write, instead of at the next heartbeat. With a reattach window the run detaches
        (the body hands it to `close()`); without one it ends and its task is cancelled."""
        self._detacher.client_departed()

    def _live(self) -> bool:
        """The generator started and was not cleaned up: only such a run can detach."""
        return self._generator is not None and self._started and not self._cleaned

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
        if self._detacher.can_detach():
            assert self._generator is not None
            self.stop_client_watch()  # the server closes the socket now; the run goes on without it
            bound, self.client_socket = self.client_socket, None
            self._detacher.detach(self._generator, bound, self._cleanup)
            return
        if self._generator is not None and self._started:
            self._generator.close()  # type: ignore[attr-defined]
        self._cleanup()

    def stop_client_watch(self) -> None:
        """Disarm the EOF watcher before its socket is closed (a watcher must not outlive its fd)."""
        watch, self.client_watch = self.client_watch, None
        if watch is not None:
            watch.stop(0)

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
        client = self._deps.client
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
        began = self._started_at if self.began_at is None else self.began_at
        self._observer.time_to_run_started(time.monotonic() - began)
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
        return ResumePreflight(
            self._ticket, self._run, self._turn, self._end, self._ledger,
            client=self._deps.client, pacer=self._pacer, emitter=self.emitter, observer=self._observer,
            interrupt_ttl_s=self._settings.interrupt_ttl_s, language=self._language,
        )  # fmt: skip

    def _new_run_upstream(self) -> Upstream:
        ticket = self._ticket
        params = user_message_params(self._run, cwd=ticket.cwd, context_id=ticket.context_id, language=self._language)
        return Upstream(self._deps.client).new_run(params)

    # ---- the read loop ----------------------------------------------------------------------

    def _read(self, upstream: Upstream) -> Iterator[bytes]:
        """Read the upstream items through the pump until the run ends (docs/design.md#stream-pump-heartbeat)."""
        settings = self._settings
        pacer = self._pacer
        emit = self.emitter.events
        self._upstream_since = time.monotonic()
        pump = Pump(
            self._deps.runtime, upstream, maxsize=settings.queue_maxsize, put_timeout_s=settings.client_stall_timeout_s
        )
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
        """Stop the reader, end an abandoned run, log and report once (docs/design.md#close-and-disconnect)."""
        if self._cleaned:
            return
        self._cleaned = True
        if self._pump is not None:
            self._pump.stop()
        abandoned = not self._end.finished
        self._end.abandon()  # a no-op for a run that already ended
        self._detacher.close_record(abandoned=abandoned and self._started)
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
        if self._deps.on_run_end is not None:
            self._deps.on_run_end(self, outcome)


__all__ = ["ErrorCode", "RunStream", "StreamDeps"]
