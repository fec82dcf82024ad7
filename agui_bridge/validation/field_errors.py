"""Turn marshmallow error trees into JSON-Pointer field errors (docs/design.md#field-errors).

Our schemas never emit English: every error they raise is a `Rule` (a message key and its
placeholder values), so the client-facing text is always localised from the catalogue and never
leaks library wording or the offending value. A bare message key is read as a rule without
parameters; plain marshmallow texts that slip through are mapped to a generic rule. This is the one
place a validation error becomes a `FieldError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agui_bridge.i18n.message_keys import MessageKey

__all__ = [
    "RULE_OF_KEY",
    "FieldError",
    "Rule",
    "display_path",
    "escape_pointer_token",
    "field_errors_from_marshmallow",
    "first_error",
    "pointer_from_tokens",
    "rule",
    "snake_case",
]

#: message key -> short machine rule name (the ``rule`` of a FieldError).
RULE_OF_KEY: dict[str, str] = {
    MessageKey.FIELD_REQUIRED: "required",
    MessageKey.FIELD_UNKNOWN: "unknown",
    MessageKey.FIELD_NULL: "null",
    MessageKey.FIELD_CONFLICT: "conflict",
    MessageKey.FIELD_TYPE_STRING: "type",
    MessageKey.FIELD_TYPE_INTEGER: "type",
    MessageKey.FIELD_TYPE_BOOLEAN: "type",
    MessageKey.FIELD_TYPE_OBJECT: "type",
    MessageKey.FIELD_TYPE_ARRAY: "type",
    MessageKey.FIELD_TYPE_CONTENT: "type",
    MessageKey.FIELD_ENUM: "enum",
    MessageKey.FIELD_LENGTH: "length",
    MessageKey.FIELD_POSITIVE: "positive",
    MessageKey.FIELD_INVALID: "invalid",
    MessageKey.ID_CONTROL_CHARACTERS: "control_characters",
    MessageKey.RUN_ID_SLASH: "not_addressable",
    MessageKey.THREAD_ID_LEADING_SLASH: "not_addressable",
    MessageKey.SCHEMA_VERSION: "schema_version",
    MessageKey.FORWARDED_PROPS_ONLY_IACCODE: "only_iaccode",
    MessageKey.TOOLS_NOT_SUPPORTED: "tools_not_supported",
    MessageKey.CANCEL_FIELDS_REQUIRED: "required",
    MessageKey.STATUS_ROS_REQUIRED: "required",
}

# marshmallow's own default texts, in case a stock field or validator ever reports one.
_MARSHMALLOW_TEXTS: dict[str, str] = {
    "Missing data for required field.": MessageKey.FIELD_REQUIRED,
    "Unknown field.": MessageKey.FIELD_UNKNOWN,
    "Field may not be null.": MessageKey.FIELD_NULL,
    "Not a valid string.": MessageKey.FIELD_TYPE_STRING,
    "Not a valid integer.": MessageKey.FIELD_TYPE_INTEGER,
    "Not a valid boolean.": MessageKey.FIELD_TYPE_BOOLEAN,
    "Not a valid mapping type.": MessageKey.FIELD_TYPE_OBJECT,
    "Not a valid list.": MessageKey.FIELD_TYPE_ARRAY,
    "Invalid input type.": MessageKey.FIELD_TYPE_OBJECT,
    "Invalid type.": MessageKey.FIELD_TYPE_OBJECT,
}


@dataclass(frozen=True)
class FieldError:
    """One failed rule at one place of the request body.

    ``pointer`` is an RFC 6901 JSON Pointer ("" = the whole body), ``rule`` a short machine name,
    ``message_key`` the catalogue key, ``params`` the placeholder values (always has ``field``).
    """

    pointer: str
    rule: str
    message_key: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """A failed rule as a schema raises it: the catalogue key and its placeholder values."""

    message_key: str
    params: tuple[tuple[str, str], ...] = ()


def rule(message_key: str, **params: object) -> Rule:
    """The `Rule` a schema raises for `message_key`; parameter values become strings."""
    return Rule(str(message_key), tuple((name, str(value)) for name, value in params.items()))


def snake_case(name: str) -> str:
    """``rosInvocationId`` -> ``ros_invocation_id``: the second accepted spelling of a wire name."""
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def escape_pointer_token(token: str | int) -> str:
    """RFC 6901: ``~`` -> ``~0`` then ``/`` -> ``~1``; ints are array indices."""
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer_from_tokens(tokens: Sequence[str | int], prefix: str = "") -> str:
    return prefix + "".join("/" + escape_pointer_token(t) for t in tokens)


def display_path(tokens: Sequence[str | int], prefix_tokens: Sequence[str | int] = ()) -> str:
    """Readable field name for messages: ``forwardedProps.iacCode.cwd``, ``messages[0].role``."""
    out = ""
    for token in (*prefix_tokens, *tokens):
        if isinstance(token, int):
            out += f"[{token}]"
        else:
            out += ("." if out else "") + token
    return out or "RunAgentInput"


def _split_prefix(prefix: str) -> list[str | int]:
    """Decode an already-escaped pointer prefix into tokens (for display paths)."""
    if not prefix:
        return []
    tokens: list[str | int] = []
    for raw in prefix.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        tokens.append(int(token) if token.isascii() and token.isdigit() else token)
    return tokens


def _decode(message: object) -> tuple[str, dict[str, str]]:
    if isinstance(message, Rule) and message.message_key in RULE_OF_KEY:
        return message.message_key, dict(message.params)
    if isinstance(message, str) and message in _MARSHMALLOW_TEXTS:
        return _MARSHMALLOW_TEXTS[message], {}
    if isinstance(message, str) and message in RULE_OF_KEY:
        return message, {}
    return MessageKey.FIELD_INVALID, {}


def _sort_key(error: FieldError) -> tuple[tuple[int, int, str], ...]:
    parts = error.pointer.split("/")[1:] if error.pointer else []
    return tuple((0, int(p), "") if p.isascii() and p.isdigit() else (1, 0, p) for p in parts)


def _walk(node: object, tokens: list[str | int], out: list[tuple[list[str | int], object]]) -> None:
    if isinstance(node, Mapping):
        for key, child in node.items():
            if key == "_schema":
                _walk(child, tokens, out)
            elif isinstance(key, int):
                _walk(child, [*tokens, key], out)
            else:
                _walk(child, [*tokens, str(key)], out)
    elif isinstance(node, list | tuple):
        for child in node:
            _walk(child, tokens, out)
    else:
        out.append((tokens, node))


def _as_sent(tokens: list[str | int], document: object) -> list[str | int]:
    """Spell each name of `tokens` as `document` does: a schema reports the camelCase wire name, but a
    client that sent the snake_case spelling must see the pointer to what it sent."""
    spelled: list[str | int] = []
    node = document
    for token in tokens:
        if isinstance(node, dict) and isinstance(token, str) and token not in node:
            snake = snake_case(token)
            if snake in node:
                token = snake
        spelled.append(token)
        if isinstance(node, dict):
            node = node.get(token)
        elif isinstance(node, list) and isinstance(token, int) and 0 <= token < len(node):
            node = node[token]
        else:
            node = None
    return spelled


def field_errors_from_marshmallow(
    messages: Mapping[Any, Any], prefix: str = "", document: object = None
) -> list[FieldError]:
    """Flatten ``ValidationError.messages`` into FieldErrors sorted by pointer (numeric indices).

    ``prefix`` is an escaped JSON Pointer prepended to every pointer (e.g. ``/forwardedProps``);
    ``document``, the validated input, decides the spelling of each name (see `_as_sent`).
    """
    leaves: list[tuple[list[str | int], object]] = []
    _walk(messages, [], leaves)
    prefix_tokens = _split_prefix(prefix)
    result: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for found, message in leaves:
        tokens = _as_sent(found, document)
        key, params = _decode(message)
        pointer = pointer_from_tokens(tokens, prefix)
        if (pointer, key) in seen:
            continue
        seen.add((pointer, key))
        params = {"field": display_path(tokens, prefix_tokens), **params}
        result.append(FieldError(pointer, RULE_OF_KEY[key], key, params))
    result.sort(key=_sort_key)
    return result


def first_error(messages: Mapping[Any, Any], prefix: str = "", document: object = None) -> FieldError:
    """The deterministic primary error (lowest pointer); a generic one if the tree has no leaf."""
    errors = field_errors_from_marshmallow(messages, prefix, document)
    if errors:
        return errors[0]
    tokens = _split_prefix(prefix)
    return FieldError(prefix, "invalid", MessageKey.FIELD_INVALID, {"field": display_path(tokens)})
