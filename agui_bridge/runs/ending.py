"""One way to end a run: the outcome, the lease, the kernel task and the terminal event, decided together.

Every way a run can end (docs/design.md#terminal-event) goes through `RunEnd.end`, the only place
that marks a run finished: it settles the outcome (the first decision wins), then, once per run,
cancels or keeps the A2A task and releases the lease (retiring or keeping the execution). The lease
is released before the terminal event is built, so it is written before the client sees the end
(docs/design.md#decision-lease-release-before-terminal). Each public method below is one row of the
terminal-event table; the stream shows what it returns and nothing after it.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

from agui_bridge.a2a.errors import A2ARpcError
from agui_bridge.a2a.port import A2APort
from agui_bridge.errors import (
    A2AExecutionFailed,
    BridgeError,
    Cancelled,
    ExecutionExpired,
    StatePersistenceFailed,
)
from agui_bridge.i18n.language import translate
from agui_bridge.observability.labels import UPSTREAM_ERROR_KINDS, InterruptsClosed
from agui_bridge.projection.projector import RunProjector
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.observer import Outcome, RunObserver
from agui_bridge.store.store import StateError
from agui_bridge.worker.runtime import Runtime

log = logging.getLogger(__name__)


class Lease(Enum):
    """What happens to the lease and the execution when the run ends."""

    KEEP = "keep"  # released; the execution stays (interrupts pending, or retryable)
    RETIRE = "retire"  # released; the execution is retired unless interrupts are pending
    DROP = "drop"  # pending cleared, execution retired, lease released (docs/design.md#commit-points)
    COMMITTED = "committed"  # already released by the write that committed the interrupt


class Task(Enum):
    """What happens to the kernel task when the run ends."""

    KEEP = "keep"
    CANCEL_LATER = "cancel-later"  # in the background: the client must not wait for it
    #: before the lease is released: the process may exit right after, and a new turn sent to the
    #: context while the kernel still tears the cancelled task down fails (docs/design.md#cancellation)
    CANCEL_NOW = "cancel-now"


class RunEnded(Exception):
    """A run reached its terminal event; `events` are the last ones to show."""

    def __init__(self, events: list[Event]) -> None:
        super().__init__("run ended")
        self.events = events


class CommitFailed(Exception):
    """A recovery-critical write failed; the run must fail closed with this message key."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class RunEnd:
    """The end of one run: open until `end` is called, then finished for good."""

    __slots__ = ("_client", "_language", "_ledger", "_observer", "_outcome", "_projector", "_runtime", "_ticket",
                 "cancelled_elsewhere", "error_code", "finished")  # fmt: skip

    def __init__(
        self,
        ticket: RunTicket,
        ledger: RunLedger,
        projector: RunProjector,
        *,
        client: A2APort,
        runtime: Runtime,
        observer: RunObserver,
        language: str,
    ) -> None:
        self._ticket = ticket
        self._ledger = ledger
        self._projector = projector
        self._client = client
        self._runtime = runtime
        self._observer = observer
        self._language = language
        self._outcome: Outcome | None = None
        self.finished = False  # the run's lease and task were settled (terminal event or parked)
        self.error_code: str | None = None  # the code of the RUN_ERROR built, for the trace
        #: The cancellation extension retired the execution and cancelled the task (docs/design.md#cancellation).
        self.cancelled_elsewhere = False

    @property
    def outcome(self) -> Outcome:
        """How the run ended; a run that never reached a decision was abandoned by its client."""
        return self._outcome or Outcome.DISCONNECTED

    # ---- the transition ------------------------------------------------------------------------

    def end(
        self,
        outcome: Outcome | None,
        lease: Lease,
        task: Task = Task.KEEP,
        *,
        how: InterruptsClosed = InterruptsClosed.DROPPED,
    ) -> None:
        """Settle the outcome (first decision wins), then, once per run, the task and the lease."""
        if outcome is not None and self._outcome is None:
            self._outcome = outcome
        if self.finished:
            return
        self.finished = True
        task_id = self._ticket.task_id
        if task is Task.CANCEL_LATER:
            self.cancel_later(task_id)
        elif task is Task.CANCEL_NOW and task_id:
            try:
                self._client.cancel_task(task_id)
            except A2ARpcError:  # the kernel answered: most often the task had already ended
                level = logging.DEBUG if self.cancelled_elsewhere else logging.WARNING
                log.log(level, "CancelTask refused for an ending run", extra={"task_id": task_id})
            except Exception:  # noqa: BLE001 - best effort, logged
                log.warning("CancelTask failed for an ending run", extra={"task_id": task_id})
        if lease is Lease.DROP:
            self._drop_execution(how)
        elif lease is not Lease.COMMITTED:
            self._release(retire=lease is Lease.RETIRE)

    # ---- the ways a run ends (docs/design.md#terminal-event) --------------------------------------

    def succeed(self) -> list[Event]:
        """The kernel's turn ended well: the execution is retired."""
        self.end(Outcome.SUCCESS, Lease.RETIRE)
        return self.finished_events({"type": "success"})

    def park(self, interrupts: list[dict[str, Any]]) -> list[Event]:
        """The interrupt is committed (which released the lease): RUN_FINISHED `interrupt`."""
        self.end(Outcome.INTERRUPT, Lease.COMMITTED)
        return self.finished_events({"type": "interrupt", "interrupts": interrupts})

    def fail(self, error: BridgeError, *, task_ended: bool = False) -> list[Event]:
        """The generic error path: cancel and retire unless an interrupt is pending.

        A task that already reached a terminal state is not cancelled again. A run the cancellation
        extension ended was already retired by it, but its task is cancelled here too unless the kernel
        already ended it: the extension may have read the thread before the task id was written, and
        then only this run knows it (a second CancelTask of a cancelled task is harmless).
        """
        cancelled = isinstance(error, Cancelled)
        retire = not self._ticket.pending and not self.cancelled_elsewhere
        cancel = not task_ended and (self.cancelled_elsewhere or (retire and not cancelled))
        outcome = Outcome.CANCELLED if cancelled else Outcome.ERROR
        self.end(outcome, Lease.RETIRE if retire else Lease.KEEP, Task.CANCEL_NOW if cancel else Task.KEEP)
        return self.error_events(error)

    def failed_turn(self, state: str | None, *, task_ended: bool) -> list[Event]:
        """The kernel's turn ended without success: `canceled` is CANCELLED, anything else failed."""
        if state == "canceled":
            return self.fail(Cancelled())
        return self.fail(A2AExecutionFailed(), task_ended=task_ended)

    def fail_closed(self, key: str) -> list[Event]:
        """A recovery-critical write failed: cancel the task, drop the execution, report."""
        self.end(Outcome.ERROR, Lease.DROP, Task.CANCEL_LATER)
        return self.error_events(StatePersistenceFailed(key))

    def refuse(self, error: BridgeError) -> list[Event]:
        """A resume that may not touch A2A: nothing is cancelled, retired or cleared."""
        self.end(Outcome.ERROR, Lease.KEEP)
        return self.error_events(error)

    def expire(self, *, dismissed: bool) -> list[Event]:
        """An expired interrupt is never applied: the execution is dropped and its task cancelled.

        A resume that only cancels is what @ag-ui/client 1.0 must send for an expired interrupt
        ("Cancel it to continue the thread"); it gets the same clean-up but ends RUN_FINISHED
        `cancelled`, the one terminal event after which that client stops waiting for an answer.
        """
        outcome = Outcome.CANCELLED if dismissed else Outcome.EXPIRED
        self.end(outcome, Lease.DROP, Task.CANCEL_NOW, how=InterruptsClosed.EXPIRED)
        if dismissed:
            return self.finished_events({"type": "cancelled"})
        return self.error_events(ExecutionExpired())

    def cancelled_by_answer(self) -> list[Event]:
        """A question answered `cancelled`: the caller has cancelled the task; drop the execution."""
        self.end(Outcome.CANCELLED, Lease.DROP, how=InterruptsClosed.CANCELLED)
        return self.error_events(Cancelled("cancelled_by_answer"))

    def shutdown(self) -> list[Event]:
        """The worker is stopping: like a disconnect, but the client is told (RUN_ERROR CANCELLED).

        The task is cancelled before the terminal event, since the process may exit right after; a
        run whose interrupt is still pending (a resume not yet accepted) keeps it.
        """
        self._end_cancelling(Outcome.SHUTDOWN)
        return self.error_events(Cancelled("server_shutdown"))

    def window_expired(self) -> list[Event]:
        """A detached run nobody reattached to within the window (docs/design.md#reattach): like a
        disconnect (the task is cancelled unless an interrupt is pending), but recorded as RUN_ERROR
        CANCELLED, which a later reattach replays."""
        self._end_cancelling(Outcome.CANCELLED)
        return self.error_events(Cancelled("reattach_window_expired"))

    def abandon(self) -> None:
        """The client went away mid-run: cancel the task unless an interrupt is pending
        (docs/design.md#decision-disconnect-cancels-task). The outcome stays undecided: disconnected."""
        self._end_cancelling(None)

    def _end_cancelling(self, outcome: Outcome | None) -> None:
        """Retire and cancel the task now, unless an interrupt is still pending (then both are kept)."""
        retire = not self._ticket.pending
        self.end(outcome, Lease.RETIRE if retire else Lease.KEEP, Task.CANCEL_NOW if retire else Task.KEEP)

    # ---- terminal events -----------------------------------------------------------------------

    def error_events(self, error: BridgeError) -> list[Event]:
        """Open spans closed, then RUN_ERROR (docs/design.md#span-balancing)."""
        self.error_code = str(error.code)
        if error.code in UPSTREAM_ERROR_KINDS:  # counted by kind in metrics
            self._observer.upstream_error(str(error.code))
        message = error.raw_message or translate(error.message_key, self._language, **error.params)
        events = self._projector.close_all()
        usage = self._projector.usage_entries()
        events.append(ev.run_error(str(error.code), message, usage))
        return events

    def unshown_error_events(self, error: BridgeError) -> list[Event]:
        """`error_events` for the record only (the client left): the trace goes on reporting what was shown."""
        shown_code = self.error_code
        try:
            return self.error_events(error)
        finally:
            self.error_code = shown_code

    def finished_events(self, result: dict[str, Any]) -> list[Event]:
        """Open spans closed, then RUN_FINISHED with the run's usage."""
        events = self._projector.close_all()
        usage = self._projector.usage_entries()
        events.append(ev.run_finished(self._ticket.thread_id, self._ticket.run_id, result, usage))
        return events

    # ---- side effects --------------------------------------------------------------------------

    def cancel_later(self, task_id: str | None) -> None:
        """CancelTask in the background (best effort, logged)."""
        if not task_id:
            return
        client = self._client

        def cancel() -> None:
            try:
                client.cancel_task(task_id)
            except Exception:  # noqa: BLE001 - best effort, logged
                log.warning("CancelTask failed for an abandoned run", extra={"task_id": task_id})

        self._runtime.spawn(cancel, name=f"cancel:{self._ticket.run_id}")

    def _release(self, *, retire: bool) -> None:
        """Release the lease before the terminal event; failures are logged, not fatal."""
        try:
            self._ledger.finish(self._runtime.now_ms(), retire=retire)
        except StateError:
            log.warning("Failed to persist AG-UI thread state at run end", exc_info=True)

    def _drop_execution(self, how: InterruptsClosed) -> None:
        """Pending cleared, execution retired, lease released: best effort."""
        ticket = self._ticket
        if ticket.pending:
            self._observer.interrupts_closed(len(ticket.pending), how)
        try:
            self._ledger.drop_execution(self._runtime.now_ms())
        except StateError:
            log.warning("Failed to persist AG-UI thread state after dropping an execution", exc_info=True)
        ticket.pending = {}


__all__ = ["CommitFailed", "Lease", "RunEnd", "RunEnded", "Task"]
