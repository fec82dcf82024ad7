"""Typed view of one A2A JSON-RPC payload (pure): result unwrapping, state, iac-code metadata.

A JSON-RPC error is recognised on every call and never mistaken for a task: its request id is not a
task id (docs/design.md#decision-jsonrpc-errors-on-every-call).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agui_bridge.a2a.errors import A2ABadReply, A2AError, A2ARpcError, A2ATransportError
from agui_bridge.a2a.sse_parser import SseMessage, decode_data

_WRAPPERS = ("task", "statusUpdate", "artifactUpdate", "message")

TERMINAL_STATES = frozenset({"completed", "failed", "rejected", "auth-required", "canceled"})
ENDING_STATES = TERMINAL_STATES | {"input-required"}


@dataclass(frozen=True, slots=True)
class A2AEvent:
    """One unwrapped upstream event."""

    kind: str
    body: dict[str, Any]
    result: dict[str, Any]
    task_id: str | None
    context_id: str | None
    state: str | None
    iac: dict[str, Any] = field(default_factory=dict)


def normalise_state(raw: object) -> str | None:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`; anything unusable -> None."""
    if not isinstance(raw, str) or not raw:
        return None
    state = raw.lower()
    if state.startswith("task_state_"):
        state = state[len("task_state_") :]
    state = state.replace("_", "-")
    return None if state == "unspecified" else state


def rpc_error_from(payload: dict[str, Any]) -> A2ARpcError | None:
    error = payload.get("error")
    if error is None:
        return None
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        return A2ARpcError(
            code if isinstance(code, int) else -32603,
            message if isinstance(message, str) else "",
            error.get("data"),
        )
    return A2ARpcError(-32603, str(error))


def unwrap(payload: object) -> A2AEvent:
    """Unwrap `{"result": {...}}` (docs/design.md#a2a-identities); raise A2ARpcError for errors."""
    if not isinstance(payload, dict):
        raise A2ABadReply("A2A payload is not a JSON object")
    error = rpc_error_from(payload)
    if error is not None:
        raise error
    result = payload.get("result")
    if not isinstance(result, dict):
        result = payload
    kind = "result"
    body = result
    for key in _WRAPPERS:
        inner = result.get(key)
        if isinstance(inner, dict):
            kind, body = key, inner
            break
    task_id = body.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        task_id = body.get("id") if kind in ("task", "result") else None
        if not isinstance(task_id, str) or not task_id:
            task_id = None
    context_id = body.get("contextId")
    status = body.get("status")
    state = normalise_state(status.get("state")) if isinstance(status, dict) else None
    metadata = body.get("metadata")
    iac = metadata.get("iac_code") if isinstance(metadata, dict) else None
    return A2AEvent(
        kind=kind,
        body=body,
        result=result,
        task_id=task_id,
        context_id=context_id if isinstance(context_id, str) and context_id else None,
        state=state,
        iac=iac if isinstance(iac, dict) else {},
    )


def decode_message(message: SseMessage) -> A2AEvent:
    """Decode one SSE record of an A2A stream (`event: error` records carry a JSON-RPC error)."""
    try:
        payload = decode_data(message.data)
    except ValueError as exc:
        raise A2ABadReply("A2A stream record is not JSON") from exc
    if message.event == "error" and isinstance(payload, dict) and "error" not in payload:
        raise A2ARpcError(-32603, "A2A stream error")
    return unwrap(payload)


__all__ = [
    "ENDING_STATES",
    "TERMINAL_STATES",
    "A2AError",
    "A2AEvent",
    "A2ARpcError",
    "A2ATransportError",
    "decode_message",
    "normalise_state",
    "rpc_error_from",
    "unwrap",
]
