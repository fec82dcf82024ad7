"""The demo agent's a2a-sdk ``AgentExecutor``: runs one scripted turn per message and parks or resumes scripts.

``scenarios`` decides *what* happens in a turn; ``turn`` decides *how it looks on the wire* (the iac-code
kernel's dialect, see ``tests/fixtures/a2a-transcripts``). This module puts a turn together: a new task's
``task`` event, SUBMITTED and WORKING with ``iacCodeSessionId``, then the script's steps. The ``Ask`` step
returns ``StepFlow.SUSPEND``: the executor emits INPUT_REQUIRED with ``metadata.iac_code.input`` and parks the
script (``interrupts.Wait``); ``execute`` resumes it once every input is answered instead of starting a new
script (matching rules: demo/README.md "Interrupts"). What it remembers per task is ``memory.TaskMemory``.

Pipeline steps become envelopes numbered by a per-task ``pipeline.PipelineRun``. ``WaitSideband`` blocks
inside ``execute`` on a future that ``take_sideband_answer`` (called by the server for a unary
``SendMessage``) resolves, so the turn goes on in the background while the answer's request returns at
once (docs/http-api.md#interrupts-and-resume).
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent

from agui_bridge.demo import answers, stamps
from agui_bridge.demo import scenarios as sc
from agui_bridge.demo.flow import FlowControl as FlowControl
from agui_bridge.demo.interrupts import (
    Pending,
    Sideband,
    Wait,
    execution_control,
    input_data,
    input_projection,
    input_received,
    wait_metadata,
)
from agui_bridge.demo.memory import ENDED_TASKS_KEPT as ENDED_TASKS_KEPT
from agui_bridge.demo.memory import TaskMemory
from agui_bridge.demo.messages import message_cwd, message_run_mode, permission_payload
from agui_bridge.demo.pipeline import PIPELINE_EXTENSION_URI as PIPELINE_EXTENSION_URI
from agui_bridge.demo.pipeline import PipelineRun as PipelineRun
from agui_bridge.demo.turn import (
    CANCEL_SUFFIX,
    CANCEL_TEXT,
    RUNTIME_MISSING_SUFFIX,
    RUNTIME_MISSING_TEXT,
    StepFlow,
    Turn,
)

#: How long the demo's cancel of a running or waiting task keeps its context's runtime torn down
#: (the kernel drops it while the cancel lands; the demo makes the window wide enough to be seen).
CANCEL_TEARDOWN_S = 0.2
#: Marker in a user text that makes ``ensure-restored`` answer 409 for that turn's session.
BACKUP_NOT_READY_MARKER = "[backup_not_ready]"
#: After a sideband answer the turn waits this long for a ``SubscribeToTask`` before it goes on, so
#: the follower sees every later event (the kernel goes on at once; see docs/http-api.md#interrupts-and-resume).
SIDEBAND_SUBSCRIBE_GRACE = 3.0


class DemoAgentExecutor(AgentExecutor):
    """Runs one scripted turn per message; sessions are per contextId, like the kernel's.

    A script that yields ``Ask`` is parked on its task (``TaskMemory.waits``) after INPUT_REQUIRED; the
    next message on that task is matched against the pending inputs (see ``execute``). A script that
    yields ``WaitSideband`` stays inside its ``execute`` call (``TaskMemory.sidebands``) until
    ``take_sideband_answer`` resolves it.
    """

    def __init__(self, flow: FlowControl | None = None) -> None:
        self.flow = flow or FlowControl()
        self._memory = TaskMemory(self.flow)
        #: ``metadata.iac_code`` per task as ``GetTask`` shows it (read by the server's task store).
        self.task_metadata = self._memory.task_metadata
        #: Pipeline runs by taskId (``/iac-code/pipeline/state``).
        self.pipelines = self._memory.pipelines
        self.sideband_grace = SIDEBAND_SUBSCRIBE_GRACE
        self.cancel_teardown_s = CANCEL_TEARDOWN_S

    def tables_holding(self, task_id: str) -> list[str]:
        """Names of the per-task tables that still hold ``task_id`` (for tests and debugging)."""
        return self._memory.tables_holding(task_id)

    def session_id(self, context_id: str) -> str:
        """The ``iacCodeSessionId`` of a context: a uuid4 chosen on first sight, then stable."""
        return self._memory.session_id(context_id)

    def session_status(self, session_id: str) -> str | None:
        """``current``, ``backup_not_ready`` (once, for a marked session) or ``None`` (unknown)."""
        return self._memory.session_status(session_id)

    def is_cancelable(self, task_id: str) -> bool:
        """A turn of ``task_id`` runs or waits for an answer; a finished turn cannot be cancelled."""
        return self._memory.is_cancelable(task_id)

    def is_running(self, task_id: str) -> bool:
        """True while a turn of ``task_id`` is executing (``SubscribeToTask`` is allowed)."""
        return task_id in self._memory.running

    def pipeline_state(self, task_id: str, after_sequence: int) -> dict[str, Any] | None:
        """``/iac-code/pipeline/state`` of a task: snapshot + envelopes after the cursor; None if none."""
        return self._memory.pipeline_state(task_id, after_sequence)

    def subscriber_attached(self, task_id: str) -> None:
        """A ``SubscribeToTask`` stream of ``task_id`` now receives live events."""
        self._memory.subscriber_attached(task_id)

    def subscriber_detached(self, task_id: str) -> None:
        """A ``SubscribeToTask`` stream of ``task_id`` ended."""
        self._memory.subscriber_detached(task_id)

    def take_sideband_answer(self, message: Message) -> str | None:
        """Apply a permission answer to the running turn's sideband wait; its taskId if taken."""
        return answers.take_sideband_answer(self._memory, message)

    def validate_answer(self, message: Message) -> None:
        """Reject a permission answer the way the kernel does, before any stream starts."""
        answers.validate_answer(self._memory, message)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start a turn, or resume a parked one with the answer this message carries."""
        task_id = str(context.task_id)
        context_id = str(context.context_id)
        turn = Turn(
            task_id=task_id,
            context_id=context_id,
            session_id=self.session_id(context_id),
            queue=event_queue,
            flow=self.flow,
            cancelled=self._memory.cancelled,
            cwd=message_cwd(context.message),
            pipelines=self.pipelines,
            on_pipeline=self._memory.sync_pipeline_overlay,
        )
        self._memory.running.add(task_id)
        try:
            payload = permission_payload(context.message)
            if payload is not None:
                await self._answer_permission(turn, payload)
                return
            text = context.get_user_input()
            wait = self._memory.waits.get(task_id)
            question = next((p for p in wait.open_inputs() if p.request.kind != sc.PERMISSION), None) if wait else None
            if wait is not None and question is not None:
                await self._answer(turn, wait, question, text)
                return
            if self._memory.teardowns.get(context_id):
                await self._runtime_missing(turn, context)
                return
            if BACKUP_NOT_READY_MARKER in text.lower():
                self._memory.backup_not_ready.add(turn.session_id)
            if context.current_task is None:
                history = [context.message] if context.message is not None else []
                await turn.emit(
                    Task(
                        id=task_id,
                        context_id=context_id,
                        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                        history=history,
                    )
                )
            await turn.status(TaskState.TASK_STATE_SUBMITTED, timestamp=True)
            await turn.status(TaskState.TASK_STATE_WORKING, timestamp=True)
            scenario = sc.select_scenario(text, message_run_mode(context.message))
            if wait is not None and scenario.name in sc.INTERRUPT_SCENARIOS:
                # Guidance while a permission waits: a normal turn that cannot park a second script.
                scenario = sc.PLAIN
            await self._run(turn, sc.paused(scenario.build(text), sc.pause_seconds(text)), None)
        finally:
            self._memory.running.discard(task_id)
            self.flow.forget(task_id)

    async def _run(self, turn: Turn, script: sc.Script, outcome: object) -> None:
        """Interpret steps until the script ends, stops, or parks on an ``Ask``."""
        while True:
            try:
                step = script.send(outcome)
            except StopIteration:
                return
            outcome = None
            if isinstance(step, sc.WaitSideband):
                outcome = await self._wait_sideband(turn, step)
                continue
            flow = await turn.run_step(step)
            if flow is StepFlow.STOP:
                if isinstance(step, sc.Fail):
                    self._memory.end_task(turn.task_id)
                return
            if flow is StepFlow.SUSPEND and isinstance(step, sc.Ask):
                await self._ask(turn, script, step)
                return

    def _execution_control(self, turn: Turn, status: str = "input-required") -> dict[str, Any]:
        """``executionControl`` as ``GetTask`` shows it for a waiting task."""
        return execution_control(turn, self._memory.instance_id, self._memory.execution_id(turn.task_id), status)

    async def _ask(self, turn: Turn, script: sc.Script, step: sc.Ask) -> None:
        """INPUT_REQUIRED with the input projection(s), then park the script on the task.

        A Pipeline ``Ask`` first sends its ``input_required`` envelope (WORKING) with the projection.
        """
        wait = Wait(script, [Pending(r, input_projection(turn, r)) for r in step.requests], step.pipeline)
        self._memory.waits[turn.task_id] = wait
        meta = wait_metadata(wait)
        self.task_metadata[turn.task_id] = {
            "iacCodeSessionId": turn.session_id,
            **copy.deepcopy(meta),
            "executionControl": execution_control(
                turn, self._memory.instance_id, self._memory.execution_id(turn.task_id)
            ),
        }
        self._memory.sync_pipeline_overlay(turn.task_id)
        if step.pipeline is not None:
            first = wait.inputs[0].projection
            extra = {"data": input_data(wait.inputs[0]), "input": first}
            await turn.pipeline_status([step.pipeline], envelope_extra=extra)
        await turn.status(TaskState.TASK_STATE_INPUT_REQUIRED, **meta)

    async def _input_received_envelope(self, turn: Turn, template: sc.PipelineEvent, pending: Pending) -> None:
        """The Pipeline ``input_received`` envelope, at the coordinates where the input was asked."""
        received = sc.PipelineEvent(
            "input_received",
            template.scope,
            step=template.step,
            candidate=template.candidate,
            candidate_step=template.candidate_step,
        )
        data = {**input_data(pending), "answer": pending.answer}
        await turn.pipeline_status([received], envelope_extra={"data": data})

    async def _wait_sideband(self, turn: Turn, step: sc.WaitSideband) -> tuple[str, ...]:
        """WORKING with ``pendingPermissions`` + ``permission_requested``; block until answered.

        The answer (``take_sideband_answer``) arrives as another request while this ``execute`` is
        still running. The turn then waits up to ``sideband_grace`` seconds for a ``SubscribeToTask``
        so that follower sees the rest of the turn, and goes on.
        """
        pending = Pending(step.request, input_projection(turn, step.request))
        projection = pending.projection
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._memory.sidebands[turn.task_id] = Sideband(pending, turn.context_id, step.event, answer)
        self.task_metadata[turn.task_id] = {
            "iacCodeSessionId": turn.session_id,
            "pendingPermissions": [copy.deepcopy(projection)],
            "executionControl": execution_control(
                turn, self._memory.instance_id, self._memory.execution_id(turn.task_id), "working"
            ),
        }
        try:
            extra = {"data": input_data(pending), "permission": projection}
            await turn.pipeline_status([step.event], envelope_extra=extra, pendingPermissions=[projection])
            decision = await answer
        finally:
            self._memory.sidebands.pop(turn.task_id, None)
        deadline = time.monotonic() + self.sideband_grace
        while not self._memory.subscribers.get(turn.task_id) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await turn.status(TaskState.TASK_STATE_WORKING, session=False, inputReceived=input_received(pending))
        await self._input_received_envelope(turn, step.event, pending)
        return (decision,)

    async def _answer_permission(self, turn: Turn, payload: dict[str, Any]) -> None:
        """Apply a (validated) permission answer; a repeated one only acknowledges."""
        input_id = str(payload["inputId"])
        received = self._memory.answered.get(turn.task_id, {}).get(input_id)
        wait = self._memory.waits.get(turn.task_id)
        pending = wait.find(input_id) if wait is not None else None
        if received is not None or wait is None or pending is None:
            await turn.status(TaskState.TASK_STATE_WORKING, session=False, inputReceived=received or {})
            return
        await self._answer(turn, wait, pending, str(payload["decision"]))

    async def _answer(self, turn: Turn, wait: Wait, pending: Pending, answer: str) -> None:
        """Record one answer; resume the script once every input of its ``Ask`` is answered."""
        pending.answer = answer
        received = input_received(pending)
        self._memory.answered.setdefault(turn.task_id, {})[str(pending.projection["inputId"])] = received
        await turn.status(TaskState.TASK_STATE_WORKING, session=False, inputReceived=received)
        if wait.pipeline is not None:
            await self._input_received_envelope(turn, wait.pipeline, pending)
        if wait.open_inputs():
            # Part of a batch: acknowledged; the stream ends and the task keeps waiting for the rest.
            meta = wait_metadata(wait)
            meta.setdefault("pendingPermissions", [])
            self.task_metadata[turn.task_id].update(meta)
            return
        del self._memory.waits[turn.task_id]
        answers = tuple(p.answer for p in wait.inputs if p.answer is not None)
        await self._run(turn, wait.script, answers)

    async def _runtime_missing(self, turn: Turn, context: RequestContext) -> None:
        """A turn that raced a cancel of its context: the kernel's FAILED with the RuntimeError text."""
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            await turn.emit(
                Task(
                    id=turn.task_id,
                    context_id=turn.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=history,
                )
            )
        message = turn.agent_message(RUNTIME_MISSING_SUFFIX, RUNTIME_MISSING_TEXT)
        await turn.status(TaskState.TASK_STATE_FAILED, message=message, timestamp=True)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish CANCELED ("Task canceled.") and stop the running script, if any.

        As the kernel, a new turn in the context fails while the cancel tears the context's runtime
        down (a task whose turn has ended is refused before this, in the request handler).
        """
        task_id = str(context.task_id)
        context_id = str(context.context_id)
        self._memory.teardowns[context_id] = self._memory.teardowns.get(context_id, 0) + 1
        try:
            await self._cancel(task_id, context_id, event_queue)
            await asyncio.sleep(self.cancel_teardown_s)
        finally:
            self._memory.teardowns[context_id] -= 1
            if not self._memory.teardowns[context_id]:
                del self._memory.teardowns[context_id]

    async def _cancel(self, task_id: str, context_id: str, event_queue: EventQueue) -> None:
        # Set first: from here on the running turn may not emit (CANCELED must be the last event).
        self._memory.cancelled.add(task_id)
        wait = self._memory.waits.pop(task_id, None)
        if wait is not None:
            wait.script.close()
        sideband = self._memory.sidebands.pop(task_id, None)
        if sideband is not None:
            sideband.answer.cancel()
        if task_id in self.pipelines:
            self.pipelines[task_id].status = "canceled"
        if task_id in self.task_metadata:
            # As iac-f2: the cancelled task keeps `permission`/`executionControl` but not `input`.
            self.task_metadata[task_id].pop("input", None)
            self.task_metadata[task_id].pop("pendingPermissions", None)
        status = TaskStatus(state=TaskState.TASK_STATE_CANCELED)
        status.message.CopyFrom(
            Message(
                message_id=f"{task_id}{CANCEL_SUFFIX}",
                context_id=context_id,
                task_id=task_id,
                role=Role.ROLE_AGENT,
                parts=[Part(text=CANCEL_TEXT)],
            )
        )
        status.timestamp.FromDatetime(stamps.now())
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                status=status,
                metadata={"iac_code": {"iacCodeSessionId": self.session_id(context_id)}},
            )
        )
        self._memory.end_task(task_id)
