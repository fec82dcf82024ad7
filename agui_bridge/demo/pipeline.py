"""One task's Pipeline run in the demo agent: envelope numbering, run ids, every envelope sent, and the snapshot
``/iac-code/pipeline/state`` serves (open steps keyed as the bridge keys them, docs/design.md#pipelines).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from agui_bridge.demo import scenarios as sc
from agui_bridge.demo import stamps

#: ``extensionUri`` of every Pipeline envelope.
PIPELINE_EXTENSION_URI = "https://iac-code.dev/extensions/pipeline/v1"
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
class PipelineRun:
    """One task's Pipeline run: numbering, run ids, every envelope sent, and the snapshot state."""

    task_id: str
    context_id: str
    session_id: str
    name: str = sc.PIPELINE_NAME
    run_id: str = field(default_factory=lambda: stamps.hex_id("prun"))
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
    updated_at: str = field(default_factory=lambda: stamps.rfc3339(stamps.now()))

    def _step_run(self, step: sc.PipelineStep, start: bool) -> dict[str, Any]:
        known = self.steps.get(step.id)
        if known is None or start:
            attempt = known["attempt"] + 1 if known is not None else 1
            known = {
                "id": step.id,
                "runId": stamps.hex_id("srun"),
                "attempt": attempt,
                "index": step.index,
                "total": step.total,
            }
            self.steps[step.id] = {**known, "status": "pending"}
        return {k: self.steps[step.id][k] for k in ("id", "runId", "attempt", "index", "total")}

    def _candidate_run(self, candidate_id: str, start: bool) -> dict[str, Any]:
        known = self.candidates.get(candidate_id)
        if known is None or start:
            known = {"id": candidate_id, "runId": stamps.hex_id("crun"), "status": "pending"}
            self.candidates[candidate_id] = known
        return {"id": candidate_id, "runId": known["runId"]}

    def _candidate_step_run(self, candidate_id: str, step_id: str, start: bool) -> dict[str, Any]:
        key = (candidate_id, step_id)
        known = self.candidate_steps.get(key)
        if known is None or start:
            known = {"id": step_id, "runId": stamps.hex_id("csrun"), "candidateId": candidate_id, "status": "pending"}
            self.candidate_steps[key] = known
        return {"id": step_id, "runId": known["runId"]}

    def envelope(self, event: sc.PipelineEvent, **extra: Any) -> dict[str, Any]:
        """Number ``event`` and record it; ``extra`` adds top-level keys (``data`` is merged)."""
        kind = event.event_type
        self.sequence += 1
        now = stamps.now()
        envelope: dict[str, Any] = {
            "schemaVersion": 1,
            "extensionUri": PIPELINE_EXTENSION_URI,
            "eventId": stamps.hex_id("evt"),
            "sequence": self.sequence,
            "createdAt": stamps.rfc3339(now),
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
        """Update the snapshot state (open steps as the bridge keys them, docs/design.md#pipelines)."""
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
