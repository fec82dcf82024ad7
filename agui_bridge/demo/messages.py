"""What a user message sent to the demo agent carries: a permission answer (data part or ``IAC_CODE_PERMISSION:``
text) and its schema check, and the ``metadata.iac_code`` values a turn reads (``cwd``, ``run_mode``).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import Message

from agui_bridge.demo import scenarios as sc

#: The exact keys of a permission answer data part (docs/design.md#a2a-metadata-written); the text form
#: ``IAC_CODE_PERMISSION:{...}`` may add ``contextId``.
PERMISSION_ANSWER_KEYS = frozenset({"schemaVersion", "kind", "requestTaskId", "inputId", "toolUseId", "decision"})
PERMISSION_TEXT_PREFIX = "IAC_CODE_PERMISSION:"
PAYLOAD_MISMATCH = "Permission response payload fields do not match schemaVersion 1."
NOT_ACTIVE = "permission_resume_invalid: pending permission is not active."


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


def payload_matches_schema(payload: dict[str, Any]) -> bool:
    """True for the six-key schemaVersion 1 permission answer with a known decision."""
    return (
        set(payload) == PERMISSION_ANSWER_KEYS
        and payload["schemaVersion"] == 1
        and payload["kind"] == sc.PERMISSION
        and payload["decision"] in (sc.ALLOW_ONCE, sc.DENY)
        and all(isinstance(payload[k], str) for k in ("requestTaskId", "inputId", "toolUseId"))
    )


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


def message_cwd(message: Message | None) -> str | None:
    """``metadata.iac_code.cwd`` of the user message, if it is a string."""
    return _message_metadata_str(message, "cwd")


def message_run_mode(message: Message | None) -> str | None:
    """``metadata.iac_code.run_mode`` (``runMode`` accepted too) of the user message."""
    return _message_metadata_str(message, "run_mode", "runMode")
