"""Strict marshmallow building blocks for the request schemas (docs/design.md#input-validation).

marshmallow's own fields with `Rule`s as their error messages, the few fields marshmallow has no strict
form of (a boolean that is only true/false, a string map, a tagged union, text-or-parts), small
validators raising Rules, and the two schema bases: `AliasedSchema` (camelCase wire names with a
snake_case alias each) and `StrictSchema` (unknown keys refused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, pre_load

from agui_bridge.i18n.message_keys import MessageKey as K
from agui_bridge.validation.field_errors import Rule, rule, snake_case

__all__ = [
    "AliasedSchema",
    "StrictBoolean",
    "StrictSchema",
    "StringMap",
    "Tagged",
    "TextOrParts",
    "any_json",
    "array",
    "boolean",
    "integer",
    "json_object",
    "length",
    "nested",
    "one_of",
    "positive",
    "rule_messages",
    "schema_version_one",
    "string",
]


# --------------------------------------------------------------------------------------------
# Fields: marshmallow's own, with our rules as their error messages


def rule_messages(invalid: str) -> dict[str, Any]:
    """A field's error messages as Rules: `invalid` for a wrong type, the shared keys otherwise."""
    return {
        "required": [rule(K.FIELD_REQUIRED)],
        "null": [rule(K.FIELD_NULL)],
        "invalid": [rule(invalid)],
        "type": [rule(invalid)],
    }


def string(**options: Any) -> fields.String:
    return fields.String(error_messages=rule_messages(K.FIELD_TYPE_STRING), **options)


def integer(**options: Any) -> fields.Integer:
    """A JSON integer: ``strict`` refuses ``1.5`` and ``"1"``, and marshmallow refuses booleans."""
    return fields.Integer(strict=True, error_messages=rule_messages(K.FIELD_TYPE_INTEGER), **options)


class StrictBoolean(fields.Boolean):
    """JSON ``true``/``false`` only (marshmallow's Boolean also takes ``"true"``, ``1``, ``"yes"``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


def boolean(**options: Any) -> StrictBoolean:
    return StrictBoolean(error_messages=rule_messages(K.FIELD_TYPE_BOOLEAN), **options)


def json_object(**options: Any) -> fields.Dict:
    return fields.Dict(error_messages=rule_messages(K.FIELD_TYPE_OBJECT), **options)


def any_json(**options: Any) -> fields.Raw:
    return fields.Raw(error_messages=rule_messages(K.FIELD_INVALID), **options)


def nested(schema: Schema, **options: Any) -> fields.Nested:
    return fields.Nested(schema, error_messages=rule_messages(K.FIELD_TYPE_OBJECT), **options)


def array(item: fields.Field[Any], **options: Any) -> fields.List[Any]:
    return fields.List(item, error_messages=rule_messages(K.FIELD_TYPE_ARRAY), **options)


class StringMap(fields.Field[dict[str, str]]):
    """A JSON object of strings (``llmHeaders``). A bad value is reported at its own key, where
    ``fields.Dict`` would add a ``value`` level to the pointer."""

    def __init__(self, **options: Any) -> None:
        super().__init__(error_messages=rule_messages(K.FIELD_TYPE_OBJECT), **options)

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        bad = {key: [rule(K.FIELD_TYPE_STRING)] for key, item in value.items() if not isinstance(item, str)}
        if bad:
            raise ValidationError(bad)
        return dict(value)


class Tagged(fields.Field[dict[str, Any]]):
    """A JSON object whose ``tag`` picks its schema (message ``role``, part and source ``type``).

    Loads to the object unchanged: the envelope only checks shapes, later layers read the raw
    (camelCase) dicts.
    """

    def __init__(self, tag: str, schemas: Mapping[str, Schema], **options: Any) -> None:
        super().__init__(error_messages=rule_messages(K.FIELD_TYPE_OBJECT), **options)
        self.tag = tag
        self.schemas = dict(schemas)
        self.choices = ", ".join(schemas)

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        if self.tag not in value:
            raise ValidationError({self.tag: [rule(K.FIELD_REQUIRED)]})
        tag = value[self.tag]
        if not isinstance(tag, str) or tag not in self.schemas:
            raise ValidationError({self.tag: [rule(K.FIELD_ENUM, choices=self.choices)]})
        self.schemas[tag].load(value)
        return value


class TextOrParts(fields.Field[object]):
    """User and tool message ``content``: a string or an array of content parts."""

    def __init__(self, part: fields.Field[Any], **options: Any) -> None:
        super().__init__(error_messages=rule_messages(K.FIELD_TYPE_CONTENT), **options)
        self.parts = array(part)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> object:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return self.parts.deserialize(value)
        raise self.make_error("invalid")


# --------------------------------------------------------------------------------------------
# Validators


def one_of(choices: tuple[str, ...]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value not in choices:
            raise ValidationError([rule(K.FIELD_ENUM, choices=", ".join(choices))])

    return check


def length(low: int, high: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not low <= len(value) <= high:
            raise ValidationError([rule(K.FIELD_LENGTH, min=low, max=high)])

    return check


def addressable(problem_of: Callable[[str], str | None]) -> Callable[[Any], None]:
    """A threadId/runId the reattach and extension URLs can address (validation.addressable)."""

    def check(value: Any) -> None:
        problem = problem_of(value) if isinstance(value, str) else None
        if problem is not None:
            raise ValidationError([rule(problem)])

    return check


def positive(value: Any) -> None:
    if value <= 0:
        raise ValidationError([rule(K.FIELD_POSITIVE)])


def schema_version_one(value: Any) -> None:
    if value != 1:
        raise ValidationError([rule(K.SCHEMA_VERSION)])


# --------------------------------------------------------------------------------------------
# Schemas


class AliasedSchema(Schema):
    """camelCase wire names with a snake_case alias each; presence and conflicts decided on the raw object.

    A missing required field or a doubly spelled one fails here, before any field is loaded, so such
    an error is reported alone.
    """

    class Meta:
        unknown = EXCLUDE

    error_messages: ClassVar[dict[str, Any]] = {  # type: ignore[misc]
        "unknown": rule(K.FIELD_UNKNOWN),
        "type": rule(K.FIELD_TYPE_OBJECT),
    }

    #: Per load-field set: (camel, snake, required) of each field, spelled once (not on every load).
    _spellings: tuple[dict[str, Any], tuple[tuple[str, str, bool], ...]] | None = None

    def _spelling_table(self) -> tuple[tuple[str, str, bool], ...]:
        fields_now = self.load_fields
        cached = self._spellings
        if cached is None or cached[0] is not fields_now:
            table = []
            for name, field in fields_now.items():
                camel = field.data_key or name
                table.append((camel, snake_case(camel), field.required))
            cached = self._spellings = (fields_now, tuple(table))
        return cached[1]

    @pre_load
    def _resolve_spellings(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict):
            return data
        errors: dict[str, list[Rule]] = {}
        renamed = dict(data)
        for camel, snake, required in self._spelling_table():
            has_camel, has_snake = camel in data, snake != camel and snake in data
            if has_camel and has_snake:
                errors[snake] = [rule(K.FIELD_CONFLICT, other=camel)]
            elif required and not (has_camel or has_snake):
                errors[camel] = [rule(K.FIELD_REQUIRED)]
            elif has_snake:
                renamed[camel] = renamed.pop(snake)
        if errors:
            raise ValidationError(errors)
        return renamed


class StrictSchema(AliasedSchema):
    """The iac-code extension's objects: a key the schema does not name is an error."""

    class Meta:
        unknown = RAISE
