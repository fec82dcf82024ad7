"""The demo agent's a2a-sdk ``AgentExecutor``: an interpreter from scenario steps to A2A events.

``scenarios`` decides *what* happens in a turn; this module decides *how it looks on the wire*,
copying the iac-code kernel's dialect (see ``../shared/fixtures/a2a-transcripts``): a ``task``
event for a new task, SUBMITTED and WORKING with ``iacCodeSessionId``, text deltas as WORKING
status messages ``<taskId>-message``, the final echo ``<taskId>-2`` with ``assistantFinal``, and
TASK_STATE_INPUT_REQUIRED without ``input`` at the end of every successful turn.

Adding a step kind (e.g. an interrupt) means: a dataclass in ``scenarios``, one ``case`` in
``_Turn.run_step``. An interrupt step would emit INPUT_REQUIRED with ``metadata.iac_code.input``,
return ``_Flow.SUSPEND`` and leave the script generator parked in ``DemoAgentExecutor._parked``;
``execute`` would then resume it with the answer instead of starting a new script.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import (
    Artifact as A2AArtifact,
)
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from agui_bridge.demo import scenarios as sc

#: messageId suffixes used by the kernel (``iac-a-text.sse``, ``iac-f2-canceltask.json``).
DELTA_SUFFIX = "-message"
FINAL_SUFFIX = "-2"
CANCEL_SUFFIX = "-5"
CANCEL_TEXT = "Task canceled."
#: A stream may fall this many events behind before the producer waits for it (the SDK evicts a
#: subscriber that is 1024 events behind, which would truncate a fast ``[LONG n]`` turn).
PACING_WINDOW = 256


class FlowControl:
    """Back-pressure between a turn's producer and the SSE streams that carry it.

    a2a-sdk drops a subscriber whose queue fills up; a scripted agent can emit far faster than a
    client reads, so the executor waits while the slowest open stream is too far behind.
    """

    def __init__(self, window: int = PACING_WINDOW) -> None:
        self._window = window
        self._produced: dict[str, int] = {}
        self._streams: dict[str, dict[object, int]] = {}
        self._changed: dict[str, asyncio.Event] = {}

    def _event(self, task_id: str) -> asyncio.Event:
        return self._changed.setdefault(task_id, asyncio.Event())

    def open_stream(self, task_id: str, stream: object) -> None:
        """Register a stream that has just delivered its first event of ``task_id``."""
        # The first event is already produced and delivered, so the stream starts level.
        self._streams.setdefault(task_id, {})[stream] = self._produced.get(task_id, 0)

    def delivered(self, task_id: str, stream: object) -> None:
        """Count one more event handed to the client by ``stream``."""
        streams = self._streams.get(task_id)
        if streams is not None and stream in streams:
            streams[stream] += 1
            self._event(task_id).set()

    def close_stream(self, task_id: str, stream: object) -> None:
        """Forget a finished or disconnected stream (a gone client must not stall the turn)."""
        streams = self._streams.get(task_id)
        if streams is not None:
            streams.pop(stream, None)
            if not streams:
                del self._streams[task_id]
        self._event(task_id).set()

    def lag(self, task_id: str) -> int:
        """How far the slowest open stream is behind the producer (0 with no stream)."""
        streams = self._streams.get(task_id)
        if not streams:
            return 0
        return self._produced.get(task_id, 0) - min(streams.values())

    async def produced(self, task_id: str) -> None:
        """Count one produced event and wait while a stream lags more than the window."""
        self._produced[task_id] = self._produced.get(task_id, 0) + 1
        while self.lag(task_id) > self._window:
            event = self._event(task_id)
            event.clear()
            await event.wait()
        # Let the consumer and the streams run: an enqueue into a non-full queue never yields.
        await asyncio.sleep(0)

    def forget(self, task_id: str) -> None:
        """Drop the counters of a task whose streams are all gone."""
        if task_id not in self._streams:
            self._produced.pop(task_id, None)
            self._changed.pop(task_id, None)


class _Flow(enum.Enum):
    """What the interpreter does after a step."""

    CONTINUE = "continue"
    STOP = "stop"


def _now() -> datetime:
    return datetime.now(UTC)


def _message_metadata_cwd(message: Message | None) -> str | None:
    """``metadata.iac_code.cwd`` of the user message, if it is a string."""
    if message is None:
        return None
    try:
        iac = message.metadata["iac_code"]
        cwd = iac["cwd"]
    except (KeyError, TypeError, ValueError):
        return None
    return cwd if isinstance(cwd, str) and cwd else None


@dataclass
class _Turn:
    """One execute() call: the ids and the text streamed so far."""

    task_id: str
    context_id: str
    session_id: str
    queue: EventQueue
    flow: FlowControl
    cancelled: set[str]
    cwd: str | None = None
    text: list[str] = field(default_factory=list)

    @property
    def is_cancelled(self) -> bool:
        return self.task_id in self.cancelled

    def agent_message(self, suffix: str, text: str) -> Message:
        return Message(
            message_id=f"{self.task_id}{suffix}",
            context_id=self.context_id,
            task_id=self.task_id,
            role=Role.ROLE_AGENT,
            parts=[Part(text=text)],
        )

    async def emit(self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        """Enqueue unless the task was cancelled (nothing may follow the CANCELED state)."""
        if self.is_cancelled:
            raise asyncio.CancelledError
        await self.queue.enqueue_event(event)
        await self.flow.produced(self.task_id)

    async def status(
        self,
        state: TaskState,
        *,
        message: Message | None = None,
        timestamp: bool = False,
        session: bool = True,
        **iac_code: Any,
    ) -> None:
        """Emit a statusUpdate whose ``metadata.iac_code`` carries the session id and extras."""
        status = TaskStatus(state=state)
        if message is not None:
            status.message.CopyFrom(message)
        if timestamp:
            status.timestamp.FromDatetime(_now())
        meta: dict[str, Any] = dict(iac_code)
        if session:
            meta["iacCodeSessionId"] = self.session_id
        await self.emit(
            TaskStatusUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                status=status,
                metadata={"iac_code": meta},
            )
        )

    async def run_step(self, step: sc.Step) -> _Flow:
        """Interpret one scenario step."""
        working = TaskState.TASK_STATE_WORKING
        match step:
            case sc.Text(delta=delta):
                self.text.append(delta)
                await self.status(working, message=self.agent_message(DELTA_SUFFIX, delta))
            case sc.Thinking(text=text):
                await self.status(working, thinking={"type": "raw_thinking", "text": text})
            case sc.Tool(status=tool_status, tool_use_id=tool_use_id, fields=fields):
                tool = {**fields, "toolUseId": tool_use_id, "status": tool_status}
                await self.status(working, tool=tool)
            case sc.Usage():
                usage = {
                    "inputTokens": step.input_tokens,
                    "outputTokens": step.output_tokens,
                    "totalTokens": step.input_tokens + step.output_tokens,
                    "cachedInputTokens": step.cached_input_tokens,
                    "provider": step.provider,
                    "model": step.model,
                }
                await self.status(working, usage=usage)
            case sc.Artifact():
                await self.emit(self.artifact_event(step))
            case sc.Sleep(seconds=seconds):
                await asyncio.sleep(seconds)
            case sc.Fail(message=text, error_id=error_id, retryable=retryable):
                await self.status(
                    TaskState.TASK_STATE_FAILED,
                    message=self.agent_message(DELTA_SUFFIX, text),
                    error={"retryable": retryable, "errorId": error_id},
                )
                return _Flow.STOP
            case sc.Final():
                await self.status(
                    working,
                    message=self.agent_message(FINAL_SUFFIX, "".join(self.text)),
                    timestamp=True,
                    assistantFinal={"complete": True},
                )
                await self.status(TaskState.TASK_STATE_INPUT_REQUIRED, timestamp=True)
                return _Flow.STOP
        return _Flow.CONTINUE

    def artifact_event(self, step: sc.Artifact) -> TaskArtifactUpdateEvent:
        """An ``artifactUpdate`` shaped like the kernel's externalised tool artifact."""
        artifact_id = str(uuid.uuid4())
        uri = f"iac-code-artifact://{artifact_id}/{step.name}"
        meta: dict[str, Any] = {
            "sha256": step.sha256,
            "byteSize": step.byte_size,
            "mediaType": step.media_type,
            "uri": uri,
        }
        if self.cwd:
            meta["sourcePath"] = f"{self.cwd.rstrip('/')}/{step.name}"
        part = Part(url=uri, filename=step.name, media_type=step.media_type, metadata=meta)
        artifact = A2AArtifact(artifact_id=artifact_id, name=step.name, parts=[part], metadata=meta)
        return TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
        )


class DemoAgentExecutor(AgentExecutor):
    """Runs one scripted turn per message; sessions are per contextId, like the kernel's."""

    def __init__(self, flow: FlowControl | None = None) -> None:
        self.flow = flow or FlowControl()
        self._sessions: dict[str, str] = {}
        self._cancelled: set[str] = set()

    def session_id(self, context_id: str) -> str:
        """The ``iacCodeSessionId`` of a context: a uuid4 chosen on first sight, then stable."""
        return self._sessions.setdefault(context_id, str(uuid.uuid4()))

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish the task (if new), SUBMITTED, WORKING, then interpret the scenario's steps."""
        task_id = str(context.task_id)
        context_id = str(context.context_id)
        turn = _Turn(
            task_id=task_id,
            context_id=context_id,
            session_id=self.session_id(context_id),
            queue=event_queue,
            flow=self.flow,
            cancelled=self._cancelled,
            cwd=_message_metadata_cwd(context.message),
        )
        try:
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
            script = sc.script_for(context.get_user_input())
            outcome: object = None
            while True:
                try:
                    step = script.send(outcome)
                except StopIteration:
                    break
                if await turn.run_step(step) is _Flow.STOP:
                    break
                outcome = None
        finally:
            self.flow.forget(task_id)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish CANCELED ("Task canceled.") and stop the running script, if any."""
        task_id = str(context.task_id)
        context_id = str(context.context_id)
        # Set first: from here on the running turn may not emit (CANCELED must be the last event).
        self._cancelled.add(task_id)
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
        status.timestamp.FromDatetime(_now())
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                status=status,
                metadata={"iac_code": {"iacCodeSessionId": self.session_id(context_id)}},
            )
        )
