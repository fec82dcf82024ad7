"""The resume preflight: check, restore, reconcile and validate before anything reaches the kernel's wait.

The steps and their order are docs/design.md#resume-preflight; the decisions are the pure functions
of `runs/resume_plan.py`, and this module only does their I/O: the unary kernel calls (run off the
generator by the stream's `Pacer`, so heartbeats keep flowing), the reconciliation commit, and the
preflight events. It returns the `Upstream` that sends the answers, or ends the run with `RunEnded`
(refused, expired, a new interrupt, a cancelled question); a failed kernel call propagates as its
`A2AError`, which leaves every interrupt pending.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence

from agui_bridge.a2a import messages as a2a_messages
from agui_bridge.a2a.signals import TERMINAL_STATES, A2AEvent
from agui_bridge.errors import A2AProtocolError, BridgeError
from agui_bridge.observability import tracing
from agui_bridge.observability.labels import InterruptsClosed
from agui_bridge.projection.interrupts import collect_inputs
from agui_bridge.protocol.events import Event
from agui_bridge.runs import resume_plan
from agui_bridge.runs.context import RunContext
from agui_bridge.runs.ending import RunEnded
from agui_bridge.runs.upstream import Upstream
from agui_bridge.store import model
from agui_bridge.store.store import StateError
from agui_bridge.validation.run_input import ResumeAnswer
from agui_bridge.worker.host import decode_off_hub


def prepare_off_hub(
    chosen: Sequence[tuple[ResumeAnswer, model.PendingInterrupt]],
) -> list[resume_plan.PreparedAnswer]:
    """`resume_plan.prepare` on a native thread of the body decoder's pool: the schema validation of a
    large answer is CPU work that must not hold the hub (docs/design.md#answer-validation); in place where
    gevent is not used (the stream is a thread of its own there)."""
    return decode_off_hub(resume_plan.prepare, chosen)


class ResumePreflight:
    """The preflight of one resume, reading the run's context (`runs/context.build_run`)."""

    __slots__ = (
        "_client",
        "_emitter",
        "_end",
        "_language",
        "_ledger",
        "_now_ms",
        "_observer",
        "_pacer",
        "_run",
        "_ticket",
        "_ttl_ms",
        "_turn",
    )  # fmt: skip

    def __init__(self, context: RunContext) -> None:
        self._ticket = context.ticket
        self._run = context.run
        self._turn = context.turn
        self._end = context.end
        self._ledger = context.ledger
        self._client = context.client
        self._pacer = context.pacer
        self._emitter = context.emitter
        self._observer = context.observer
        self._ttl_ms = int(context.settings.interrupt_ttl_s * 1000)
        self._now_ms = context.runtime.now_ms  # interrupts expire on the runtime's clock
        self._language = context.language

    def run(self) -> Generator[bytes, None, Upstream]:
        """The preflight, measured (metrics) and traced; a failed one is measured too."""
        started = time.monotonic()
        try:
            return (yield from tracing.traced_generator(self._steps(), "agui.resume_preflight"))
        finally:
            self._observer.resume_preflight(time.monotonic() - started)

    def _steps(self) -> Generator[bytes, None, Upstream]:
        ticket = self._ticket
        client = self._client
        turn = self._turn
        call_name = f"call:{ticket.run_id}"
        answers = self._run.resume or ()
        task_id = ticket.task_id
        if task_id is None or not ticket.pending:
            try:
                resume_plan.check_nothing_pending(answers, ticket.applied)
            except BridgeError as error:
                raise RunEnded(self._end.refuse(error)) from None
        if resume_plan.expired(ticket.pending, self._now_ms()):
            raise RunEnded(self._end.expire(dismissed=resume_plan.dismisses_all(answers)))
        if ticket.session_id is not None:
            yield from self._pacer.call(client.ensure_restored, ticket.cwd, ticket.session_id, task_id, name=call_name)
        snapshot = yield from self._pacer.call(client.get_task, task_id, name=call_name)
        context_id = snapshot.context_id
        if snapshot.task_id != task_id or (context_id is not None and context_id != ticket.context_id):
            raise A2AProtocolError("task_mismatch")
        turn.learn_identity(snapshot, task=False)
        catch_up = yield from self._pacer.call(client.pipeline_state, task_id, turn.pipeline.sequence, name=call_name)
        snapshot_inputs = collect_inputs(snapshot.iac) if snapshot.iac else []
        turn.check_input_identity(snapshot_inputs)
        now_ms = self._now_ms()
        reconciled = resume_plan.reconcile(
            ticket.pending,
            snapshot_inputs,
            snapshot_lists_inputs="input" in snapshot.iac or "pendingPermissions" in snapshot.iac,
            snapshot_terminal=snapshot.state in TERMINAL_STATES,
            answers=answers,
            applied=ticket.applied,
            now_ms=now_ms,
            ttl_ms=self._ttl_ms,
        )
        if reconciled.changed:
            self._commit_reconciled(reconciled.pending, now_ms)
        selection = resume_plan.select(reconciled, answers, ticket.applied)
        if selection.new_interrupt:
            raise RunEnded(self._preflight_events(snapshot, catch_up) + turn.interrupt([]))
        prepared = yield from self._pacer.call(prepare_off_hub, selection.answers, name=call_name)
        preflight_events = self._preflight_events(snapshot, catch_up)
        if preflight_events:
            yield self._emitter.events(preflight_events)
            self._pacer.shown()
        if any(answer.cancelled and not answer.permission for answer in prepared):
            yield from self._pacer.call(client.cancel_task, task_id, name=call_name)
            raise RunEnded(self._end.cancelled_by_answer())
        metadata = a2a_messages.iac_code_metadata(self._run.props, ticket.cwd, self._language)
        plan = resume_plan.plan_sends(
            prepared, run_id=ticket.run_id, task_id=task_id, context_id=ticket.context_id, metadata=metadata
        )
        turn.sending(prepared)
        return Upstream(client).resume(plan, task_id)

    def _commit_reconciled(self, pending: dict[str, model.PendingInterrupt], now_ms: int) -> None:
        """The pending set reconciled with the kernel's view, committed before it is acted on."""
        ticket = self._ticket
        try:
            self._ledger.replace_pending(pending, now_ms)
        except StateError:
            raise RunEnded(self._end.fail_closed("interrupt_commit_failed")) from None
        self._observer.interrupts_announced(len(set(pending) - set(ticket.pending)))
        replaced = len(set(ticket.pending) - set(pending))
        if replaced:
            self._observer.interrupts_closed(replaced, InterruptsClosed.RECONCILED)
        ticket.pending = dict(pending)

    def _preflight_events(self, snapshot: A2AEvent, catch_up: object) -> list[Event]:
        """Shown only once the resume is valid: the snapshot (no text, no envelopes), then recovery."""
        events = self._turn.projector.project(snapshot, text=False, pipeline=False)
        events.extend(self._turn.pipeline.recover(catch_up))
        return events


__all__ = ["ResumePreflight", "prepare_off_hub"]
