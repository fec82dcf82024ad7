"""Interrupt answers checked against the interrupt's `responseSchema` (pure; docs/design.md#answer-validation).

JSON Schema Draft 2020-12 with the formats of `validation/formats.py` checked (those only: jsonschema's own
checkers depend on optional packages that are slow to import) and a registry that holds the meta-schemas only,
so a `$ref` can never make the bridge fetch anything (the default registry would;
docs/design.md#answer-validation).
Validators are cached by the canonical text of their schema; there are few distinct schemas.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema_specifications
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from agui_bridge.validation.formats import FORMAT_CHECKS

#: The formats a payload schema may rely on; a unit test asserts each has a checker installed.
REQUIRED_FORMATS = ("date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname")


def _format_checker() -> FormatChecker:
    """A checker that knows our formats only (`FormatChecker(())` starts empty, not with every format)."""
    checker = FormatChecker(())
    for name, check in FORMAT_CHECKS.items():
        checker.checks(name)(check)
    return checker


FORMAT_CHECKER = _format_checker()


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Validator:
    schema = json.loads(schema_text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(
        schema,
        registry=jsonschema_specifications.REGISTRY,
        format_checker=FORMAT_CHECKER,
    )


def payload_errors(schema: dict[str, Any], payload: Any) -> list[str]:
    """JSON Pointers of the places where `payload` breaks `schema` (empty when it conforms).

    A schema that is not a valid 2020-12 schema rejects every payload (reported at the root), so a
    broken interrupt can be answered only by cancelling it, never by something unchecked.
    """
    try:
        validator = _validator(json.dumps(schema, sort_keys=True, separators=(",", ":")))
    except (SchemaError, TypeError, ValueError):
        return [""]
    try:
        errors = sorted(validator.iter_errors(payload), key=lambda e: [str(p) for p in e.absolute_path])
    except Unresolvable:  # a `$ref` outside the schema: never fetched, so nothing can conform
        return [""]
    return ["".join(f"/{p}" for p in error.absolute_path) for error in errors]


def conforms(schema: dict[str, Any], payload: Any) -> bool:
    return not payload_errors(schema, payload)


def json_chars_exceed(value: Any, limit: int) -> bool:
    """Whether the compact JSON text of `value` is longer than `limit` characters.

    Counted from below (a string's characters and quotes, escapes not counted; a number one character) by a
    walk that stops once past `limit`, so an answer too large to validate cheaply is refused cheaply
    (docs/design.md#answer-validation).
    """
    total = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, dict):
            total += 1 + len(item) + sum(len(key) + 3 for key in item)  # braces, commas; quoted keys, colons
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 1 + len(item)  # brackets and commas
            stack.extend(item)
        elif item is None or item is True:
            total += 4
        elif item is False:
            total += 5
        else:
            total += 1
        if total > limit:
            return True
    return False
