"""The extension bodies' schemas: the first declared field that fails answers, with the routes' keys."""

from __future__ import annotations

import pytest

from agui_bridge.config import limits
from agui_bridge.errors import InvalidInput
from agui_bridge.validation.extension_bodies import (
    CANCEL_BODY,
    STATUS_BODY,
    CancelRequest,
    StatusRequest,
    load_extension_body,
)

LONG_THREAD = "t" * (limits.MAX_ID_CHARS + 1)
LONG_ROS = "r" * (limits.MAX_ROS_INVOCATION_ID_CHARS + 1)


def test_a_valid_cancel_body_loads_and_other_keys_are_ignored() -> None:
    body: dict[str, object] = {"threadId": "t", "rosInvocationId": "r", "extra": [1]}
    assert load_extension_body(CANCEL_BODY, body) == CancelRequest("t", "r")


def test_a_valid_status_body_loads() -> None:
    assert load_extension_body(STATUS_BODY, {"rosInvocationId": "r"}) == StatusRequest("r")


@pytest.mark.parametrize(
    ("body", "pointer", "key", "params"),
    [
        ({"rosInvocationId": "r"}, "/threadId", "cancel_fields_required", {}),
        ({"threadId": None, "rosInvocationId": "r"}, "/threadId", "cancel_fields_required", {}),
        ({"threadId": 7, "rosInvocationId": "r"}, "/threadId", "cancel_fields_required", {}),
        ({"threadId": "", "rosInvocationId": "r"}, "/threadId", "cancel_fields_required", {}),
        ({"threadId": "t"}, "/rosInvocationId", "cancel_fields_required", {}),
        ({"threadId": "t", "rosInvocationId": ""}, "/rosInvocationId", "cancel_fields_required", {}),
        # threadId is declared first, so it answers even though "/rosInvocationId" sorts before it
        ({}, "/threadId", "cancel_fields_required", {}),
        ({"threadId": "", "rosInvocationId": 1}, "/threadId", "cancel_fields_required", {}),
        (
            {"threadId": LONG_THREAD, "rosInvocationId": "r"},
            "/threadId",
            "field_length",
            {"field": "threadId", "min": "1", "max": str(limits.MAX_ID_CHARS)},
        ),
        (
            {"threadId": "t", "rosInvocationId": LONG_ROS},
            "/rosInvocationId",
            "field_length",
            {"min": "1", "max": str(limits.MAX_ROS_INVOCATION_ID_CHARS)},
        ),
        ({"threadId": "a\ud800", "rosInvocationId": "r"}, "/threadId", "field_invalid", {"field": "threadId"}),
    ],
)
def test_cancel_body_rejections(body: dict[str, object], pointer: str, key: str, params: dict[str, str]) -> None:
    with pytest.raises(InvalidInput) as info:
        load_extension_body(CANCEL_BODY, body)
    assert (info.value.field, info.value.message_key) == (pointer, key)
    for name, value in params.items():
        assert info.value.params[name] == value


@pytest.mark.parametrize("value", [None, 7, "", [], {"a": 1}])
def test_status_body_rejections(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        load_extension_body(STATUS_BODY, {"rosInvocationId": value})
    assert (info.value.field, info.value.message_key) == ("/rosInvocationId", "status_ros_required")


def test_status_body_leaves_long_ids_to_the_route() -> None:
    """An over-long rosInvocationId is the route's 404, not a 400."""
    assert load_extension_body(STATUS_BODY, {"rosInvocationId": LONG_ROS}) == StatusRequest(LONG_ROS)
