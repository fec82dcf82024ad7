"""The demo agent's task memory: every per-task and per-context table of the executor, and the rule that
frees a task's working state when it ends (cancelled or failed) while its read-only views (``GetTask``
overlay, Pipeline state) stay readable for the last ``ENDED_TASKS_KEPT`` ended tasks.
"""

from __future__ import annotations

import collections
import copy
import uuid
from collections.abc import Container
from typing import Any

from agui_bridge.demo.flow import FlowControl
from agui_bridge.demo.interrupts import Sideband, Wait
from agui_bridge.demo.pipeline import PipelineRun

#: Ended (cancelled or failed) tasks whose ``GetTask`` overlay and Pipeline state stay readable;
#: older ones are forgotten so a long-running demo agent does not grow without bound.
ENDED_TASKS_KEPT = 64
#: How many of the latest envelopes ``GetTask`` shows (``metadata.iac_code.pipelineBatch``).
PIPELINE_TASK_SUFFIX = 16


class TaskMemory:
    """What the demo agent remembers about sessions, tasks and contexts (one instance per executor)."""

    def __init__(self, flow: FlowControl) -> None:
        self.flow = flow
        self.sessions: dict[str, str] = {}
        self.cancelled: set[str] = set()
        self.running: set[str] = set()
        self.waits: dict[str, Wait] = {}
        #: inputIds already answered, per task (a second answer is a no-op ``inputReceived``).
        self.answered: dict[str, dict[str, dict[str, Any]]] = {}
        #: ``metadata.iac_code`` of tasks that have asked for input, as ``GetTask`` shows it: set
        #: when the task starts waiting and never cleared by later turns (stale, as the kernel's).
        self.task_metadata: dict[str, dict[str, Any]] = {}
        self.executions: dict[str, str] = {}
        self.backup_not_ready: set[str] = set()
        self.instance_id = f"instance-{uuid.uuid4().hex}"
        #: Pipeline runs by taskId; every envelope stays here for ``/iac-code/pipeline/state``.
        self.pipelines: dict[str, PipelineRun] = {}
        self.sidebands: dict[str, Sideband] = {}
        #: inputIds of accepted sideband answers, per task (a repeat is a no-op).
        self.sideband_answered: dict[str, set[str]] = {}
        #: Open ``SubscribeToTask`` streams per task (a sideband answer waits for one).
        self.subscribers: dict[str, int] = {}
        #: contextIds whose runtime a cancel is tearing down (count of cancels in progress).
        self.teardowns: dict[str, int] = {}
        self._ended: collections.deque[str] = collections.deque()

    def tables_holding(self, task_id: str) -> list[str]:
        """Names of the per-task tables that still hold ``task_id`` (for tests and debugging)."""
        tables: dict[str, Container[str]] = {
            "waits": self.waits,
            "answered": self.answered,
            "executions": self.executions,
            "sidebands": self.sidebands,
            "sideband_answered": self.sideband_answered,
            "subscribers": self.subscribers,
            "task_metadata": self.task_metadata,
            "pipelines": self.pipelines,
            "cancelled": self.cancelled,
            "running": self.running,
        }
        held = [name for name, table in tables.items() if task_id in table]
        return held + (["flow"] if self.flow.holds(task_id) else [])

    def end_task(self, task_id: str) -> None:
        """Free a cancelled or failed task's working state; keep its read-only views a while."""
        working: tuple[dict[str, Any], ...] = (
            self.waits,
            self.answered,
            self.executions,
            self.sidebands,
            self.sideband_answered,
            self.subscribers,
        )
        for table in working:
            table.pop(task_id, None)
        if task_id not in self._ended:
            self._ended.append(task_id)
        while len(self._ended) > ENDED_TASKS_KEPT:
            old = self._ended.popleft()
            self.task_metadata.pop(old, None)
            self.pipelines.pop(old, None)
            if old not in self.running:
                self.cancelled.discard(old)

    def session_id(self, context_id: str) -> str:
        """The ``iacCodeSessionId`` of a context: a uuid4 chosen on first sight, then stable."""
        return self.sessions.setdefault(context_id, str(uuid.uuid4()))

    def execution_id(self, task_id: str) -> str:
        """The task's ``executionId``: chosen when it first waits, then stable until the task ends."""
        return self.executions.setdefault(task_id, f"exec-{uuid.uuid4().hex}")

    def session_status(self, session_id: str) -> str | None:
        """``current`` for a known session, ``None`` if unknown; a session marked ``[BACKUP_NOT_READY]``
        answers ``backup_not_ready`` once, as a backup that finishes syncing before the retry."""
        if session_id in self.backup_not_ready:
            self.backup_not_ready.discard(session_id)
            return "backup_not_ready"
        return "current" if session_id in self.sessions.values() else None

    def is_cancelable(self, task_id: str) -> bool:
        """A turn of ``task_id`` runs or waits for an answer; a finished turn cannot be cancelled."""
        return task_id in self.running or task_id in self.waits or task_id in self.sidebands

    def pipeline_state(self, task_id: str, after_sequence: int) -> dict[str, Any] | None:
        """``/iac-code/pipeline/state`` of a task: snapshot + envelopes after the cursor; None if none."""
        run = self.pipelines.get(task_id)
        return run.state(after_sequence) if run is not None else None

    def subscriber_attached(self, task_id: str) -> None:
        """A ``SubscribeToTask`` stream of ``task_id`` now receives live events."""
        self.subscribers[task_id] = self.subscribers.get(task_id, 0) + 1

    def subscriber_detached(self, task_id: str) -> None:
        """A ``SubscribeToTask`` stream of ``task_id`` ended."""
        left = self.subscribers.get(task_id, 0) - 1
        if left > 0:
            self.subscribers[task_id] = left
        else:
            self.subscribers.pop(task_id, None)

    def sync_pipeline_overlay(self, task_id: str) -> None:
        """Keep the latest envelopes in the task-level metadata ``GetTask`` shows."""
        run = self.pipelines.get(task_id)
        if run is None:
            return
        meta = self.task_metadata.setdefault(task_id, {"iacCodeSessionId": run.session_id})
        meta["pipelineBatch"] = {"events": copy.deepcopy(run.events[-PIPELINE_TASK_SUFFIX:])}
