"""One demo turn on the wire: the interpreter from scenario steps to A2A events in the kernel's dialect
(``tests/fixtures/a2a-transcripts``): text deltas as WORKING status messages ``<taskId>-message``, the final
echo ``<taskId>-2`` with ``assistantFinal``, and INPUT_REQUIRED without ``input`` at the end of every
successful turn. Adding a step kind means: a dataclass in ``scenarios``, one ``case`` in ``Turn.run_step``.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from agui_bridge.demo import stamps
from agui_bridge.demo.flow import FlowControl
from agui_bridge.demo.pipeline import PipelineRun

#: messageId suffixes used by the kernel (``iac-a-text.sse``, ``iac-f2-canceltask.json``).
DELTA_SUFFIX = "-message"
FINAL_SUFFIX = "-2"
CANCEL_SUFFIX = "-5"
CANCEL_TEXT = "Task canceled."
#: As the kernel: while a cancel tears a context's runtime down, a new turn in that context fails.
RUNTIME_MISSING_TEXT = "RuntimeError: A2A context runtime missing"
RUNTIME_MISSING_SUFFIX = "-4"


class StepFlow(enum.Enum):
    """What the interpreter does after a step."""

    CONTINUE = "continue"
    STOP = "stop"
    SUSPEND = "suspend"


@dataclass
class Turn:
    """One execute() call: the ids and the text streamed so far."""

    task_id: str
    context_id: str
    session_id: str
    queue: EventQueue
    flow: FlowControl
    cancelled: set[str]
    cwd: str | None = None
    text: list[str] = field(default_factory=list)
    #: ``tool.artifact`` objects of artifacts produced for a tool, by toolUseId.
    tool_artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The executor's Pipeline runs by taskId (shared), and its hook run after new envelopes.
    pipelines: dict[str, PipelineRun] = field(default_factory=dict)
    on_pipeline: Callable[[str], None] | None = None

    def pipeline_run(self) -> PipelineRun:
        """This task's Pipeline run (created by its first envelope; one per task)."""
        run = self.pipelines.get(self.task_id)
        if run is None:
            run = PipelineRun(self.task_id, self.context_id, self.session_id)
            self.pipelines[self.task_id] = run
        return run

    async def pipeline_status(
        self,
        events: Sequence[sc.PipelineEvent],
        *,
        batch: bool = False,
        envelope_extra: dict[str, Any] | None = None,
        **iac_code: Any,
    ) -> list[dict[str, Any]]:
        """A WORKING status with ``pipeline`` (one envelope) or ``pipelineBatch`` (``batch``)."""
        run = self.pipeline_run()
        envelopes = [run.envelope(event, **copy.deepcopy(envelope_extra or {})) for event in events]
        if self.on_pipeline is not None:
            self.on_pipeline(self.task_id)
        if batch:
            iac_code["pipelineBatch"] = {"events": envelopes}
        else:
            (iac_code["pipeline"],) = envelopes
        await self.status(TaskState.TASK_STATE_WORKING, **iac_code)
        return envelopes

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
            status.timestamp.FromDatetime(stamps.now())
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

    async def run_step(self, step: sc.Step) -> StepFlow:
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
                if tool_status == "completed" and tool_use_id in self.tool_artifacts:
                    tool["artifact"] = self.tool_artifacts.pop(tool_use_id)
                await self.status(working, tool=tool)
            case sc.Usage():
                await self.status(working, usage=step.fields())
            case sc.PipelineEvent():
                await self.pipeline_status([step])
            case sc.PipelineBatch(events=events):
                await self.pipeline_status(events, batch=True)
            case sc.Artifact():
                event, meta = self.artifact_event(step)
                if step.tool_use_id is not None:
                    self.tool_artifacts[step.tool_use_id] = {
                        **meta,
                        "artifactId": event.artifact.artifact_id,
                        "filename": step.name,
                    }
                await self.emit(event)
            case sc.Ask():
                return StepFlow.SUSPEND
            case sc.Sleep(seconds=seconds):
                await asyncio.sleep(seconds)
            case sc.Fail(message=text, error_id=error_id, retryable=retryable):
                await self.status(
                    TaskState.TASK_STATE_FAILED,
                    message=self.agent_message(DELTA_SUFFIX, text),
                    error={"retryable": retryable, "errorId": error_id},
                )
                return StepFlow.STOP
            case sc.Final():
                await self.status(
                    working,
                    message=self.agent_message(FINAL_SUFFIX, "".join(self.text)),
                    timestamp=True,
                    assistantFinal={"complete": True},
                )
                await self.status(TaskState.TASK_STATE_INPUT_REQUIRED, timestamp=True)
                return StepFlow.STOP
        return StepFlow.CONTINUE

    def artifact_event(self, step: sc.Artifact) -> tuple[TaskArtifactUpdateEvent, dict[str, Any]]:
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
        part = (
            Part(text=step.content, filename=step.name, media_type=step.media_type, metadata=meta)
            if step.inline
            else Part(url=uri, filename=step.name, media_type=step.media_type, metadata=meta)
        )
        artifact = A2AArtifact(artifact_id=artifact_id, name=step.name, parts=[part], metadata=meta)
        event = TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
        )
        return event, meta
