"""marshmallow error trees -> JSON Pointer field errors (docs/design.md#field-errors)."""

from __future__ import annotations

import pytest

from agui_bridge.validation.field_errors import (
    FieldError,
    display_path,
    escape_pointer_token,
    field_errors_from_marshmallow,
    first_error,
    rule,
)


@pytest.mark.parametrize(
    ("token", "expected"),
    [("a", "a"), ("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), (3, "3"), ("", "")],
)
def test_escape_pointer_token(token: str | int, expected: str) -> None:
    assert escape_pointer_token(token) == expected


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [([], "RunAgentInput"), (["threadId"], "threadId"), (["messages", 0, "role"], "messages[0].role")],
)
def test_display_path(tokens: list[str | int], expected: str) -> None:
    assert display_path(tokens) == expected


@pytest.mark.parametrize(
    ("messages", "prefix", "expected"),
    [
        (
            {"threadId": [rule("field_required")]},
            "",
            [FieldError("/threadId", "required", "field_required", {"field": "threadId"})],
        ),
        (
            {"messages": {1: {"role": [rule("field_enum", choices="a, b")]}}},
            "",
            [FieldError("/messages/1/role", "enum", "field_enum", {"field": "messages[1].role", "choices": "a, b"})],
        ),
        (
            {"iacCode": {"thinking": {"_schema": [rule("field_type_object")]}}},
            "/forwardedProps",
            [
                FieldError(
                    "/forwardedProps/iacCode/thinking",
                    "type",
                    "field_type_object",
                    {"field": "forwardedProps.iacCode.thinking"},
                )
            ],
        ),
        (
            {"_schema": ["Invalid input type."]},
            "",
            [FieldError("", "type", "field_type_object", {"field": "RunAgentInput"})],
        ),
        (
            {"a/b": ["Unknown field."], "c~d": ["something marshmallow said"]},
            "",
            [
                FieldError("/a~1b", "unknown", "field_unknown", {"field": "a/b"}),
                FieldError("/c~0d", "invalid", "field_invalid", {"field": "c~d"}),
            ],
        ),
        (
            {"x": [rule("field_length", min=1, max=256)]},
            "/p~1q",
            [FieldError("/p~1q/x", "length", "field_length", {"field": "p/q.x", "min": "1", "max": "256"})],
        ),
    ],
)
def test_field_errors_from_marshmallow(messages: dict[object, object], prefix: str, expected: list[FieldError]) -> None:
    assert field_errors_from_marshmallow(messages, prefix) == expected


def test_sorted_by_pointer_with_numeric_indices() -> None:
    messages: dict[object, object] = {
        "runId": ["field_type_string"],
        "messages": {10: {"id": ["field_required"]}, 2: {"id": ["field_required"]}},
        "context": ["field_type_array"],
    }
    pointers = [e.pointer for e in field_errors_from_marshmallow(messages)]
    assert pointers == ["/context", "/messages/2/id", "/messages/10/id", "/runId"]
    assert first_error(messages).pointer == "/context"


def test_duplicates_collapse() -> None:
    errors = field_errors_from_marshmallow({"a": ["field_required", "field_required"]})
    assert len(errors) == 1


def test_first_error_of_empty_tree_is_generic() -> None:
    assert first_error({}, "/forwardedProps") == FieldError(
        "/forwardedProps", "invalid", "field_invalid", {"field": "forwardedProps"}
    )
