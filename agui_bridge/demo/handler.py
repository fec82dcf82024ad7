"""The demo agent's a2a-sdk request handler and task store, where they differ from the SDK's to answer like the
kernel: bounded task history with the executor's task-level metadata, paced streams, sideband answers taken
before the SDK queues them, and the kernel's cancel and ``SubscribeToTask`` refusals.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    CancelTaskRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from a2a.utils.task import apply_history_length

from agui_bridge.demo.executor import DemoAgentExecutor
from agui_bridge.demo.flow import FlowControl

#: States that end a turn: a ``SubscribeToTask`` stream stops after the first event in one of them.
_TURN_ENDING_STATES = frozenset(
    {
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
#: Terminal states: the SDK itself refuses to cancel a task in one of them.
_TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
#: Task history kept per task (first message + the most recent ones): a ``[LONG 100000]`` turn
#: would otherwise make every event copy an ever-growing history (quadratic time).
HISTORY_LIMIT = 200


class BoundedHistoryTaskStore(InMemoryTaskStore):
    """InMemoryTaskStore that trims each saved task's history in place (see HISTORY_LIMIT).

    For a task that has asked for input, the saved ``metadata.iac_code`` is the executor's
    task-level view (``input``, ``permission``, ``executionControl``...), which later turns do not
    clear: ``GetTask`` after the answer still shows the old input, as the kernel's does.
    """

    def __init__(self, task_metadata: Mapping[str, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._task_metadata: Mapping[str, dict[str, Any]] = task_metadata if task_metadata is not None else {}

    def apply_overlay(self, task: Task) -> None:
        """Replace ``task.metadata`` (in place) by the executor's current task-level view, if any."""
        overlay = self._task_metadata.get(task.id)
        if overlay is not None:
            task.metadata.Clear()
            task.metadata.update({"iac_code": copy.deepcopy(overlay)})

    async def save(self, task: Task, context: ServerCallContext) -> None:
        excess = len(task.history) - HISTORY_LIMIT
        if excess > 0:
            # In place on purpose: the SDK's TaskManager keeps this very object as its snapshot.
            del task.history[1 : 1 + excess]
        self.apply_overlay(task)
        await super().save(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        # A copy (InMemoryTaskStore copies): refreshed with the view as it is *now*, e.g. the empty
        # ``pendingPermissions`` right after a sideband answer, before the next event is saved.
        task = await super().get(task_id, context)
        if task is not None:
            self.apply_overlay(task)
        return task


class PacedRequestHandler(DefaultRequestHandler):
    """DefaultRequestHandler that reports each streamed event to the executor's FlowControl.

    It also answers like the kernel where a2a-sdk differs: a permission answer is validated before
    any stream starts (JSON-RPC -32602), and ``SubscribeToTask`` on a task with no running turn is
    ``-32001 "Task <id> is not active"``; on a running turn it ends after the first event whose
    state ends the turn (the SDK's would stay open after INPUT_REQUIRED).

    Sideband Pipeline answers: a2a-sdk runs the messages of one task one at a time (the next
    ``execute`` starts only after the running one returned), so a permission answer for a turn
    that is *still running* (waiting in ``WaitSideband``) would queue behind the very turn it has to
    unblock. Such an answer is therefore taken here, before the SDK sees it: it is validated,
    handed to the parked script (``DemoAgentExecutor.take_sideband_answer``) and the request is
    answered at once with the current Task (unary) or a one-event stream of it (streaming).
    """

    def __init__(
        self, flow: FlowControl, executor: DemoAgentExecutor, task_store: BoundedHistoryTaskStore, **kwargs: Any
    ) -> None:
        super().__init__(agent_executor=executor, task_store=task_store, **kwargs)
        self._flow = flow
        self._demo = executor
        self._store = task_store

    async def _current_task(self, task_id: str, params: SendMessageRequest, context: ServerCallContext) -> Task:
        task = await self._store.get(task_id, context)
        if task is None:
            raise TaskNotFoundError(message=f"Task {task_id} not found")
        return apply_history_length(task, params.configuration)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        sideband_task = self._demo.take_sideband_answer(params.message)
        if sideband_task is not None:
            return await self._current_task(sideband_task, params, context)
        self._demo.validate_answer(params.message)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """As the kernel: an unknown task is "Task <id> not found"; a task whose turn has ended (not
        running, nothing waiting) is -32002 "Task cannot be canceled" and stays INPUT_REQUIRED."""
        task = await self._store.get(params.id, context)
        if task is None:
            raise TaskNotFoundError(message=f"Task {params.id} not found")
        if task.status.state not in _TERMINAL_STATES and not self._demo.is_cancelable(params.id):
            raise TaskNotCancelableError()
        result: Task | None = await super().on_cancel_task(params, context)
        return result

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        task_id = params.id
        if not self._demo.is_running(task_id):
            raise TaskNotFoundError(message=f"Task {task_id} is not active")
        stream = object()
        attached = False
        try:
            async with contextlib.aclosing(super().on_subscribe_to_task(params, context)) as events:
                async for event in events:
                    if attached:
                        yield event
                        self._flow.delivered(task_id, stream)
                    else:
                        # The first event is the SDK's snapshot, sent after its queue tap exists:
                        # from here on this stream sees every new event of the turn.
                        attached = True
                        self._demo.subscriber_attached(task_id)
                        self._flow.open_stream(task_id, stream)
                        if isinstance(event, Task):
                            # The SDK hands out its shared snapshot object: copy, then refresh.
                            snapshot = Task()
                            snapshot.CopyFrom(event)
                            self._store.apply_overlay(snapshot)
                            event = snapshot
                        yield event
                    if isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in _TURN_ENDING_STATES:
                        return
        finally:
            if attached:
                self._demo.subscriber_detached(task_id)
                self._flow.close_stream(task_id, stream)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        sideband_task = self._demo.take_sideband_answer(params.message)
        if sideband_task is not None:
            yield await self._current_task(sideband_task, params, context)
            return
        self._demo.validate_answer(params.message)
        stream = object()
        task_id: str | None = None
        try:
            async for event in super().on_message_send_stream(params, context):
                if task_id is None:
                    task_id = str(event.id if isinstance(event, Task) else event.task_id)
                    self._flow.open_stream(task_id, stream)
                yield event
                self._flow.delivered(task_id, stream)
        finally:
            if task_id is not None:
                self._flow.close_stream(task_id, stream)
