"""Typed view of one A2A JSON-RPC payload (pure): result unwrapping, state, iac-code metadata.

A JSON-RPC error is recognised on every call and never mistaken for a task: its request id is not a
task id (docs/design.md#decision-jsonrpc-errors-on-every-call).
"""

from __future__ import annotations

from typing import Any

from agui_bridge.a2a.errors import A2ABadReply, A2AError, A2ARpcError, A2ATransportError
from agui_bridge.protocol.sse_parser import SseMessage, decode_data

_WRAPPERS = ("task", "statusUpdate", "artifactUpdate", "message")

TERMINAL_STATES = frozenset({"completed", "failed", "rejected", "auth-required", "canceled"})
ENDING_STATES = TERMINAL_STATES | {"input-required"}


class A2AEvent:
    """One unwrapped upstream event; read-only by convention.

    A plain slotted class: one is built per upstream event, and a frozen dataclass's `__init__`
    (an `object.__setattr__` per field) cost three times as much. It keeps the unwrapped body, not the
    JSON-RPC envelope around it: events read ahead wait in the pump's queue, and every container they keep
    alive is one more for the garbage collector to carry (docs/design.md#a2a-stream-batches).
    """

    __slots__ = ("body", "context_id", "iac", "kind", "state", "task_id")

    def __init__(
        self,
        kind: str,
        body: dict[str, Any],
        task_id: str | None,
        context_id: str | None,
        state: str | None,
        iac: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.body = body
        self.task_id = task_id
        self.context_id = context_id
        self.state = state
        self.iac: dict[str, Any] = {} if iac is None else iac

    def _fields(self) -> tuple[object, ...]:
        return (self.kind, self.body, self.task_id, self.context_id, self.state, self.iac)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, A2AEvent):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # it holds dicts

    def __repr__(self) -> str:
        return (
            f"A2AEvent(kind={self.kind!r}, task_id={self.task_id!r}, context_id={self.context_id!r}, "
            f"state={self.state!r}, iac={self.iac!r}, body={self.body!r})"
        )


#: Raw state -> normalised state: the kernel uses a handful of values (bounded, see `normalise_state`).
_STATES: dict[str, str | None] = {}


def normalise_state(raw: object) -> str | None:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`; anything unusable -> None."""
    if not isinstance(raw, str) or not raw:
        return None
    known = _STATES.get(raw, _STATES)
    if known is not _STATES:
        return known  # type: ignore[return-value]
    state = raw.lower()
    if state.startswith("task_state_"):
        state = state[len("task_state_") :]
    state = state.replace("_", "-")
    normalised = None if state == "unspecified" else state
    if len(_STATES) < 64:
        _STATES[raw] = normalised
    return normalised


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
    if payload.get("error") is not None:
        raise rpc_error_from(payload)  # type: ignore[misc]
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
    if not isinstance(context_id, str) or not context_id:
        context_id = None
    status = body.get("status")
    state = normalise_state(status.get("state")) if isinstance(status, dict) else None
    metadata = body.get("metadata")
    iac = metadata.get("iac_code") if isinstance(metadata, dict) else None
    return A2AEvent(kind, body, task_id, context_id, state, iac if isinstance(iac, dict) else None)


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
