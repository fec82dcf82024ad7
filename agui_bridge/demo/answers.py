"""Whether the demo agent accepts a permission answer, checked as the kernel checks it before any stream starts
(JSON-RPC -32602 otherwise), and the sideband answers taken for a turn that is still running (see
``handler.PacedRequestHandler``).
"""

from __future__ import annotations

from a2a.types import Message
from a2a.utils.errors import InvalidParamsError

from agui_bridge.demo import scenarios as sc
from agui_bridge.demo.interrupts import input_received
from agui_bridge.demo.memory import TaskMemory
from agui_bridge.demo.messages import NOT_ACTIVE, PAYLOAD_MISMATCH, payload_matches_schema, permission_payload


def take_sideband_answer(memory: TaskMemory, message: Message) -> str | None:
    """Apply a permission answer to the running turn's sideband wait; its taskId if taken.

    ``None`` when the message is not an answer to an open (or already accepted) sideband
    permission: the caller then handles it as an ordinary message. A repeated answer to an
    accepted sideband permission is taken as a no-op. Raises ``InvalidParamsError`` like
    ``validate_answer`` (schema) and for a contextId that is not the task's.
    """
    payload = permission_payload(message)
    if payload is None:
        return None
    if not payload_matches_schema(payload):
        raise InvalidParamsError(message=PAYLOAD_MISMATCH)
    task_id = message.task_id
    input_id = str(payload["inputId"])
    if input_id in memory.sideband_answered.get(task_id, set()):
        return task_id
    sideband = memory.sidebands.get(task_id)
    if sideband is None or sideband.pending.projection["inputId"] != input_id:
        return None
    if message.context_id and message.context_id != sideband.context_id:
        raise InvalidParamsError(
            message=f"Context {message.context_id} does not match context {sideband.context_id} of task {task_id}"
        )
    if payload["requestTaskId"] != task_id or payload["toolUseId"] != sideband.pending.projection.get("toolUseId"):
        raise InvalidParamsError(message=NOT_ACTIVE)
    sideband.pending.answer = str(payload["decision"])
    memory.sideband_answered.setdefault(task_id, set()).add(input_id)
    memory.answered.setdefault(task_id, {})[input_id] = input_received(sideband.pending)
    if task_id in memory.task_metadata:
        # As the kernel's snapshot after a sideband answer: an explicit empty list.
        memory.task_metadata[task_id]["pendingPermissions"] = []
        memory.task_metadata[task_id]["executionControl"]["executionStatus"] = "working"
    if not sideband.answer.done():
        sideband.answer.set_result(sideband.pending.answer)
    return task_id


def validate_answer(memory: TaskMemory, message: Message) -> None:
    """Reject a permission answer the way the kernel does, before any stream starts.

    Raises ``InvalidParamsError`` (-32602) for a payload that is not the six-key schemaVersion 1
    shape, or whose inputId is neither pending on the task nor already answered.
    """
    payload = permission_payload(message)
    if payload is None:
        return
    if not payload_matches_schema(payload):
        raise InvalidParamsError(message=PAYLOAD_MISMATCH)
    task_id = message.task_id
    input_id = payload["inputId"]
    if input_id in memory.answered.get(task_id, {}):
        return
    wait = memory.waits.get(task_id)
    pending = wait.find(input_id) if wait is not None else None
    if (
        pending is None
        or pending.request.kind != sc.PERMISSION
        or payload["requestTaskId"] != task_id
        or payload["toolUseId"] != pending.projection.get("toolUseId")
    ):
        raise InvalidParamsError(message=NOT_ACTIVE)
