"""Pipeline envelopes -> AG-UI events (pure; docs/design.md#pipelines).

Steps live in two sets: the durable open steps of the execution (persisted, so a step opened before
an interrupt is still open in the resume run) and the spans open in this AG-UI run (closed before
every terminal event). A step that completes while not open in this run gets a zero-length pair, so
every STEP_FINISHED matches a STEP_STARTED in the same run. A step's text and reasoning messages end
just before its STEP_FINISHED, so each message ends in the order it was shown (a client's replay puts
a message where it ended); text that arrives for a step after its end reopens the same message id.

Envelopes are de-duplicated by eventId within a run and by sequence against the run's cursor; the
execution's persisted `pipelineSequence` only moves forward, and recovery (`/iac-code/pipeline/state`)
starts from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agui_bridge.projection.projector import RunProjector
from agui_bridge.projection.values import non_empty_str
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.protocol.ids import emitted_id

ACTIVITY_TYPE = "iac-code.pipeline.v1"

#: eventTypes shown as CUSTOM `iac-code.pipeline.v1` (the envelope unchanged); nothing else is.
CUSTOM_EVENT_TYPES = frozenset(
    {
        "pipeline_started", "pipeline_resumed", "pipeline_completed", "pipeline_error", "pipeline_warning",
        "backup_blocked", "candidate_started", "candidate_completed", "candidate_failed", "candidate_interrupted",
        "candidate_restart_requested", "candidate_selected", "candidate_detail_shown", "candidate_step_failed",
        "sub_pipeline_started", "sub_pipeline_completed", "sub_step_failed", "step_failed", "stack_progress",
        "stack_instances_progress", "stack_current_changed", "cleanup_started", "cleanup_progress",
        "cleanup_completed", "cleanup_failed", "rollback_triggered", "rollback_completed",
        "context_compaction_started", "context_compacted", "context_compaction_failed", "fields_marked_stale",
        "diagram_shown", "mcp_status", "tool_progress",
    }
)  # fmt: skip
STEP_OPENING_TYPES = frozenset({"step_started", "candidate_step_started", "input_received"})
STEP_CLOSING_TYPES = frozenset({"step_completed", "step_failed", "candidate_step_completed", "candidate_step_failed"})


def sequence_of(envelope: dict[str, Any]) -> int | None:
    return integer_of(envelope.get("sequence"))


def integer_of(value: object) -> int | None:
    """An integer (integral floats accepted, as protobuf Structs send them; bools rejected)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def step_of(envelope: dict[str, Any]) -> tuple[str, str] | None:
    """(step key, AG-UI step name) of an envelope, or None when it names no step (docs/design.md#pipelines)."""
    coordinate = envelope.get("candidateStep")
    if not isinstance(coordinate, dict):
        coordinate = envelope.get("step")
    if not isinstance(coordinate, dict):
        return None
    step_id = non_empty_str(coordinate.get("id"))
    if step_id is None:
        return None
    candidate = envelope.get("candidate")
    if isinstance(candidate, dict):
        for field in ("id", "subPipelineId", "runId"):
            candidate_id = non_empty_str(candidate.get(field))
            if candidate_id is not None:
                key = f"candidate:{candidate_id}:{step_id}"
                return key, emitted_id(key)
    return f"step:{step_id}", emitted_id(step_id)


def owners_of(envelope: dict[str, Any]) -> frozenset[str]:
    """The step keys whose end ends this envelope's text and reasoning: its own step and its parent step."""
    keys: set[str] = set()
    step = step_of(envelope)
    if step is not None:
        keys.add(step[0])
    parent = envelope.get("step")
    parent_id = non_empty_str(parent.get("id")) if isinstance(parent, dict) else None
    if parent_id is not None:
        keys.add(f"step:{parent_id}")
    return frozenset(keys)


def name_of(key: str) -> str:
    """The AG-UI step name of a persisted step key (bounded like every emitted id: docs/design.md#emitted-ids)."""
    return emitted_id(key[len("step:") :] if key.startswith("step:") else key)


class PipelineMapper:
    """Per-run Pipeline state on top of a RunProjector (which owns text, tools and span closing)."""

    def __init__(
        self, projector: RunProjector, thread_id: str, durable_steps: Iterator[str] | list[str], sequence: int
    ) -> None:
        self._projector = projector
        self.pipeline_run_id = f"pipeline-{thread_id}"
        self.durable_steps: set[str] = set(durable_steps)
        self.cursor = 0  # this run's cursor: starts at 0, raised by live events and recovery
        self.sequence = sequence  # the execution's persisted pipelineSequence (monotonic)
        self._seen_event_ids: set[str] = set()
        #: text message id -> the step keys whose end ends it (and its reasoning), for this run
        self._message_owners: dict[str, frozenset[str]] = {}

    @property
    def projector(self) -> RunProjector:
        """The run's projector, whose spans the envelopes open and close."""
        return self._projector

    # ---- run start ------------------------------------------------------------------------

    def reopen(self) -> list[Event]:
        """STEP_STARTED for every durable step not open in this run, in sorted key order."""
        out: list[Event] = []
        for key in sorted(self.durable_steps):
            if key not in self._projector.open_steps:
                self._projector.open_steps[key] = name_of(key)
                out.append(ev.step_started(name_of(key)))
        return out

    # ---- live ------------------------------------------------------------------------------

    def live(self, iac: dict[str, Any]) -> list[Event]:
        """The envelopes of one A2A event: `pipelineBatch.events` in order, then `pipeline`."""
        out: list[Event] = []
        batch = iac.get("pipelineBatch")
        envelopes = list(batch.get("events") or []) if isinstance(batch, dict) else []
        envelopes.append(iac.get("pipeline"))
        for envelope in envelopes:
            if isinstance(envelope, dict):
                out.extend(self._live_envelope(envelope))
        return out

    def _live_envelope(self, envelope: dict[str, Any]) -> list[Event]:
        event_id = non_empty_str(envelope.get("eventId"))
        sequence = sequence_of(envelope)
        if event_id is not None and event_id in self._seen_event_ids:
            return []
        if sequence is not None and 0 < sequence <= self.cursor:
            return []
        self._record(event_id, sequence)
        return self._map(envelope)

    def _record(self, event_id: str | None, sequence: int | None) -> None:
        if event_id is not None:
            self._seen_event_ids.add(event_id)
        if sequence is not None and sequence > self.cursor:
            self.cursor = sequence
        self.sequence = max(self.sequence, self.cursor)

    # ---- recovery --------------------------------------------------------------------------

    def recover(self, response: object) -> list[Event]:
        """`/iac-code/pipeline/state`: one ACTIVITY_SNAPSHOT, then the missed envelopes (docs/design.md#pipelines)."""
        if not isinstance(response, dict) or not isinstance(response.get("snapshot"), dict):
            return []
        snapshot: dict[str, Any] = response["snapshot"]
        run_id = non_empty_str(snapshot.get("pipelineRunId"))
        if run_id is not None:
            self.pipeline_run_id = run_id
        content = {"schemaVersion": 1, "pipelineRunId": self.pipeline_run_id, "snapshot": snapshot}
        out = [ev.activity_snapshot(emitted_id(f"pipeline:{self.pipeline_run_id}"), ACTIVITY_TYPE, content)]
        events = response.get("events")
        for envelope in events if isinstance(events, list) else []:
            if not isinstance(envelope, dict):
                continue
            event_id = non_empty_str(envelope.get("eventId"))
            sequence = sequence_of(envelope)
            if event_id is not None and event_id in self._seen_event_ids:
                continue
            if event_id is None and sequence is not None and sequence <= self.cursor:
                continue  # an envelope with an unseen eventId fills a gap even below the cursor
            self._record(event_id, sequence)
            out.extend(self._map(envelope))
        last = integer_of(snapshot.get("lastSequence"))
        if last is not None:
            self._record(None, last)
        return out

    # ---- one envelope ----------------------------------------------------------------------

    def message_id(self, envelope: dict[str, Any]) -> str:
        """The text message of an envelope's scope and coordinates (bounded: docs/design.md#emitted-ids)."""
        scope = non_empty_str(envelope.get("scope")) or "pipeline"
        parts = [f"pipeline-message:{self.pipeline_run_id}:{scope}"]
        for field in ("candidate", "candidateStep", "step"):
            coordinate = envelope.get(field)
            if isinstance(coordinate, dict):
                value = non_empty_str(coordinate.get("runId")) or non_empty_str(coordinate.get("id"))
                if value is not None and value not in parts[1:]:
                    parts.append(value)
        return emitted_id(":".join(parts))

    def _map(self, envelope: dict[str, Any]) -> list[Event]:
        """Standard mapping, then step lifecycle, then CUSTOM (docs/design.md#pipelines)."""
        out: list[Event] = []
        projector = self._projector
        event_type = envelope.get("eventType")
        raw_data = envelope.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        if event_type == "text_delta":
            text = data.get("text")
            if isinstance(text, str) and text:
                message_id = self._owned_message_id(envelope)
                projector.emit_text(out, message_id, text, parallel=True)
        elif event_type == "thinking_delta":
            text = data.get("text")
            if isinstance(text, str) and text:
                projector.emit_reasoning(out, "reasoning-" + self._owned_message_id(envelope), text)
        elif event_type == "tool_started":
            tool_call_id = non_empty_str(data.get("toolUseId"))
            if tool_call_id is not None:
                arguments = data.get("input")
                name = non_empty_str(data.get("toolName")) or "tool"
                arguments = arguments if arguments is not None else {"summary": None}
                # The caller is the message of this envelope's step or candidate, not the last one shown:
                # parallel candidates interleave (docs/design.md#pipelines).
                projector.tool_call(out, tool_call_id, name, arguments, parent=self.message_id(envelope))
        elif event_type == "tool_result":
            tool_call_id = non_empty_str(data.get("toolUseId"))
            if tool_call_id is not None:
                projector.tool_result(out, tool_call_id, data.get("result"))
        elif event_type == "usage":
            projector.usage.record(data)
        self._step(out, event_type, envelope)
        if event_type in CUSTOM_EVENT_TYPES:
            out.append(ev.custom(ev.PIPELINE_EVENT, envelope))
        return out

    def _owned_message_id(self, envelope: dict[str, Any]) -> str:
        """The envelope's message id, remembered with the steps whose end ends it (none for Pipeline-level text)."""
        message_id = self.message_id(envelope)
        self._message_owners[message_id] = owners_of(envelope)
        return message_id

    def _end_messages(self, out: list[Event], message_ids: list[str]) -> None:
        """End their open reasoning, then their open text, each sorted, as close_all does.

        A message left open to the end of the run would be placed after every later message by a
        client's replay, which puts each message where it ended (docs/design.md#pipelines).
        """
        reasoning_ids = sorted(emitted_id("reasoning-" + message_id) for message_id in message_ids)
        for reasoning_id in reasoning_ids:
            self._projector.end_reasoning(out, reasoning_id)
        for message_id in sorted(message_ids):
            self._projector.end_text(out, message_id)

    def _step(self, out: list[Event], event_type: object, envelope: dict[str, Any]) -> None:
        if event_type not in STEP_OPENING_TYPES and event_type not in STEP_CLOSING_TYPES:
            return
        step = step_of(envelope)
        if step is None:
            return
        key, name = step
        open_steps = self._projector.open_steps
        owners = self._message_owners
        if event_type == "step_started" and key.startswith("step:"):
            # The kernel shows text of one parent step at a time: a new one ends the earlier steps' and
            # the Pipeline-level messages still open (docs/design.md#pipelines).
            self._end_messages(out, [message_id for message_id, keys in owners.items() if key not in keys])
        if event_type in STEP_OPENING_TYPES:
            self.durable_steps.add(key)
            if key not in open_steps:
                open_steps[key] = name
                out.append(ev.step_started(name))
            return
        self._end_messages(out, [message_id for message_id, keys in owners.items() if key in keys])
        if key not in self.durable_steps:
            return
        self.durable_steps.discard(key)
        if key in open_steps:
            del open_steps[key]
            out.append(ev.step_finished(name))
            return
        started = ev.step_started(name)
        finished = ev.step_finished(name)
        finished["timestamp"] = started["timestamp"]
        out.extend((started, finished))


def run_projection(
    thread_id: str, run_id: str, text_digests: set[str], durable_steps: list[str], sequence: int
) -> PipelineMapper:
    """A run's projector and its Pipeline mapper, each built once over the other: the projector calls the
    mapper for envelopes, the mapper opens and closes the projector's spans (`PipelineMapper.projector`)."""
    built: list[PipelineMapper] = []

    def mapper_over(projector: RunProjector) -> PipelineMapper:
        built.append(PipelineMapper(projector, thread_id, durable_steps, sequence))
        return built[0]

    RunProjector(thread_id, run_id, text_digests, envelopes=mapper_over)
    return built[0]
