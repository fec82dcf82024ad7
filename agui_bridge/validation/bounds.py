"""Cheap, bounded checks of a decoded body against `agui_bridge.config.limits`, before any schema work.

The walk is iterative (no recursion, so no RecursionError however deep the body) and stops at the
first cap exceeded, so it never costs more than MAX_JSON_VALUES steps. Values of the wrong type are
left alone: the schema reports them with its own rule afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agui_bridge.config import limits
from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.message_keys import MessageKey
from agui_bridge.validation.field_errors import display_path, pointer_from_tokens

__all__ = ["check_body_bounds", "check_id", "check_json_shape", "check_run_input_bounds", "prescan_json_text"]

_Path = tuple[str | int, ...]
#: A JSON string (unrolled loop: long strings are matched by one fast character-set run) or one
#: structural character that matters for counting.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')
_QUOTE, _COMMA, _OPENERS, _CLOSERS = ord('"'), ord(","), frozenset(b"[{"), frozenset(b"]}")


def prescan_json_text(body: bytes) -> None:
    """Refuse, before decoding, a body that must exceed the value or depth caps.

    `json.loads` holds the GIL for its whole run, so decoding ~6M tiny values would stall the hub
    even from a native thread. A body whose commas and openers (strings included) stay under
    MAX_JSON_VALUES decodes cheaply and is let through at once; otherwise a string-aware token scan
    (Python steps, so other threads and the hub keep running) counts the commas outside strings (a
    lower bound of the values) and the nesting, and stops at the first cap exceeded.
    """
    if body.count(b",") + body.count(b"[") + body.count(b"{") < limits.MAX_JSON_VALUES:
        return  # even counting every comma and opener, the decode is bounded; the walk is exact
    commas = depth = 0
    for match in _TOKEN.finditer(body):
        first = body[match.start()]
        if first == _QUOTE:
            continue
        if first == _COMMA:
            commas += 1
            if commas >= limits.MAX_JSON_VALUES:
                raise _fail(MessageKey.JSON_TOO_MANY_VALUES, (), max=limits.MAX_JSON_VALUES)
        elif first in _OPENERS:
            depth += 1
            if depth > limits.MAX_JSON_DEPTH:
                raise _fail(MessageKey.JSON_TOO_DEEP, (), max=limits.MAX_JSON_DEPTH)
        elif first in _CLOSERS:
            depth -= 1


def _fail(key: str, tokens: _Path, **params: object) -> InvalidInput:
    values = {"field": display_path(tokens), **{name: str(value) for name, value in params.items()}}
    return InvalidInput(key, field=pointer_from_tokens(tokens), params=values)


def check_json_shape(value: object) -> None:
    """Depth at most MAX_JSON_DEPTH and at most MAX_JSON_VALUES values, the root counted."""
    # Each entry: (node, depth, link) where link = (parent_link, key) rebuilds the path on failure.
    stack: list[tuple[object, int, Any]] = [(value, 1, None)]
    count = 0
    while stack:
        node, depth, link = stack.pop()
        count += 1
        if count > limits.MAX_JSON_VALUES:
            raise _fail(MessageKey.JSON_TOO_MANY_VALUES, (), max=limits.MAX_JSON_VALUES)
        if isinstance(node, dict):
            children: Any = node.items()
        elif isinstance(node, list):
            children = enumerate(node)
        else:
            continue
        if depth > limits.MAX_JSON_DEPTH:
            raise _fail(MessageKey.JSON_TOO_DEEP, _unlink(link), max=limits.MAX_JSON_DEPTH)
        for key, child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (link, key)))
            else:
                count += 1
                if count > limits.MAX_JSON_VALUES:
                    raise _fail(MessageKey.JSON_TOO_MANY_VALUES, (), max=limits.MAX_JSON_VALUES)


def _unlink(link: Any) -> _Path:
    tokens: list[str | int] = []
    while link is not None:
        link, key = link
        tokens.append(key)
    return tuple(reversed(tokens))


def check_id(value: object, tokens: _Path, max_chars: int = limits.MAX_ID_CHARS, *, required: bool = False) -> None:
    """An id over its cap (or empty, if `required`) is INVALID_INPUT at its own pointer; so is one
    with a lone surrogate, which no state file can hold. Other types are the schema's concern."""
    if not isinstance(value, str):
        return
    if len(value) > max_chars or (required and not value):
        raise _fail(MessageKey.FIELD_LENGTH, tokens, min=1, max=max_chars)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(MessageKey.FIELD_INVALID, tokens) from None


def _alias(data: Mapping[str, object], camel: str, snake: str) -> tuple[str, object]:
    """(name present, value): the camelCase spelling wins, as in the schema."""
    if camel in data:
        return camel, data[camel]
    return snake, data.get(snake)


def _check_list(value: object, tokens: _Path, cap: int) -> Sequence[object]:
    if not isinstance(value, list):
        return ()
    if len(value) > cap:
        raise _fail(MessageKey.TOO_MANY_ITEMS, tokens, max=cap)
    return value


def _check_message(message: object, index: int, parts_seen: int) -> int:
    """Ids, text size and part count of one message; returns the running part count."""
    if not isinstance(message, dict):
        return parts_seen
    base: _Path = ("messages", index)
    check_id(message.get("id"), (*base, "id"))
    name, call_id = _alias(message, "toolCallId", "tool_call_id")
    check_id(call_id, (*base, name))
    content = message.get("content")
    text_chars = 0
    if isinstance(content, str):
        text_chars = len(content)
    elif isinstance(content, list):
        parts_seen += len(content)
        if parts_seen > limits.MAX_CONTENT_PARTS:
            raise _fail(MessageKey.TOO_MANY_PARTS, (*base, "content"), max=limits.MAX_CONTENT_PARTS)
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                text_chars += len(part["text"])
    if text_chars > limits.MAX_MESSAGE_TEXT_CHARS:
        raise _fail(MessageKey.MESSAGE_TEXT_TOO_LONG, (*base, "content"), max=limits.MAX_MESSAGE_TEXT_CHARS)
    name, calls = _alias(message, "toolCalls", "tool_calls")
    if isinstance(calls, list):
        parts_seen += len(calls)
        if parts_seen > limits.MAX_CONTENT_PARTS:
            raise _fail(MessageKey.TOO_MANY_PARTS, (*base, name), max=limits.MAX_CONTENT_PARTS)
        for call_index, call in enumerate(calls):
            if isinstance(call, dict):
                check_id(call.get("id"), (*base, name, call_index, "id"))
    return parts_seen


def check_run_input_bounds(raw: Mapping[str, object]) -> None:
    """The RunAgentInput caps: ids, list sizes, message text, parts (docs/http-api.md#limits)."""
    for camel, snake in (("threadId", "thread_id"), ("runId", "run_id")):
        name, value = _alias(raw, camel, snake)
        check_id(value, (name,), required=True)
    name, value = _alias(raw, "parentRunId", "parent_run_id")
    check_id(value, (name,))
    name, messages = _alias(raw, "messages", "messages")
    parts = 0
    for index, message in enumerate(_check_list(messages, (name,), limits.MAX_MESSAGES)):
        parts = _check_message(message, index, parts)
    for key in ("tools", "context"):
        _check_list(raw.get(key), (key,), limits.MAX_LIST_ITEMS)
    for index, entry in enumerate(_check_list(raw.get("resume"), ("resume",), limits.MAX_LIST_ITEMS)):
        if isinstance(entry, dict):
            name, value = _alias(entry, "interruptId", "interrupt_id")
            check_id(value, ("resume", index, name))
    forwarded_name, forwarded = _alias(raw, "forwardedProps", "forwarded_props")
    if not isinstance(forwarded, dict):
        return
    iac_name, iac = _alias(forwarded, "iacCode", "iac_code")
    if not isinstance(iac, dict):
        return
    base: _Path = (forwarded_name, iac_name)
    name, value = _alias(iac, "userId", "user_id")
    check_id(value, (*base, name))
    name, value = _alias(iac, "rosInvocationId", "ros_invocation_id")
    check_id(value, (*base, name), limits.MAX_ROS_INVOCATION_ID_CHARS)


def check_body_bounds(value: object) -> None:
    """Everything a decoded POST / body must satisfy before the schema sees it.

    The named caps first (their errors point at the field), then the generic shape walk.
    """
    if isinstance(value, dict):
        check_run_input_bounds(value)
    check_json_shape(value)
