"""Interrupt bookkeeping of the demo agent: the inputs a script asked for (``Ask``: parked until every input is
answered; ``WaitSideband``: a Pipeline permission answered while the turn runs), and the kernel-shaped
projections built from them (``metadata.iac_code.input``, ``executionControl``, ``inputReceived``; matching
rules: agui_bridge/demo/README.md "Interrupts").
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from dataclasses import dataclass
from typing import Any

from agui_bridge.demo import scenarios as sc
from agui_bridge.demo.turn import Turn


@dataclass
class Pending:
    """One asked input: the script's request and the projection sent on the wire."""

    request: sc.InputRequest
    projection: dict[str, Any]
    answer: str | None = None


@dataclass
class Wait:
    """A script parked on a task until every input of its ``Ask`` step is answered."""

    script: sc.Script
    inputs: list[Pending]
    #: The ``input_required`` envelope template of a Pipeline ``Ask`` (coordinates of the answer).
    pipeline: sc.PipelineEvent | None = None

    def open_inputs(self) -> list[Pending]:
        return [p for p in self.inputs if p.answer is None]

    def find(self, input_id: str) -> Pending | None:
        return next((p for p in self.open_inputs() if p.projection["inputId"] == input_id), None)


@dataclass
class Sideband:
    """A Pipeline permission wait inside a running turn (``WaitSideband``)."""

    pending: Pending
    context_id: str
    event: sc.PipelineEvent
    answer: asyncio.Future[str]


def input_projection(turn: Turn, request: sc.InputRequest) -> dict[str, Any]:
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


def execution_control(
    turn: Turn, instance_id: str, execution_id: str, status: str = "input-required"
) -> dict[str, Any]:
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
        "serverInstanceId": instance_id,
        "releaseReady": False,
        "executionId": execution_id,
        "contextId": turn.context_id,
        "revision": 0,
        "executionStatus": status,
        "backup": {"status": "not_requested"},
    }


def wait_metadata(wait: Wait) -> dict[str, Any]:
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


def input_data(pending: Pending) -> dict[str, Any]:
    """``data`` keys naming the input of an ``input_required``/``permission_requested`` envelope."""
    data: dict[str, Any] = {"inputId": pending.projection["inputId"], "kind": pending.request.kind}
    if pending.request.tool_use_id is not None:
        data["toolUseId"] = pending.request.tool_use_id
    return data


def input_received(pending: Pending) -> dict[str, Any]:
    """``inputReceived`` of an answered input (as ``iac-c-resume-allow.sse``)."""
    received: dict[str, Any] = {"kind": pending.request.kind, "inputId": pending.projection["inputId"]}
    if pending.request.tool_use_id is not None:
        received["toolUseId"] = pending.request.tool_use_id
    return received
