"""Durable commit points of a running stream (docs/design.md#commit-points), each a locked read-modify-write.

Every write re-reads the thread file and checks that this run still holds the lease, so a run whose
lease was reclaimed can never overwrite the thread it lost.

The identity (C3) may be noted before it is written (docs/design.md#identity-commit-deferred): the turn
writes it before it shows anything, and every other write of the run carries it along, so the task and
session ids of one kernel turn cost one locked write, not one per event that brings one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agui_bridge.runs.admission import RunTicket
from agui_bridge.store import model
from agui_bridge.store.lease import lease_key
from agui_bridge.store.store import Durability, StateError, ThreadStore


class LeaseLost(StateError):
    """The thread no longer records this run as its active run."""


#: Reads the run's Pipeline cursor and durable open steps, written at every write point.
PipelineState = Callable[[], tuple[int, Iterable[str]]]


class RunLedger:
    __slots__ = ("_pipeline_state", "_store", "_ticket", "_unwritten")

    def __init__(self, store: ThreadStore, ticket: RunTicket, pipeline_state: PipelineState | None = None) -> None:
        self._store = store
        self._ticket = ticket
        self._pipeline_state = pipeline_state
        #: Task and session ids noted but not yet written (`note_identity`); None: nothing unwritten.
        self._unwritten: tuple[str | None, str | None] | None = None

    @property
    def unwritten_identity(self) -> tuple[str | None, str | None] | None:
        """The (task, session) ids noted that no write has carried yet; None: nothing unwritten."""
        return self._unwritten

    def _update(
        self,
        mutate: Callable[[model.ThreadState], None],
        *,
        require_lease: bool = True,
        durability: Durability = Durability.POWER,
    ) -> None:
        with self._store.transaction(self._ticket.thread_id) as txn:
            state = txn.state
            if state is None:
                raise LeaseLost("thread file disappeared")
            lease = state.active_run
            if require_lease and not self._holds(lease):
                raise LeaseLost("run lease lost")
            unwritten = self._unwritten
            if unwritten is not None and self._holds(lease):  # where record_identity would have written it
                self._apply_identity(state, *unwritten)
            mutate(state)
            pipeline_state = self._pipeline_state
            if pipeline_state is not None and self._same_execution(state):
                sequence, open_steps = pipeline_state()
                execution = state.execution
                execution.pipeline_sequence = max(execution.pipeline_sequence, sequence)
                execution.pipeline_open_steps = sorted(set(open_steps))
            txn.commit(state, durability)
        self._unwritten = None

    def _holds(self, lease: model.RunLease | None) -> bool:
        """The lease is this run's: compared by run key (executionId + runId), never runId alone."""
        return lease is not None and lease_key(lease) == self._ticket.key

    def _same_execution(self, state: model.ThreadState) -> bool:
        return state.execution.execution_id == self._ticket.execution_id

    def _apply_identity(self, state: model.ThreadState, task_id: str | None, session_id: str | None) -> None:
        if task_id is not None and self._same_execution(state):
            state.execution.task_id = task_id
        if session_id is not None:
            state.session_id = session_id

    def record_identity(self, task_id: str | None, session_id: str | None) -> None:
        """First sight of the task and/or the iac-code session: one write for both (fail closed)."""

        def mutate(state: model.ThreadState) -> None:
            self._apply_identity(state, task_id, session_id)

        self._update(mutate, durability=Durability.CRASH)  # C3, docs/design.md#commit-durability
        if task_id is not None:
            self._ticket.task_id = task_id
        if session_id is not None:
            self._ticket.session_id = session_id

    def note_identity(self, task_id: str | None, session_id: str | None) -> None:
        """Learn new ids now (the ticket has them at once, so a cancel finds the task) and write them with
        the run's next write: `write_identity` or any other commit point (docs/design.md#identity-commit-deferred)."""
        task, session = self._unwritten or (None, None)
        self._unwritten = (task_id or task, session_id or session)
        if task_id is not None:
            self._ticket.task_id = task_id
        if session_id is not None:
            self._ticket.session_id = session_id

    def write_identity(self) -> None:
        """Write the noted identity, if any, as C3.

        A failed write raises StateError and forgets the identity, as a failed `record_identity` never
        wrote it: the run fails closed and its ending writes must not carry it."""
        unwritten, self._unwritten = self._unwritten, None
        if unwritten is not None:
            self.record_identity(*unwritten)

    def commit_interrupt(
        self,
        pending: dict[str, model.PendingInterrupt],
        text_digests: Iterable[str],
        now_ms: int,
    ) -> None:
        """Persist the pending interrupts and release the lease in one write (fail closed).

        (docs/design.md#interrupt-commit)
        """

        def mutate(state: model.ThreadState) -> None:
            if not self._same_execution(state):
                raise LeaseLost("execution rotated")
            for input_id, entry in pending.items():
                existing = state.execution.pending.get(input_id)
                if existing is not None and existing.sideband:
                    entry.sideband = True
                state.execution.pending[input_id] = entry
            state.execution.text_snapshot_digests = sorted(
                set(state.execution.text_snapshot_digests) | set(text_digests)
            )
            state.active_run = None
            state.last_activity_ms = now_ms

        self._update(mutate)

    def finish(self, now_ms: int, *, retire: bool) -> None:
        """Release the lease (before the terminal event) and retire a finished execution.

        (docs/design.md#decision-lease-release-before-terminal)
        """

        def mutate(state: model.ThreadState) -> None:
            lease = state.active_run
            if self._holds(lease):
                state.active_run = None
            if retire and self._same_execution(state) and not state.execution.pending:
                model.retire_execution(state)
            state.last_activity_ms = now_ms

        self._update(mutate, require_lease=False, durability=Durability.CRASH)  # C7, docs/design.md#commit-durability

    def replace_pending(self, pending: dict[str, model.PendingInterrupt], now_ms: int) -> None:
        """Persist the pending set reconciled with A2A's view of the task (docs/design.md#resume-reconciliation)."""

        def mutate(state: model.ThreadState) -> None:
            if not self._same_execution(state):
                raise LeaseLost("execution rotated")
            state.execution.pending = dict(pending)
            state.last_activity_ms = now_ms

        self._update(mutate, durability=Durability.CRASH)  # C4, docs/design.md#commit-durability

    def accept_answers(self, digests: dict[str, str], now_ms: int) -> None:
        """A2A accepted these answers: record their digests, drop them from pending (docs/design.md#exactly-once)."""

        def mutate(state: model.ThreadState) -> None:
            execution = state.execution
            if not self._same_execution(state):
                raise LeaseLost("execution rotated")
            kept = [
                a
                for a in state.applied_resume_digests
                if not (a.execution_id == execution.execution_id and a.interrupt_id in digests)
            ]
            kept.extend(model.AppliedResume(execution.execution_id, i, d) for i, d in digests.items())
            state.applied_resume_digests = sorted(kept, key=lambda a: (a.execution_id, a.interrupt_id))
            for input_id in digests:
                execution.pending.pop(input_id, None)
            state.last_activity_ms = now_ms

        self._update(mutate)

    def drop_execution(self, now_ms: int) -> None:
        """Drop pending, retire, release: after a failed recovery-critical write, an expired
        interrupt (docs/design.md#interrupt-expiry) or an answer that cancels the run."""

        def mutate(state: model.ThreadState) -> None:
            if self._same_execution(state):
                state.execution.pending.clear()
                model.retire_execution(state)
            lease = state.active_run
            if self._holds(lease):
                state.active_run = None
            state.last_activity_ms = now_ms

        self._update(mutate, require_lease=False)
