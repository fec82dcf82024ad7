"""`RunStream`, the WSGI body of one admitted run: the parts of a run, put together in order.

The life cycle is docs/design.md#run-life-cycle; each concept lives in its own module:

* `runs/pump.py`: the pump that reads the kernel into a bounded queue, the heartbeat clock, batching;
* `runs/preflight.py`: the resume preflight, which ends in the `Upstream` that sends the answers;
* `runs/turn.py`: what each A2A event does (identity, commits, acceptance, projection, interrupts);
* `runs/ending.py`: the one way a run ends (outcome, task, lease, terminal event);
* `runs/failures.py`: what a failed kernel call means to the client;
* `runs/emit.py`: the one way out: every event shown passes through `Emitter`, numbered.

This module only sequences them: RUN_STARTED, reopened Pipeline steps, the preflight or the new
run's send, the read loop, the terminal event, and the clean-up when the server closes the body.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from itertools import chain
from typing import Any

from agui_bridge import metrics, tracing
from agui_bridge.a2a.errors import A2AError
from agui_bridge.a2a.signals import TERMINAL_STATES
from agui_bridge.errors import A2AUnavailable, BridgeError, Cancelled, ErrorCode
from agui_bridge.logs import bind_log_context
from agui_bridge.projection.pipeline import PipelineMapper
from agui_bridge.projection.projector import RunProjector
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.ending import RunEnd, RunEnded
from agui_bridge.runs.failures import bridge_error
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.observer import Outcome
from agui_bridge.runs.preflight import ResumePreflight
from agui_bridge.runs.pump import ClientGone, Pacer, Pump, Signal, StopRequested
from agui_bridge.runs.turn import RunTurn
from agui_bridge.runs.upstream import Item, SendOpened, UnaryAccepted, Upstream, user_message_params
from agui_bridge.state.replay import RecordHead, RunRecord, ros_digest
from agui_bridge.validation.run_input import RunInput
from agui_bridge.wire import events as ev
from agui_bridge.wire.events import Event

log = logging.getLogger(__name__)

#: Upper bound of AG-UI events written in one socket write when the pump is ahead of the client.
_COALESCE_MAX_EVENTS = 256
#: How often a detached run looks for readers (docs/design.md#reattach).
_DETACHED_CHECK_S = 0.25


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
        self.record = self._new_record()
        self.emitter.sink = self.record
        self._window_expired = False  # a detached run's window ran out: it ends RUN_ERROR CANCELLED
        self.detached = False
        self._departed = False  # the client's socket reached EOF (client_departed)
        self._pacer = Pacer(deps.runtime, settings.heartbeat_interval_s, self.emitter.heartbeat)
        self._pacer.detaches_on_departure = self._detaches_on_departure
        self._pump: Pump | None = None
        self._generator: Iterator[bytes] | None = None
        self._started = False
        self._cleaned = False
        self._started_at = time.monotonic()
        self._upstream_since: float | None = None  # the first A2A call of the stream; None once an event was read
        observer.run_started()
        self._trace_parent = tracing.capture()  # the request's span: the body is iterated after it
        self.client_socket: Any = None  # set by the service: the socket whose write deadline it set

    @property
    def key(self) -> str:
        """The run key (executionId/runId) this run is registered and signalled by."""
        return self._ticket.key

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
        (`_body` hands it to `close()`); without one it ends and its task is cancelled."""
        if self._departed or self.detached or self._end.finished:
            return  # already acted on: a detached run goes on without its client
        self._departed = True
        self._pacer.request_depart()

    def _detaches_on_departure(self) -> bool:
        """The pacer's question when the client left: yield to `_body` (detach) or end the run."""
        return self._can_detach()

    # ---- the WSGI body ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        if self._generator is None:
            self._generator = tracing.traced_iterator(
                self._events(), "agui.run", self._trace_attributes(), parent=self._trace_parent,
                outcome=lambda: self.outcome, error_code=lambda: self.error_code, link=self._ticket.trace_link,
            )  # fmt: skip
        return self._body(self._generator)

    def _body(self, frames: Iterator[bytes]) -> Iterator[bytes]:
        """What the server writes. When the client's socket closed and the run may detach, stop here without
        closing `frames`: the server then calls `close()`, which hands `frames` to the detached driver."""
        for frame in frames:
            if self._departed and self._can_detach():
                return
            yield frame

    def close(self) -> None:
        """Called by the WSGI server when the response ends or the client went away."""
        if self._can_detach():
            self._detach()
            return
        if self._generator is not None and self._started:
            self._generator.close()  # type: ignore[attr-defined]
        self._cleanup()

    # ---- detach instead of cancel (docs/design.md#reattach) ------------------------------------

    def _new_record(self) -> RunRecord | None:
        settings = self._settings
        if settings.reattach_max_bytes <= 0:
            return None
        ticket = self._ticket
        head = RecordHead(
            ticket.thread_id, ticket.run_id, ros_digest(ticket.ros_invocation_id), ticket.owner, ev.now_ms()
        )
        return RunRecord(settings.state_dir, head, max_bytes=settings.reattach_max_bytes)

    def _can_detach(self) -> bool:
        """The client went away mid-run and a reader may come back: keep the run going instead."""
        record = self.record
        return (
            self._settings.reattach_window_s > 0
            and self._generator is not None
            and self._started
            and not self._cleaned
            and not self._end.finished
            and not self.detached
            and not self._pacer.stop_requested
            and record is not None
            and not record.stopped
        )

    def _detach(self) -> None:
        """Hand the generator to a background task that drives it (recording every frame) until the run
        ends, or until the window passes with no reader on any worker, which cancels it."""
        self.detached = True
        self._pacer.client_gone = False  # a departure noticed before a failed write is handled by this detach
        bound, self.client_socket = self.client_socket, None
        if bound is not None:  # the connection is gone: give the socket back its own timeout now
            sock, previous = bound
            try:
                sock.settimeout(previous)
            except OSError:
                log.debug("client socket timeout not restored", exc_info=True)
        metrics.RUNS_DETACHED.inc()
        log.info("client left a live run: detached", extra={"run_id": self._ticket.run_id})
        runtime = self._deps.runtime
        runtime.spawn(self._watch_readers, name=f"detached-watch:{self._ticket.run_id}")
        runtime.spawn(self._drive_detached, name=f"detached:{self._ticket.run_id}")

    def _drive_detached(self) -> None:
        generator = self._generator
        assert generator is not None
        try:
            for _ in generator:
                pass  # every frame was recorded by the emitter's sink; nobody is connected to show it
        except Exception:
            log.exception("detached run failed", extra={"run_id": self._ticket.run_id})
        finally:
            self._cleanup()

    def _watch_readers(self) -> None:
        """Cancel the run once no reader was seen for the whole window."""
        record = self.record
        assert record is not None
        window_s = self._settings.reattach_window_s
        last_seen = time.monotonic()
        runtime = self._deps.runtime
        while not self._cleaned and not self._end.finished:
            runtime.sleep(_DETACHED_CHECK_S)
            now = time.monotonic()
            if record.readers_present():
                last_seen = now
            elif now - last_seen >= window_s:
                self._window_expired = True
                metrics.RUNS_WINDOW_EXPIRED.inc()
                log.info("no reader within the reattach window: cancelling", extra={"run_id": self._ticket.run_id})
                self._pacer.request_stop()
                return

    def _record_abandon(self) -> None:
        """The client left and the run was cancelled without a terminal event (window 0, or it could
        not detach): the record still ends, so a reattach gets RUN_ERROR CANCELLED instead of waiting."""
        assert self.record is not None
        shown_code = self._end.error_code  # the trace reports what the client was shown, not this
        try:
            self.emitter.record_only(self._end.error_events(Cancelled("client_disconnected")))
        except Exception:  # the run is over either way; only the record misses its end
            log.warning("the end of an abandoned run was not recorded", exc_info=True)
        finally:
            self._end.error_code = shown_code

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
                yield emit(self._end.window_expired() if self._window_expired else self._end.shutdown())
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
        if self.record is not None:
            if abandoned and self._started:
                self._record_abandon()
            self.record.close()
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
