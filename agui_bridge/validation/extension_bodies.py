"""The bodies of the two iac-code extensions, as schemas (docs/design.md#cancellation).

``POST .../executions/{executionId}/cancel`` takes ``{"threadId", "rosInvocationId"}`` and
``POST .../threads/{threadId}/status`` takes ``{"rosInvocationId"}``; other keys are ignored. Fields
are checked in the order they are declared and the first failure is the answer, so a body with two
bad fields names the first of them, as the routes always have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load

from agui_bridge.config import limits
from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.message_keys import MessageKey as K
from agui_bridge.validation.addressable import thread_id_problem
from agui_bridge.validation.field_errors import first_error, rule

__all__ = ["CANCEL_BODY", "STATUS_BODY", "CancelRequest", "StatusRequest", "load_extension_body"]


@dataclass(frozen=True)
class CancelRequest:
    thread_id: str
    ros_invocation_id: str


@dataclass(frozen=True)
class StatusRequest:
    ros_invocation_id: str


def _id_rules(missing: str, max_chars: int | None, addressable: bool) -> Callable[[str], None]:
    """Non-empty; then, with a cap, at most `max_chars` characters and encodable as UTF-8 (no lone
    surrogate, which no state file can hold); then, for a threadId, one `POST /` admits (no control
    character, no leading `/`: validation.addressable)."""

    def check(value: str) -> None:
        if not value:
            raise ValidationError([rule(missing)])
        if max_chars is not None:
            if len(value) > max_chars:
                raise ValidationError([rule(K.FIELD_LENGTH, min=1, max=max_chars)])
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValidationError([rule(K.FIELD_INVALID)]) from None
        problem = thread_id_problem(value) if addressable else None
        if problem is not None:
            raise ValidationError([rule(problem)])

    return check


def required_id(
    wire_name: str, missing: str, max_chars: int | None = None, *, addressable: bool = False
) -> fields.String:
    """A required non-empty string id; absent, null, not a string or empty all answer `missing`."""
    errors: dict[str, Any] = {name: [rule(missing)] for name in ("required", "null", "invalid")}
    return fields.String(
        data_key=wire_name,
        required=True,
        validate=_id_rules(missing, max_chars, addressable),
        error_messages=errors,
    )


class CancelBodySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    thread_id = required_id("threadId", K.CANCEL_FIELDS_REQUIRED, limits.MAX_ID_CHARS, addressable=True)
    ros_invocation_id = required_id("rosInvocationId", K.CANCEL_FIELDS_REQUIRED, limits.MAX_ROS_INVOCATION_ID_CHARS)

    @post_load
    def _request(self, data: dict[str, Any], **kwargs: Any) -> CancelRequest:
        return CancelRequest(**data)


class StatusBodySchema(Schema):
    """The length caps are not checked here: the route answers an over-long id with 404 (no such
    thread can exist), as it does for an over-long thread id in the path."""

    class Meta:
        unknown = EXCLUDE

    ros_invocation_id = required_id("rosInvocationId", K.STATUS_ROS_REQUIRED)

    @post_load
    def _request(self, data: dict[str, Any], **kwargs: Any) -> StatusRequest:
        return StatusRequest(**data)


CANCEL_BODY: Final = CancelBodySchema()
STATUS_BODY: Final = StatusBodySchema()


def load_extension_body(schema: Schema, body: dict[str, object]) -> Any:
    """`schema`'s result type for `body`, or InvalidInput for its first declared field that failed."""
    try:
        return schema.load(body)
    except ValidationError as err:
        messages = err.messages if isinstance(err.messages, dict) else {}
        for name, field in schema.load_fields.items():
            wire = field.data_key or name
            if wire in messages:
                problem = first_error({wire: messages[wire]})
                raise InvalidInput(problem.message_key, field=problem.pointer, params=problem.params) from None
        raise InvalidInput(K.FIELD_INVALID, field="") from None
