"""The declarative schemas: classes with wire names, Rules as errors, pointers spelled as the client sent them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from marshmallow import Schema, ValidationError

from agui_bridge.validation import schemas
from agui_bridge.validation.field_errors import FieldError, Rule, field_errors_from_marshmallow, rule, snake_case
from agui_bridge.validation.results import ThinkingOptions

REPO = Path(__file__).resolve().parents[2]


def test_no_schema_is_built_with_type() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "agui_bridge").rglob("*.py")
        if re.search(r"\btype\(\s*[\"'A-Za-z_]+\s*,\s*\(", path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_every_schema_is_a_declared_class_with_camel_case_wire_names() -> None:
    classes = [value for value in vars(schemas).values() if isinstance(value, type) and issubclass(value, Schema)]
    assert schemas.IacCodeSchema in classes
    for cls in classes:
        for name, field in cls().load_fields.items():
            wire = field.data_key or name
            assert snake_case(wire) == name, (cls.__name__, name, wire)


def test_rules_carry_string_parameters() -> None:
    assert rule("field_length", min=1, max=256) == Rule("field_length", (("min", "1"), ("max", "256")))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"enabled": True, "budget": 5}, ThinkingOptions(True, None, 5)),
        ({}, ThinkingOptions(False, None, None)),
        ({"effort": "high"}, ThinkingOptions(False, "high", None)),
    ],
)
def test_post_load_builds_the_result_type(data: dict[str, object], expected: ThinkingOptions) -> None:
    assert schemas.ThinkingSchema().load(data) == expected


def test_snake_case_input_is_reported_at_the_key_the_client_sent() -> None:
    document = {"iac_code": {"schema_version": 1, "rosInvocationId": "i", "cwd": "/w", "cleanup_only": "yes"}}
    with pytest.raises(ValidationError) as info:
        schemas.FORWARDED_PROPS_SCHEMA.load(document)
    # marshmallow reports the wire name; the translation spells it as sent.
    assert info.value.messages == {"iacCode": {"cleanupOnly": [rule("field_type_boolean")]}}
    assert field_errors_from_marshmallow(info.value.messages, "/forwardedProps", document) == [
        FieldError(
            "/forwardedProps/iac_code/cleanup_only",
            "type",
            "field_type_boolean",
            {"field": "forwardedProps.iac_code.cleanup_only"},
        )
    ]


def test_a_missing_field_is_reported_under_its_wire_name() -> None:
    with pytest.raises(ValidationError) as info:
        schemas.ContextSchema().load({"description": "d"})
    assert info.value.messages == {"value": [rule("field_required")]}


def test_loading_leaves_the_input_untouched() -> None:
    document = {"interrupt_id": "i", "status": "resolved", "payload": 1}
    schemas.ResumeEntrySchema().load(document)
    assert document == {"interrupt_id": "i", "status": "resolved", "payload": 1}


def test_each_schema_spells_its_field_names_once_not_on_every_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The alias table (camel, snake, required) is built on a schema's first load and reused, off the per-run path."""
    from agui_bridge.validation import strict
    from agui_bridge.validation.field_errors import snake_case

    schema = schemas.IacCodeSchema()
    body = {"schemaVersion": 1, "ros_invocation_id": "r", "cwd": "/tmp"}
    first = schema.load(body)
    calls: list[str] = []

    def counting(name: str) -> str:
        calls.append(name)
        return snake_case(name)

    monkeypatch.setattr(strict, "snake_case", counting)
    assert schema.load(body) == first
    assert calls == []
    with pytest.raises(ValidationError) as conflict:
        schema.load({**body, "rosInvocationId": "r"})
    assert "ros_invocation_id" in conflict.value.messages
    with pytest.raises(ValidationError) as missing:
        schema.load({"schemaVersion": 1, "cwd": "/tmp"})
    assert "rosInvocationId" in missing.value.messages
    assert calls == []
