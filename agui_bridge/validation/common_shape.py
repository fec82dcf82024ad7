"""The common shape of a new run, recognised without the schemas (docs/design.md#input-validation-common-shape).

Nearly every `POST /` is the same small object: camelCase keys, user messages with string content, no
tools, no context (empty or left out), and an ``iacCode`` with a handful of string fields.
`accept_common_shape` checks that shape with plain type tests and builds the same `RunInput` the schemas
would; anything else (another role, content parts, a snake_case spelling, a key it does not know, any
value the schemas could refuse) returns None and the schemas run as always, so every error, its pointer
and its order stay theirs.
"""

from __future__ import annotations

from typing import Any

from agui_bridge.validation.results import ROS_INVOCATION_ID_MAX, IacCodeProps, RunInput

__all__ = ["accept_common_shape"]

_ENVELOPE_KEYS = frozenset(
    {"threadId", "runId", "parentRunId", "protocolVersion", "state", "messages", "tools", "context", "forwardedProps"}
)
_ENVELOPE_REQUIRED = ("threadId", "runId", "messages", "forwardedProps")  # absent tools/context/state: empty
_MESSAGE_KEYS = frozenset({"id", "role", "content", "name"})
#: Optional ``iacCode`` strings (camelCase wire name -> IacCodeProps field); no enum, no nested object.
_OPTIONAL_STRINGS = {
    "model": "model",
    "userId": "user_id",
    "channel": "channel",
    "preferredLanguage": "preferred_language",
}
_IAC_KEYS = frozenset({"schemaVersion", "rosInvocationId", "cwd", *_OPTIONAL_STRINGS})


def _optional_string(value: object) -> bool:
    return value is None or type(value) is str


def _user_message(message: object) -> bool:
    if type(message) is not dict or not _MESSAGE_KEYS.issuperset(message):
        return False
    return (
        message.get("role") == "user"
        and type(message.get("id")) is str
        and type(message.get("content")) is str
        and _optional_string(message.get("name"))
    )


def _props(iac: object) -> IacCodeProps | None:
    if type(iac) is not dict or not _IAC_KEYS.issuperset(iac):
        return None
    version, ros_invocation_id, cwd = iac.get("schemaVersion"), iac.get("rosInvocationId"), iac.get("cwd")
    if type(version) is not int or version != 1 or type(cwd) is not str:
        return None
    if type(ros_invocation_id) is not str or not 1 <= len(ros_invocation_id) <= ROS_INVOCATION_ID_MAX:
        return None
    optional: dict[str, Any] = {}
    for wire, name in _OPTIONAL_STRINGS.items():
        if wire in iac:
            if not _optional_string(iac[wire]):
                return None
            optional[name] = iac[wire]
    return IacCodeProps(schema_version=1, ros_invocation_id=ros_invocation_id, cwd=cwd, **optional)


def accept_common_shape(raw: object) -> RunInput | None:
    """The `RunInput` of a body of the common shape, or None: then only the schemas may decide."""
    if type(raw) is not dict or not _ENVELOPE_KEYS.issuperset(raw) or any(k not in raw for k in _ENVELOPE_REQUIRED):
        return None
    thread_id, run_id, messages = raw["threadId"], raw["runId"], raw["messages"]
    if type(thread_id) is not str or type(run_id) is not str:
        return None
    parent_run_id = raw.get("parentRunId")
    if not _optional_string(parent_run_id) or not _optional_string(raw.get("protocolVersion")):
        return None
    if raw.get("tools", []) != [] or raw.get("context", []) != [] or type(messages) is not list:
        return None
    if not all(_user_message(message) for message in messages):
        return None
    forwarded = raw["forwardedProps"]
    if type(forwarded) is not dict or len(forwarded) != 1 or "iacCode" not in forwarded:
        return None
    props = _props(forwarded["iacCode"])
    if props is None:
        return None
    return RunInput(thread_id, run_id, parent_run_id, tuple(messages), None, props)
