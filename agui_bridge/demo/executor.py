"""The demo agent's a2a-sdk ``AgentExecutor``: an interpreter from scenario steps to A2A events.

``scenarios`` decides *what* happens in a turn; this module decides *how it looks on the wire*,
copying the iac-code kernel's dialect (see ``../shared/fixtures/a2a-transcripts``): a ``task``
event for a new task, SUBMITTED and WORKING with ``iacCodeSessionId``, text deltas as WORKING
status messages ``<taskId>-message``, the final echo ``<taskId>-2`` with ``assistantFinal``, and
TASK_STATE_INPUT_REQUIRED without ``input`` at the end of every successful turn.

Adding a step kind means: a dataclass in ``scenarios``, one ``case`` in ``_Turn.run_step``. The
``Ask`` step returns ``_Flow.SUSPEND``: ``DemoAgentExecutor`` emits INPUT_REQUIRED with
``metadata.iac_code.input`` and parks the script in ``_waits``; ``execute`` resumes it once every
input is answered instead of starting a new script (matching rules: demo/README.md "Interrupts").

Pipeline steps become envelopes numbered by a per-task ``PipelineRun`` (which keeps every envelope
for ``/iac-code/pipeline/state``). ``WaitSideband`` blocks inside ``execute`` on a future that
``take_sideband_answer`` (called by the server for a unary ``SendMessage``) resolves, so the turn
goes on in the background while the answer's request returns at once (README "Pipeline").
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import time
import uuid
from collections.abc import Callable, Sequence
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
from a2a.utils.errors import InvalidParamsError

from agui_bridge.demo import scenarios as sc

#: messageId suffixes used by the kernel (``iac-a-text.sse``, ``iac-f2-canceltask.json``).
DELTA_SUFFIX = "-message"
FINAL_SUFFIX = "-2"
CANCEL_SUFFIX = "-5"
CANCEL_TEXT = "Task canceled."
#: As the kernel: while a cancel tears a context's runtime down, a new turn in that context fails.
RUNTIME_MISSING_TEXT = "RuntimeError: A2A context runtime missing"
RUNTIME_MISSING_SUFFIX = "-4"
#: How long the demo's cancel of a running or waiting task keeps its context's runtime torn down
#: (the kernel drops it while the cancel lands; the demo makes the window wide enough to be seen).
CANCEL_TEARDOWN_S = 0.2
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
    SUSPEND = "suspend"


#: The exact keys of a permission answer data part (behaviour.md 4.2); the text form
#: ``IAC_CODE_PERMISSION:{...}`` may add ``contextId``.
PERMISSION_ANSWER_KEYS = frozenset({"schemaVersion", "kind", "requestTaskId", "inputId", "toolUseId", "decision"})
PERMISSION_TEXT_PREFIX = "IAC_CODE_PERMISSION:"
PAYLOAD_MISMATCH = "Permission response payload fields do not match schemaVersion 1."
NOT_ACTIVE = "permission_resume_invalid: pending permission is not active."
#: Marker in a user text that makes ``ensure-restored`` answer 409 for that turn's session.
BACKUP_NOT_READY_MARKER = "[backup_not_ready]"
#: ``extensionUri`` of every Pipeline envelope.
PIPELINE_EXTENSION_URI = "https://iac-code.dev/extensions/pipeline/v1"
#: How many of the latest envelopes ``GetTask`` shows (``metadata.iac_code.pipelineBatch``).
PIPELINE_TASK_SUFFIX = 16
#: After a sideband answer the turn waits this long for a ``SubscribeToTask`` before it goes on, so
#: the follower sees every later event (the kernel goes on at once; see README "Pipeline").
SIDEBAND_SUBSCRIBE_GRACE = 3.0
#: Pipeline-level ``status`` after these event types (the snapshot's ``status``).
_RUN_STATUS = {
    "pipeline_started": "running",
    "input_required": "waiting_input",
    "permission_requested": "waiting_permission",
    "input_received": "running",
    "pipeline_completed": "completed",
    "pipeline_error": "failed",
}


@dataclass
class _Pending:
    """One asked input: the script's request and the projection sent on the wire."""

    request: sc.InputRequest
    projection: dict[str, Any]
    answer: str | None = None


@dataclass
class _Wait:
    """A script parked on a task until every input of its ``Ask`` step is answered."""

    script: sc.Script
    inputs: list[_Pending]
    #: The ``input_required`` envelope template of a Pipeline ``Ask`` (coordinates of the answer).
    pipeline: sc.PipelineEvent | None = None

    def open_inputs(self) -> list[_Pending]:
        return [p for p in self.inputs if p.answer is None]

    def find(self, input_id: str) -> _Pending | None:
        return next((p for p in self.open_inputs() if p.projection["inputId"] == input_id), None)


def _value_to_python(value: Any) -> Any:
    """A ``google.protobuf.Value`` (a data part) as plain JSON-like Python."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {k: _value_to_python(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_value_to_python(v) for v in value.list_value.values]
    if kind in (None, "null_value"):
        return None
    return getattr(value, kind)


def permission_payload(message: Message | None) -> dict[str, Any] | None:
    """The permission answer of a user message: its data part, or the ``IAC_CODE_PERMISSION:`` text."""
    if message is None:
        return None
    for part in message.parts:
        if part.HasField("data"):
            data = _value_to_python(part.data)
            return data if isinstance(data, dict) else {}
        if part.text.startswith(PERMISSION_TEXT_PREFIX):
            try:
                value = json.loads(part.text[len(PERMISSION_TEXT_PREFIX) :])
            except ValueError:
                return {}
            if isinstance(value, dict):
                value.pop("contextId", None)
                return value
            return {}
    return None


def _payload_matches_schema(payload: dict[str, Any]) -> bool:
    return (
        set(payload) == PERMISSION_ANSWER_KEYS
        and payload["schemaVersion"] == 1
        and payload["kind"] == sc.PERMISSION
        and payload["decision"] in (sc.ALLOW_ONCE, sc.DENY)
        and all(isinstance(payload[k], str) for k in ("requestTaskId", "inputId", "toolUseId"))
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hex_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


@dataclass
class PipelineRun:
    """One task's Pipeline run: numbering, run ids, every envelope sent, and the snapshot state."""

    task_id: str
    context_id: str
    session_id: str
    name: str = sc.PIPELINE_NAME
    run_id: str = field(default_factory=lambda: _hex_id("prun"))
    sequence: int = 0
    status: str = "running"
    events: list[dict[str, Any]] = field(default_factory=list)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)
    candidate_steps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    open_steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending_inputs: list[str] = field(default_factory=list)
    selected: str | None = None
    current_step: str | None = None
    updated_at: str = field(default_factory=lambda: _rfc3339(_now()))

    def _step_run(self, step: sc.PipelineStep, start: bool) -> dict[str, Any]:
        known = self.steps.get(step.id)
        if known is None or start:
            attempt = known["attempt"] + 1 if known is not None else 1
            known = {
                "id": step.id,
                "runId": _hex_id("srun"),
                "attempt": attempt,
                "index": step.index,
                "total": step.total,
            }
            self.steps[step.id] = {**known, "status": "pending"}
        return {k: self.steps[step.id][k] for k in ("id", "runId", "attempt", "index", "total")}

    def _candidate_run(self, candidate_id: str, start: bool) -> dict[str, Any]:
        known = self.candidates.get(candidate_id)
        if known is None or start:
            known = {"id": candidate_id, "runId": _hex_id("crun"), "status": "pending"}
            self.candidates[candidate_id] = known
        return {"id": candidate_id, "runId": known["runId"]}

    def _candidate_step_run(self, candidate_id: str, step_id: str, start: bool) -> dict[str, Any]:
        key = (candidate_id, step_id)
        known = self.candidate_steps.get(key)
        if known is None or start:
            known = {"id": step_id, "runId": _hex_id("csrun"), "candidateId": candidate_id, "status": "pending"}
            self.candidate_steps[key] = known
        return {"id": step_id, "runId": known["runId"]}

    def envelope(self, event: sc.PipelineEvent, **extra: Any) -> dict[str, Any]:
        """Number ``event`` and record it; ``extra`` adds top-level keys (``data`` is merged)."""
        kind = event.event_type
        self.sequence += 1
        now = _now()
        envelope: dict[str, Any] = {
            "schemaVersion": 1,
            "extensionUri": PIPELINE_EXTENSION_URI,
            "eventId": _hex_id("evt"),
            "sequence": self.sequence,
            "createdAt": _rfc3339(now),
            "eventType": kind,
            "scope": event.scope,
            "pipelineRunId": self.run_id,
            "taskId": self.task_id,
            "contextId": self.context_id,
            "pipelineName": self.name,
            "status": event.status or sc.default_status(kind),
            "data": {**copy.deepcopy(event.data), **copy.deepcopy(extra.pop("data", {}))},
            "iacCodeSessionId": self.session_id,
        }
        if event.step is not None:
            envelope["step"] = self._step_run(event.step, kind == "step_started")
        if event.candidate is not None:
            envelope["candidate"] = self._candidate_run(event.candidate, kind == "candidate_started")
            if event.candidate_step is not None:
                started = kind == "candidate_step_started"
                envelope["candidateStep"] = self._candidate_step_run(event.candidate, event.candidate_step, started)
        envelope.update(copy.deepcopy(extra))
        self._track(envelope)
        self.updated_at = envelope["createdAt"]
        self.events.append(envelope)
        return copy.deepcopy(envelope)

    def _track(self, envelope: dict[str, Any]) -> None:
        """Update the snapshot state (open steps as the bridge keys them, behaviour.md 5.6)."""
        kind = envelope["eventType"]
        step = envelope.get("step")
        candidate = envelope.get("candidate")
        candidate_step = envelope.get("candidateStep")
        self.status = _RUN_STATUS.get(kind, self.status)
        if kind in ("step_started", "step_completed", "step_failed") and step is not None:
            self.steps[step["id"]]["status"] = envelope["status"]
            key = f"step:{step['id']}"
            if kind == "step_started":
                self.current_step = step["id"]
                self.open_steps[key] = {"key": key, "scope": "step", "stepId": step["id"], "runId": step["runId"]}
            else:
                self.open_steps.pop(key, None)
        if kind.startswith("candidate_step_") and candidate is not None and candidate_step is not None:
            self.candidate_steps[(candidate["id"], candidate_step["id"])]["status"] = envelope["status"]
            key = f"candidate:{candidate['id']}:{candidate_step['id']}"
            if kind == "candidate_step_started":
                self.open_steps[key] = {
                    "key": key,
                    "scope": "candidate_step",
                    "stepId": candidate_step["id"],
                    "runId": candidate_step["runId"],
                    "candidateId": candidate["id"],
                    "candidateRunId": candidate["runId"],
                }
            else:
                self.open_steps.pop(key, None)
        if kind in ("candidate_started", "candidate_completed", "candidate_failed") and candidate is not None:
            self.candidates[candidate["id"]]["status"] = envelope["status"]
            if "name" in envelope["data"]:
                self.candidates[candidate["id"]]["name"] = envelope["data"]["name"]
        if kind == "candidate_selected" and candidate is not None:
            self.selected = candidate["id"]
        input_id = envelope["data"].get("inputId")
        if kind in ("input_required", "permission_requested") and isinstance(input_id, str):
            self.pending_inputs.append(input_id)
        if kind == "input_received" and input_id in self.pending_inputs:
            self.pending_inputs.remove(input_id)

    def snapshot(self) -> dict[str, Any]:
        """The ``snapshot`` object of ``/iac-code/pipeline/state``."""
        return {
            "schemaVersion": 1,
            "extensionUri": PIPELINE_EXTENSION_URI,
            "pipelineRunId": self.run_id,
            "pipelineName": self.name,
            "taskId": self.task_id,
            "contextId": self.context_id,
            "iacCodeSessionId": self.session_id,
            "status": self.status,
            "lastSequence": self.sequence,
            "updatedAt": self.updated_at,
            "currentStep": self.current_step,
            "openSteps": [copy.deepcopy(self.open_steps[key]) for key in sorted(self.open_steps)],
            "steps": copy.deepcopy(list(self.steps.values())),
            "candidates": copy.deepcopy(list(self.candidates.values())),
            "selectedCandidate": self.selected,
            "pendingInputs": list(self.pending_inputs),
        }

    def state(self, after_sequence: int) -> dict[str, Any]:
        """The ``/iac-code/pipeline/state`` body: the snapshot and every envelope after the cursor."""
        events = [copy.deepcopy(e) for e in self.events if e["sequence"] > after_sequence]
        return {"snapshot": self.snapshot(), "events": events}


def _message_metadata_str(message: Message | None, *keys: str) -> str | None:
    """The first non-empty string ``metadata.iac_code.<key>`` of the user message."""
    if message is None:
        return None
    try:
        iac = message.metadata["iac_code"]
    except (KeyError, TypeError, ValueError):
        return None
    for key in keys:
        try:
            value = iac[key]
        except (KeyError, TypeError, ValueError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


def _message_metadata_cwd(message: Message | None) -> str | None:
    """``metadata.iac_code.cwd`` of the user message, if it is a string."""
    return _message_metadata_str(message, "cwd")


def _message_run_mode(message: Message | None) -> str | None:
    """``metadata.iac_code.run_mode`` (``runMode`` accepted too) of the user message."""
    return _message_metadata_str(message, "run_mode", "runMode")


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
                return _Flow.SUSPEND
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
        part = Part(url=uri, filename=step.name, media_type=step.media_type, metadata=meta)
        artifact = A2AArtifact(artifact_id=artifact_id, name=step.name, parts=[part], metadata=meta)
        event = TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
        )
        return event, meta


@dataclass
class _Sideband:
    """A Pipeline permission wait inside a running turn (``WaitSideband``)."""

    pending: _Pending
    context_id: str
    event: sc.PipelineEvent
    answer: asyncio.Future[str]


class DemoAgentExecutor(AgentExecutor):
    """Runs one scripted turn per message; sessions are per contextId, like the kernel's.

    A script that yields ``Ask`` is parked on its task (``_waits``) after INPUT_REQUIRED; the next
    message on that task is matched against the pending inputs (see ``execute``). A script that
    yields ``WaitSideband`` stays inside its ``execute`` call (``_sidebands``) until
    ``take_sideband_answer`` resolves it.
    """

    def __init__(self, flow: FlowControl | None = None) -> None:
        self.flow = flow or FlowControl()
        self._sessions: dict[str, str] = {}
        self._cancelled: set[str] = set()
        self._running: set[str] = set()
        self._waits: dict[str, _Wait] = {}
        #: inputIds already answered, per task (a second answer is a no-op ``inputReceived``).
        self._answered: dict[str, dict[str, dict[str, Any]]] = {}
        #: ``metadata.iac_code`` of tasks that have asked for input, as ``GetTask`` shows it: set
        #: when the task starts waiting and never cleared by later turns (stale, as the kernel's).
        self.task_metadata: dict[str, dict[str, Any]] = {}
        self._executions: dict[str, str] = {}
        self._backup_not_ready: set[str] = set()
        self._instance_id = f"instance-{uuid.uuid4().hex}"
        #: Pipeline runs by taskId; every envelope stays here for ``/iac-code/pipeline/state``.
        self.pipelines: dict[str, PipelineRun] = {}
        self._sidebands: dict[str, _Sideband] = {}
        #: inputIds of accepted sideband answers, per task (a repeat is a no-op).
        self._sideband_answered: dict[str, set[str]] = {}
        #: Open ``SubscribeToTask`` streams per task (a sideband answer waits for one).
        self._subscribers: dict[str, int] = {}
        self.sideband_grace = SIDEBAND_SUBSCRIBE_GRACE
        #: contextIds whose runtime a cancel is tearing down (count of cancels in progress).
        self._teardowns: dict[str, int] = {}
        self.cancel_teardown_s = CANCEL_TEARDOWN_S

    def session_id(self, context_id: str) -> str:
        """The ``iacCodeSessionId`` of a context: a uuid4 chosen on first sight, then stable."""
        return self._sessions.setdefault(context_id, str(uuid.uuid4()))

    def session_status(self, session_id: str) -> str | None:
        """``current`` for a known session, ``None`` if unknown; a session marked ``[BACKUP_NOT_READY]``
        answers ``backup_not_ready`` once, as a backup that finishes syncing before the retry."""
        if session_id in self._backup_not_ready:
            self._backup_not_ready.discard(session_id)
            return "backup_not_ready"
        return "current" if session_id in self._sessions.values() else None

    def is_cancelable(self, task_id: str) -> bool:
        """A turn of ``task_id`` runs or waits for an answer; a finished turn cannot be cancelled."""
        return task_id in self._running or task_id in self._waits or task_id in self._sidebands

    def is_running(self, task_id: str) -> bool:
        """True while a turn of ``task_id`` is executing (``SubscribeToTask`` is allowed)."""
        return task_id in self._running

    def pipeline_state(self, task_id: str, after_sequence: int) -> dict[str, Any] | None:
        """``/iac-code/pipeline/state`` of a task: snapshot + envelopes after the cursor; None if none."""
        run = self.pipelines.get(task_id)
        return run.state(after_sequence) if run is not None else None

    def subscriber_attached(self, task_id: str) -> None:
        """A ``SubscribeToTask`` stream of ``task_id`` now receives live events."""
        self._subscribers[task_id] = self._subscribers.get(task_id, 0) + 1

    def subscriber_detached(self, task_id: str) -> None:
        """A ``SubscribeToTask`` stream of ``task_id`` ended."""
        left = self._subscribers.get(task_id, 0) - 1
        if left > 0:
            self._subscribers[task_id] = left
        else:
            self._subscribers.pop(task_id, None)

    def take_sideband_answer(self, message: Message) -> str | None:
        """Apply a permission answer to the running turn's sideband wait; its taskId if taken.

        ``None`` when the message is not an answer to an open (or already accepted) sideband
        permission: the caller then handles it as an ordinary message. A repeated answer to an
        accepted sideband permission is taken as a no-op. Raises ``InvalidParamsError`` like
        ``validate_answer`` (schema) and for a contextId that is not the task's.
        """
        payload = permission_payload(message)
        if payload is None:
            return None
        if not _payload_matches_schema(payload):
            raise InvalidParamsError(message=PAYLOAD_MISMATCH)
        task_id = message.task_id
        input_id = str(payload["inputId"])
        if input_id in self._sideband_answered.get(task_id, set()):
            return task_id
        sideband = self._sidebands.get(task_id)
        if sideband is None or sideband.pending.projection["inputId"] != input_id:
            return None
        if message.context_id and message.context_id != sideband.context_id:
            raise InvalidParamsError(
                message=f"Context {message.context_id} does not match context {sideband.context_id} of task {task_id}"
            )
        if payload["requestTaskId"] != task_id or payload["toolUseId"] != sideband.pending.projection.get("toolUseId"):
            raise InvalidParamsError(message=NOT_ACTIVE)
        sideband.pending.answer = str(payload["decision"])
        self._sideband_answered.setdefault(task_id, set()).add(input_id)
        self._answered.setdefault(task_id, {})[input_id] = self._received(sideband.pending)
        if task_id in self.task_metadata:
            # As the kernel's snapshot after a sideband answer: an explicit empty list.
            self.task_metadata[task_id]["pendingPermissions"] = []
            self.task_metadata[task_id]["executionControl"]["executionStatus"] = "working"
        if not sideband.answer.done():
            sideband.answer.set_result(sideband.pending.answer)
        return task_id

    def _sync_pipeline_overlay(self, task_id: str) -> None:
        """Keep the latest envelopes in the task-level metadata ``GetTask`` shows."""
        run = self.pipelines.get(task_id)
        if run is None:
            return
        meta = self.task_metadata.setdefault(task_id, {"iacCodeSessionId": run.session_id})
        meta["pipelineBatch"] = {"events": copy.deepcopy(run.events[-PIPELINE_TASK_SUFFIX:])}

    def validate_answer(self, message: Message) -> None:
        """Reject a permission answer the way the kernel does, before any stream starts.

        Raises ``InvalidParamsError`` (-32602) for a payload that is not the six-key schemaVersion 1
        shape, or whose inputId is neither pending on the task nor already answered.
        """
        payload = permission_payload(message)
        if payload is None:
            return
        if not _payload_matches_schema(payload):
            raise InvalidParamsError(message=PAYLOAD_MISMATCH)
        task_id = message.task_id
        input_id = payload["inputId"]
        if input_id in self._answered.get(task_id, {}):
            return
        wait = self._waits.get(task_id)
        pending = wait.find(input_id) if wait is not None else None
        if (
            pending is None
            or pending.request.kind != sc.PERMISSION
            or payload["requestTaskId"] != task_id
            or payload["toolUseId"] != pending.projection.get("toolUseId")
        ):
            raise InvalidParamsError(message=NOT_ACTIVE)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start a turn, or resume a parked one with the answer this message carries."""
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
            pipelines=self.pipelines,
            on_pipeline=self._sync_pipeline_overlay,
        )
        self._running.add(task_id)
        try:
            payload = permission_payload(context.message)
            if payload is not None:
                await self._answer_permission(turn, payload)
                return
            text = context.get_user_input()
            wait = self._waits.get(task_id)
            question = next((p for p in wait.open_inputs() if p.request.kind != sc.PERMISSION), None) if wait else None
            if wait is not None and question is not None:
                await self._answer(turn, wait, question, text)
                return
            if self._teardowns.get(context_id):
                await self._runtime_missing(turn, context)
                return
            if BACKUP_NOT_READY_MARKER in text.lower():
                self._backup_not_ready.add(turn.session_id)
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
            scenario = sc.select_scenario(text, _message_run_mode(context.message))
            if wait is not None and scenario.name in sc.INTERRUPT_SCENARIOS:
                # Guidance while a permission waits: a normal turn that cannot park a second script.
                scenario = sc.PLAIN
            await self._run(turn, sc.paused(scenario.build(text), sc.pause_seconds(text)), None)
        finally:
            self._running.discard(task_id)
            self.flow.forget(task_id)

    async def _run(self, turn: _Turn, script: sc.Script, outcome: object) -> None:
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
            if flow is _Flow.STOP:
                return
            if flow is _Flow.SUSPEND and isinstance(step, sc.Ask):
                await self._ask(turn, script, step)
                return

    def _projection(self, turn: _Turn, request: sc.InputRequest) -> dict[str, Any]:
        """The kernel's unified input projection (``metadata.iac_code.input``)."""
        prefix = {sc.PERMISSION: "permission", sc.QUESTION: "question"}.get(request.kind, "selection")
        projection: dict[str, Any] = {
            "schemaVersion": 1,
            "kind": request.kind,
            "requestTaskId": turn.task_id,
            "contextId": turn.context_id,
            "inputId": f"{prefix}-{uuid.uuid4().hex}",
            "title": request.title,
            "prompt": request.prompt,
            "language": "en",
            "required": True,
        }
        if request.tool_use_id is not None:
            projection["toolUseId"] = request.tool_use_id
        if request.tool_name is not None:
            projection["toolName"] = request.tool_name
        if request.options:
            projection["options"] = [dict(option) for option in request.options]
        projection.update(copy.deepcopy(request.fields))
        return projection

    def _execution_control(self, turn: _Turn, status: str = "input-required") -> dict[str, Any]:
        """``executionControl`` as ``GetTask`` shows it for a waiting task (``iac-b2``)."""
        return {
            "phase": "running",
            "pauseReason": None,
            "expiresAt": None,
            "commitError": None,
            "taskId": turn.task_id,
            "connectionEpoch": -1,
            "pauseId": None,
            "streamAvailable": False,
            "blockers": [],
            "persistedRevision": 0,
            "externalOperations": [],
            "terminationReason": None,
            "pauseComplete": False,
            "serverInstanceId": self._instance_id,
            "releaseReady": False,
            "executionId": self._executions.setdefault(turn.task_id, f"exec-{uuid.uuid4().hex}"),
            "contextId": turn.context_id,
            "revision": 0,
            "executionStatus": status,
            "backup": {"status": "not_requested"},
        }

    def _wait_metadata(self, turn: _Turn, wait: _Wait) -> dict[str, Any]:
        """``permission``/``input``/``pendingPermissions`` for the open inputs of ``wait``."""
        open_inputs = wait.open_inputs()
        meta: dict[str, Any] = {"input": copy.deepcopy(open_inputs[0].projection)}
        first_permission = next((p for p in open_inputs if p.request.kind == sc.PERMISSION), None)
        if first_permission is not None:
            meta["permission"] = {
                "autoApproved": False,
                "toolUseId": first_permission.request.tool_use_id,
                "toolName": first_permission.request.tool_name,
                "pending": True,
            }
        if len(open_inputs) > 1:
            meta["pendingPermissions"] = [copy.deepcopy(p.projection) for p in open_inputs[1:]]
        return meta

    async def _ask(self, turn: _Turn, script: sc.Script, step: sc.Ask) -> None:
        """INPUT_REQUIRED with the input projection(s), then park the script on the task.

        A Pipeline ``Ask`` first sends its ``input_required`` envelope (WORKING) with the projection.
        """
        wait = _Wait(script, [_Pending(r, self._projection(turn, r)) for r in step.requests], step.pipeline)
        self._waits[turn.task_id] = wait
        meta = self._wait_metadata(turn, wait)
        self.task_metadata[turn.task_id] = {
            "iacCodeSessionId": turn.session_id,
            **copy.deepcopy(meta),
            "executionControl": self._execution_control(turn),
        }
        self._sync_pipeline_overlay(turn.task_id)
        if step.pipeline is not None:
            first = wait.inputs[0].projection
            extra = {"data": self._input_data(wait.inputs[0]), "input": first}
            await turn.pipeline_status([step.pipeline], envelope_extra=extra)
        await turn.status(TaskState.TASK_STATE_INPUT_REQUIRED, **meta)

    @staticmethod
    def _input_data(pending: _Pending) -> dict[str, Any]:
        """``data`` keys naming the input of an ``input_required``/``permission_requested`` envelope."""
        data: dict[str, Any] = {"inputId": pending.projection["inputId"], "kind": pending.request.kind}
        if pending.request.tool_use_id is not None:
            data["toolUseId"] = pending.request.tool_use_id
        return data

    @staticmethod
    def _received(pending: _Pending) -> dict[str, Any]:
        """``inputReceived`` of an answered input (as ``iac-c-resume-allow.sse``)."""
        received: dict[str, Any] = {"kind": pending.request.kind, "inputId": pending.projection["inputId"]}
        if pending.request.tool_use_id is not None:
            received["toolUseId"] = pending.request.tool_use_id
        return received

    async def _input_received_envelope(self, turn: _Turn, template: sc.PipelineEvent, pending: _Pending) -> None:
        """The Pipeline ``input_received`` envelope, at the coordinates where the input was asked."""
        received = sc.PipelineEvent(
            "input_received",
            template.scope,
            step=template.step,
            candidate=template.candidate,
            candidate_step=template.candidate_step,
        )
        data = {**self._input_data(pending), "answer": pending.answer}
        await turn.pipeline_status([received], envelope_extra={"data": data})

    async def _wait_sideband(self, turn: _Turn, step: sc.WaitSideband) -> tuple[str, ...]:
        """WORKING with ``pendingPermissions`` + ``permission_requested``; block until answered.

        The answer (``take_sideband_answer``) arrives as another request while this ``execute`` is
        still running. The turn then waits up to ``sideband_grace`` seconds for a ``SubscribeToTask``
        so that follower sees the rest of the turn, and goes on.
        """
        pending = _Pending(step.request, self._projection(turn, step.request))
        projection = pending.projection
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._sidebands[turn.task_id] = _Sideband(pending, turn.context_id, step.event, answer)
        self.task_metadata[turn.task_id] = {
            "iacCodeSessionId": turn.session_id,
            "pendingPermissions": [copy.deepcopy(projection)],
            "executionControl": self._execution_control(turn, "working"),
        }
        try:
            extra = {"data": self._input_data(pending), "permission": projection}
            await turn.pipeline_status([step.event], envelope_extra=extra, pendingPermissions=[projection])
            decision = await answer
        finally:
            self._sidebands.pop(turn.task_id, None)
        deadline = time.monotonic() + self.sideband_grace
        while not self._subscribers.get(turn.task_id) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await turn.status(TaskState.TASK_STATE_WORKING, session=False, inputReceived=self._received(pending))
        await self._input_received_envelope(turn, step.event, pending)
        return (decision,)

    async def _answer_permission(self, turn: _Turn, payload: dict[str, Any]) -> None:
        """Apply a (validated) permission answer; a repeated one only acknowledges."""
        input_id = str(payload["inputId"])
        received = self._answered.get(turn.task_id, {}).get(input_id)
        wait = self._waits.get(turn.task_id)
        pending = wait.find(input_id) if wait is not None else None
        if received is not None or wait is None or pending is None:
            await turn.status(TaskState.TASK_STATE_WORKING, session=False, inputReceived=received or {})
            return
        await self._answer(turn, wait, pending, str(payload["decision"]))

    async def _answer(self, turn: _Turn, wait: _Wait, pending: _Pending, answer: str) -> None:
        """Record one answer; resume the script once every input of its ``Ask`` is answered."""
        pending.answer = answer
        received = self._received(pending)
        self._answered.setdefault(turn.task_id, {})[str(pending.projection["inputId"])] = received
        await turn.status(TaskState.TASK_STATE_WORKING, session=False, inputReceived=received)
        if wait.pipeline is not None:
            await self._input_received_envelope(turn, wait.pipeline, pending)
        if wait.open_inputs():
            # Part of a batch: acknowledged; the stream ends and the task keeps waiting for the rest.
            meta = self._wait_metadata(turn, wait)
            meta.setdefault("pendingPermissions", [])
            self.task_metadata[turn.task_id].update(meta)
            return
        del self._waits[turn.task_id]
        answers = tuple(p.answer for p in wait.inputs if p.answer is not None)
        await self._run(turn, wait.script, answers)

    async def _runtime_missing(self, turn: _Turn, context: RequestContext) -> None:
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
        self._teardowns[context_id] = self._teardowns.get(context_id, 0) + 1
        try:
            await self._cancel(task_id, context_id, event_queue)
            await asyncio.sleep(self.cancel_teardown_s)
        finally:
            self._teardowns[context_id] -= 1
            if not self._teardowns[context_id]:
                del self._teardowns[context_id]

    async def _cancel(self, task_id: str, context_id: str, event_queue: EventQueue) -> None:
        # Set first: from here on the running turn may not emit (CANCELED must be the last event).
        self._cancelled.add(task_id)
        wait = self._waits.pop(task_id, None)
        if wait is not None:
            wait.script.close()
        sideband = self._sidebands.pop(task_id, None)
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
        status.timestamp.FromDatetime(_now())
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                status=status,
                metadata={"iac_code": {"iacCodeSessionId": self.session_id(context_id)}},
            )
        )
