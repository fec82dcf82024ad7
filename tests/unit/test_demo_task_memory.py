"""The demo agent frees a task's per-task state when the task ends (cancelled or failed)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from a2a.types import TaskState

from agui_bridge.demo.executor import ENDED_TASKS_KEPT, DemoAgentExecutor


@dataclass
class _Context:
    """The part of a2a-sdk's RequestContext the executor reads."""

    task_id: str
    context_id: str
    text: str = ""
    message: None = None
    current_task: None = None

    def get_user_input(self) -> str:
        return self.text


@dataclass
class _Queue:
    events: list[object] = field(default_factory=list)

    async def enqueue_event(self, event: object) -> None:
        self.events.append(event)


def _state(event: object) -> object:
    return event.status.state if hasattr(event, "status") else None


async def _turn(executor: DemoAgentExecutor, task_id: str, text: str) -> _Queue:
    queue = _Queue()
    await executor.execute(_Context(task_id, "ctx-1", text), queue)  # type: ignore[arg-type]
    return queue


async def _cancel(executor: DemoAgentExecutor, task_id: str) -> _Queue:
    queue = _Queue()
    await executor.cancel(_Context(task_id, "ctx-1"), queue)  # type: ignore[arg-type]
    return queue


def test_a_cancelled_waiting_task_keeps_only_its_read_only_views() -> None:
    async def scenario() -> None:
        executor = DemoAgentExecutor()
        await _turn(executor, "task-1", "write file")
        assert "waits" in executor.tables_holding("task-1")  # parked on the permission
        assert "executions" in executor.tables_holding("task-1")
        await _cancel(executor, "task-1")
        # GetTask still shows the cancelled task's overlay (until the task ages out, below).
        assert sorted(executor.tables_holding("task-1")) == ["cancelled", "task_metadata"]

    asyncio.run(scenario())


def test_a_failed_task_frees_its_working_state() -> None:
    async def scenario() -> None:
        executor = DemoAgentExecutor()
        queue = await _turn(executor, "task-f", "please fail")
        assert TaskState.TASK_STATE_FAILED in [_state(event) for event in queue.events]
        assert executor.tables_holding("task-f") == []

    asyncio.run(scenario())


def test_ended_tasks_are_forgotten_beyond_the_window() -> None:
    async def scenario() -> None:
        executor = DemoAgentExecutor()
        ids = [f"task-{n}" for n in range(ENDED_TASKS_KEPT + 2)]
        for task_id in ids:
            await _turn(executor, task_id, "write file")
            await _cancel(executor, task_id)
        assert executor.tables_holding(ids[0]) == []
        assert executor.tables_holding(ids[1]) == []
        assert "task_metadata" in executor.tables_holding(ids[-1])

    asyncio.run(scenario())


def test_a_waiting_task_keeps_its_state_until_it_ends() -> None:
    async def scenario() -> None:
        executor = DemoAgentExecutor()
        await _turn(executor, "task-w", "write file")
        held = executor.tables_holding("task-w")
        assert "waits" in held
        assert "task_metadata" in held

    asyncio.run(scenario())
