"""Turn marshmallow error trees into JSON-Pointer field errors (docs/design.md#field-errors).

Our schemas never emit English: every error message they raise is an encoded *rule string*
``"<message_key>|<param>=<value>|..."`` (e.g. ``"field_enum|choices=normal, pipeline"``), so the
client-facing text is always localised from the catalogue and never leaks library wording or the
offending value. Plain marshmallow texts that slip through are mapped to a generic rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "RULE_OF_KEY",
    "FieldError",
    "display_path",
    "encode_rule",
    "escape_pointer_token",
    "field_errors_from_marshmallow",
    "first_error",
    "pointer_from_tokens",
]

#: message key -> short machine rule name (the ``rule`` of a FieldError).
RULE_OF_KEY: dict[str, str] = {
    "field_required": "required",
    "field_unknown": "unknown",
    "field_null": "null",
    "field_conflict": "conflict",
    "field_type_string": "type",
    "field_type_integer": "type",
    "field_type_boolean": "type",
    "field_type_object": "type",
    "field_type_array": "type",
    "field_type_content": "type",
    "field_enum": "enum",
    "field_length": "length",
    "field_positive": "positive",
    "field_invalid": "invalid",
    "schema_version": "schema_version",
    "forwarded_props_only_iaccode": "only_iaccode",
    "tools_not_supported": "tools_not_supported",
}

# marshmallow's own default texts, in case a stock field or validator ever reports one.
_MARSHMALLOW_TEXTS: dict[str, str] = {
    "Missing data for required field.": "field_required",
    "Unknown field.": "field_unknown",
    "Field may not be null.": "field_null",
    "Not a valid string.": "field_type_string",
    "Not a valid integer.": "field_type_integer",
    "Not a valid boolean.": "field_type_boolean",
    "Not a valid mapping type.": "field_type_object",
    "Not a valid list.": "field_type_array",
    "Invalid input type.": "field_type_object",
    "Invalid type.": "field_type_object",
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


def encode_rule(message_key: str, **params: object) -> str:
    """Encode a rule as the message string a schema raises (decoded again by this module)."""
    return "|".join([message_key, *(f"{k}={v}" for k, v in params.items())])


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


def _decode(message: str) -> tuple[str, dict[str, str]]:
    if message in _MARSHMALLOW_TEXTS:
        return _MARSHMALLOW_TEXTS[message], {}
    key, *pairs = message.split("|")
    if key not in RULE_OF_KEY:
        return "field_invalid", {}
    params: dict[str, str] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        params[name] = value
    return key, params


def _sort_key(error: FieldError) -> tuple[tuple[int, int, str], ...]:
    parts = error.pointer.split("/")[1:] if error.pointer else []
    return tuple((0, int(p), "") if p.isascii() and p.isdigit() else (1, 0, p) for p in parts)


def _walk(node: object, tokens: list[str | int], out: list[tuple[list[str | int], str]]) -> None:
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
    elif isinstance(node, str):
        out.append((tokens, node))
    else:
        out.append((tokens, "field_invalid"))


def field_errors_from_marshmallow(messages: Mapping[object, object], prefix: str = "") -> list[FieldError]:
    """Flatten ``ValidationError.messages`` into FieldErrors sorted by pointer (numeric indices).

    ``prefix`` is an escaped JSON Pointer prepended to every pointer (e.g. ``/forwardedProps``).
    """
    leaves: list[tuple[list[str | int], str]] = []
    _walk(messages, [], leaves)
    prefix_tokens = _split_prefix(prefix)
    result: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for tokens, message in leaves:
        key, params = _decode(message)
        pointer = pointer_from_tokens(tokens, prefix)
        if (pointer, key) in seen:
            continue
        seen.add((pointer, key))
        params = {"field": display_path(tokens, prefix_tokens), **params}
        result.append(FieldError(pointer, RULE_OF_KEY[key], key, params))
    result.sort(key=_sort_key)
    return result


def first_error(messages: Mapping[object, object], prefix: str = "") -> FieldError:
    """The deterministic primary error (lowest pointer); a generic one if the tree has no leaf."""
    errors = field_errors_from_marshmallow(messages, prefix)
    if errors:
        return errors[0]
    tokens = _split_prefix(prefix)
    return FieldError(prefix, "invalid", "field_invalid", {"field": display_path(tokens)})
