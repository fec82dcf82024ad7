"""The RunAgentInput entry point: the envelope, then the strict ``forwardedProps.iacCode``.

Two phases, in this order (docs/design.md#input-validation): the AG-UI envelope (what
``@ag-ui/client`` 1.0 sends must pass, docs/design.md#decision-agui-1-0-clients), then the strict
iac-code extension. The schemas live in `validation.schemas`; the first failing rule becomes
``InvalidInput`` with a JSON Pointer ``field`` and a rule-specific message key
(docs/design.md#decision-field-specific-errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import ValidationError

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.message_keys import MessageKey
from agui_bridge.validation.common_shape import accept_common_shape
from agui_bridge.validation.field_errors import first_error
from agui_bridge.validation.results import (
    CloudCredentials,
    Envelope,
    IacCodeProps,
    ResumeAnswer,
    RunInput,
    ThinkingOptions,
)
from agui_bridge.validation.schemas import ENVELOPE_SCHEMA, FORWARDED_PROPS_SCHEMA

__all__ = [
    "CloudCredentials",
    "IacCodeProps",
    "ResumeAnswer",
    "RunInput",
    "ThinkingOptions",
    "parse_run_input",
    "raw_preferred_language",
]


def _invalid_input(err: ValidationError, document: object, prefix: str = "") -> InvalidInput:
    messages = err.messages if isinstance(err.messages, dict) else {"_schema": err.messages}
    problem = first_error(messages, prefix, document)
    return InvalidInput(problem.message_key, field=problem.pointer, params=problem.params)


def _alias(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def raw_preferred_language(raw: dict[str, object]) -> object:
    """``forwardedProps.iacCode.preferredLanguage`` of an unvalidated body, or None if unreachable.

    Only for a body that failed validation, so that even its envelope error is localised by the payload's
    preference (docs/design.md#language-selection); `i18n.select_language` normalises the value.
    """
    if not isinstance(raw, dict):
        return None
    forwarded = _alias(raw, "forwardedProps", "forwarded_props")
    if not isinstance(forwarded, dict):
        return None
    iac_code = _alias(forwarded, "iacCode", "iac_code")
    if not isinstance(iac_code, dict):
        return None
    return _alias(iac_code, "preferredLanguage", "preferred_language")


def parse_run_input(raw: dict[str, object]) -> RunInput:
    """Validate a decoded request body; raise ``InvalidInput`` naming the first failing rule.

    Order: the envelope, then ``forwardedProps``/``iacCode``, then ``tools`` must be empty
    (docs/design.md#input-validation). Message *content* rules are not checked here: they fail
    in-stream (docs/design.md#message-content). CPU-bound: `POST /` calls it once, off the hub for a
    large body (`runs/request.py`).
    """
    return _parse_run_input(raw)


def _parse_run_input(raw: dict[str, object]) -> RunInput:
    """The validation itself, the common shape first (tests switch that fast path off to compare)."""
    if not isinstance(raw, dict):
        raise InvalidInput(MessageKey.NOT_AN_OBJECT)
    common = accept_common_shape(raw)  # the usual new run, without the schemas; anything else goes on below
    if common is not None:
        return common
    try:
        envelope: Envelope = ENVELOPE_SCHEMA.load(raw)
    except ValidationError as err:
        raise _invalid_input(err, raw) from None

    forwarded_key = "forwardedProps" if "forwardedProps" in raw else "forwarded_props"
    try:
        props: IacCodeProps = FORWARDED_PROPS_SCHEMA.load(envelope.forwarded_props)  # type: ignore[arg-type]
    except ValidationError as err:
        raise _invalid_input(err, envelope.forwarded_props, "/" + forwarded_key) from None

    if envelope.tools:
        raise InvalidInput(MessageKey.TOOLS_NOT_SUPPORTED, field="/tools", params={"field": "tools"})
    return envelope.with_props(props)
