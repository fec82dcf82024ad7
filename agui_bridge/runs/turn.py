"""What each A2A event does to a run: identity, commits, acceptance, projection, interrupts.

`RunTurn` holds the run's view of the kernel's turn (docs/design.md#per-event-handling). Every fact a
recovery depends on (taskId, session id, an interrupt, an accepted answer) is committed before anything
that follows it is shown (docs/design.md#commit-points); a failed commit fails the run closed at once
(`RunEnded` carries its RUN_ERROR). The turn never writes to the client itself: it fills the list of
AG-UI events the stream shows next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agui_bridge.a2a.errors import A2AError
from agui_bridge.a2a.messages import session_id_of
from agui_bridge.a2a.port import A2APort
from agui_bridge.a2a.signals import TERMINAL_STATES, A2AEvent
from agui_bridge.errors import A2AProtocolError
from agui_bridge.observability.labels import InterruptsClosed
from agui_bridge.projection.interrupts import InputRequest, build_interrupt, collect_inputs
from agui_bridge.projection.pipeline import PipelineMapper
from agui_bridge.projection.projector import RunProjector
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.ending import RunEnd, RunEnded
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.observer import RunObserver
from agui_bridge.runs.resume_plan import PreparedAnswer
from agui_bridge.store import model
from agui_bridge.store.store import StateError

log = logging.getLogger(__name__)


#: iac-code metadata the projector turns into events (docs/design.md#projection).
_SHOWN_IAC = frozenset({"thinking", "pipeline", "pipelineBatch", "tool"})
_USER_ROLES = frozenset({"user", "ROLE_USER"})


def shows_nothing(event: A2AEvent) -> bool:
    """Conservatively: the projector shows nothing for this event (no status message, artifact, agent reply
    in a Task's history, reasoning, Pipeline envelope or tool), so nothing of it can be half shown if
    writing the ids it brought fails later."""
    body = event.body
    status = body.get("status")
    if event.kind == "artifactUpdate" or (isinstance(status, dict) and status.get("message")):
        return False
    history = body.get("history")
    if isinstance(history, list) and history:
        last = history[-1]
        if not isinstance(last, dict) or last.get("role") not in _USER_ROLES:
            return False
    return not _SHOWN_IAC.intersection(event.iac)


class RunTurn:
    __slots__ = ("_accepted", "_answers", "_awaiting", "_catch_up_after_permissions", "_client", "_end",
                 "_interrupt_ttl_ms", "_ledger", "_now_ms", "_observer", "_session_emitted", "_ticket", "_unaccepted",
                 "pipeline", "projector")  # fmt: skip

    def __init__(
        self,
        ticket: RunTicket,
        ledger: RunLedger,
        end: RunEnd,
        projector: RunProjector,
        pipeline: PipelineMapper,
        *,
        client: A2APort,
        observer: RunObserver,
        interrupt_ttl_s: float,
        now_ms: Callable[[], int],
    ) -> None:
        self._ticket = ticket
        self._ledger = ledger
        self._end = end
        self._client = client
        self._observer = observer
        self._interrupt_ttl_ms = int(interrupt_ttl_s * 1000)
        #: The runtime's wall clock (`Runtime.now_ms`): an interrupt's expiry is counted from it.
        self._now_ms = now_ms
        self.projector = projector
        self.pipeline = pipeline
        self._session_emitted = False
        # Resume bookkeeping (docs/design.md#sending-answers): answers being sent, those A2A has not
        # accepted yet, and the interrupt ids the next streamed event accepts.
        self._answers: dict[str, PreparedAnswer] = {}
        self._unaccepted: set[str] = set()
        self._awaiting: tuple[str, ...] = ()
        self._accepted = not ticket.is_resume
        self._catch_up_after_permissions = False  # a Pipeline permission resume re-reads the state

    # ---- answers being sent -------------------------------------------------------------------

    def sending(self, prepared: list[PreparedAnswer]) -> None:
        """The resume will send these answers; none is accepted yet."""
        self._answers = {answer.interrupt_id: answer for answer in prepared}
        self._unaccepted = set(self._answers)
        self._catch_up_after_permissions = self.pipeline.sequence > 0 and any(a.permission for a in prepared)

    def send_opened(self, interrupt_ids: tuple[str, ...]) -> None:
        """A streamed send of these answers opened: its first event means A2A accepted them."""
        self._awaiting = interrupt_ids

    def accept(self, interrupt_ids: tuple[str, ...], out: list[Event]) -> None:
        """A2A accepted these answers: persist that before showing anything that follows.

        (docs/design.md#exactly-once)
        """
        ticket = self._ticket
        self.write_identity()  # C5 would carry it too, but its failure must stay the identity's own
        digests = {i: self._answers[i].digest for i in interrupt_ids if i in self._answers}
        try:
            self._ledger.accept_answers(digests, self._now_ms())
        except StateError:
            raise RunEnded(self._end.fail_closed("answer_commit_failed")) from None
        closed = [input_id for input_id in digests if input_id in ticket.pending]
        for input_id, digest in digests.items():
            ticket.pending.pop(input_id, None)
            ticket.applied[input_id] = digest
        if closed:
            self._observer.interrupts_closed(len(closed), InterruptsClosed.ANSWERED)
        self._unaccepted.difference_update(digests)
        if self._unaccepted or self._accepted:
            return
        self._accepted = True
        if not self._session_emitted:
            out.append(self._session_event())
        for answer in self._answers.values():
            if not answer.permission and answer.tool_use_id and answer.text:
                self.projector.tool_result(out, answer.tool_use_id, answer.text)

    # ---- per event ----------------------------------------------------------------------------

    def learn_identity(self, event: A2AEvent, *, task: bool = True, defer: bool = False) -> None:
        """Check the task and iac-code session ids of an event; persist new ones in one write.

        With `defer` the new ids are only noted: `write_identity` writes them before anything is shown
        (docs/design.md#identity-commit-deferred), together with any the next events bring."""
        ticket = self._ticket
        new_task = None
        if task and event.task_id is not None and event.task_id != ticket.task_id:
            if ticket.task_id is not None:
                raise A2AProtocolError("task_changed")
            new_task = event.task_id
        session_id = session_id_of(event.iac) if event.iac else None
        new_session = None
        if session_id is not None and session_id != ticket.session_id:
            if ticket.session_id is not None:
                raise A2AProtocolError("session_changed")
            new_session = session_id
        if new_task is None and new_session is None:
            return
        self._ledger.note_identity(new_task, new_session)  # the ticket has them now: a cancel finds the task
        if not defer:
            self.write_identity()

    def write_identity(self) -> None:
        """Write the noted task and session ids (C3) before anything that follows them is shown (fail closed)."""
        unwritten = self._ledger.unwritten_identity
        if unwritten is None:
            return
        try:
            self._ledger.write_identity()
        except StateError:
            key = "task_mapping_failed" if unwritten[0] else "session_mapping_failed"
            raise RunEnded(self._end.fail_closed(key)) from None

    def check_input_identity(self, inputs: list[InputRequest]) -> None:
        """An input must belong to the run's task and context (docs/design.md#a2a-metadata-read)."""
        ticket = self._ticket
        for request in inputs:
            for key, expected, error_key in (
                ("requestTaskId", ticket.task_id, "interrupt_other_task"),
                ("contextId", ticket.context_id, "interrupt_other_context"),
            ):
                value = request.value.get(key)
                if isinstance(value, str) and value and expected is not None and value != expected:
                    raise A2AProtocolError(error_key)

    def handle(self, event: A2AEvent, out: list[Event]) -> None:
        """Identity, commits, acceptance, session event, projection, interrupts."""
        ticket = self._ticket
        if event.context_id is not None and event.context_id != ticket.context_id:
            raise A2AProtocolError("context_changed")
        # New ids are written before anything that follows them is projected or shown; only the ids of an
        # event with nothing to show wait, for the next event's (docs/design.md#identity-commit-deferred).
        waited = self._ledger.unwritten_identity is not None
        self.learn_identity(event, defer=True)
        # Only an event that leaves ids unwritten is inspected: not every text delta of a long turn.
        if self._ledger.unwritten_identity is not None and (waited or not shows_nothing(event)):
            self.write_identity()
        if self._awaiting:
            interrupt_ids, self._awaiting = self._awaiting, ()
            self.accept(interrupt_ids, out)
        if (
            self._accepted
            and not self._session_emitted
            and ticket.task_id is not None
            and ticket.session_id is not None
        ):
            self.write_identity()
            out.append(self._session_event())
        projected = self.projector.project(event)
        if projected:
            self.write_identity()  # a no-op unless `shows_nothing` missed something: still before it is shown
            out.extend(projected)
        inputs = [
            request
            for request in (collect_inputs(event.iac) if event.iac else [])
            if request.input_id not in ticket.applied and request.input_id not in self._answers
        ]
        if inputs:
            self.write_identity()
            out.extend(self.interrupt(inputs))

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

    def interrupt(self, inputs: list[InputRequest]) -> list[Event]:
        """Commit the interrupt durably, then close spans and announce it (docs/design.md#interrupt-commit).

        The run ends here: RUN_FINISHED `interrupt` with every pending interrupt.
        """
        self.write_identity()  # C6 would carry it too, but its failure must stay the identity's own
        ticket = self._ticket
        now_ms = self._now_ms()
        expires_ms = now_ms + self._interrupt_ttl_ms
        expires_at = model.format_rfc3339_ms(expires_ms)
        self.check_input_identity(inputs)
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
        self.projector.finalise_all_text()
        try:
            self._ledger.commit_interrupt(pending, self.projector.text_digests, now_ms)
        except StateError:
            raise RunEnded(self._end.fail_closed("interrupt_commit_failed")) from None
        self._observer.interrupts_announced(len(set(pending) - set(ticket.pending)))
        ticket.pending = pending
        interrupts = [p.announced or build_interrupt(p.value, expires_at) for p in pending.values()]
        return catch_up + self._end.park(interrupts)

    def _permission_catch_up(self) -> list[Event]:
        """After a Pipeline permission resume, the events A2A recorded while it waited (docs/design.md#pipelines)."""
        if not self._catch_up_after_permissions or self._ticket.task_id is None:
            return []
        self._catch_up_after_permissions = False
        try:
            response = self._client.pipeline_state(self._ticket.task_id, self.pipeline.sequence)
        except A2AError:
            log.warning("Pipeline catch-up after a permission resume failed", exc_info=True)
            return []
        return self.pipeline.recover(response)

    def finish(self) -> list[Event]:
        """The upstream turn ended (terminal state or closed stream): decide the outcome.

        (docs/design.md#terminal-event)
        """
        self.write_identity()  # before the outcome: a failed identity write fails the run closed
        out = self._permission_catch_up()
        state = self.projector.last_state
        if state in ("completed", "input-required"):
            if not self._session_emitted:
                out.append(self._session_event())
            return out + self._end.succeed()
        return out + self._end.failed_turn(state, task_ended=state in TERMINAL_STATES)


__all__ = ["RunTurn"]
