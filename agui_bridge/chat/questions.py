"""How `agui-bridge chat` asks an interrupt at the prompt (pure).

The question is derived from the interrupt's responseSchema: enum values and `oneOf` options are
numbered, free text is accepted where the schema allows it, and anything else is answered as raw JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Choice:
    label: str
    payload: dict[str, Any]
    aliases: tuple[str, ...]  # what may be typed instead of the number (lower-cased)


@dataclass(frozen=True)
class Question:
    """How one interrupt is asked at the prompt, derived from its responseSchema (pure)."""

    interrupt_id: str
    title: str
    text: str
    facts: tuple[tuple[str, str], ...]
    choices: tuple[Choice, ...]
    free_text: bool
    free_text_prompt: str | None
    raw_json: bool
    expires_at: str | None


def _option_titles(interrupt: Mapping[str, Any]) -> dict[str, str]:
    metadata = interrupt.get("metadata")
    options = metadata.get("standardOptions") if isinstance(metadata, dict) else None
    titles: dict[str, str] = {}
    if isinstance(options, list):
        for option in options:
            if isinstance(option, dict) and isinstance(option.get("id"), str):
                titles[option["id"]] = str(option.get("title") or option["id"])
    return titles


def _enum_property(schema: Mapping[str, Any]) -> tuple[str, list[Any]] | None:
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            if isinstance(prop, dict) and isinstance(prop.get("enum"), list) and prop["enum"]:
                return str(name), list(prop["enum"])
    return None


def question_for(interrupt: Mapping[str, Any]) -> Question:
    """Choices from the schema: enum values, or `oneOf` selectedId consts plus a freeText branch."""
    raw_schema = interrupt.get("responseSchema")
    schema: Mapping[str, Any] = raw_schema if isinstance(raw_schema, dict) else {}
    raw_metadata = interrupt.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    titles = _option_titles(interrupt)
    choices: list[Choice] = []
    free_text = False
    raw_json = False
    enumeration = _enum_property(schema)
    branches = schema.get("oneOf", schema.get("anyOf"))
    if enumeration is not None:
        name, values = enumeration
        for value in values:
            label = titles.get(str(value)) or str(value).replace("_", " ")
            choices.append(Choice(label, {name: value}, (str(value).lower(), label.lower())))
    elif isinstance(branches, list):
        for branch in branches:
            props = branch.get("properties") if isinstance(branch, dict) else None
            if not isinstance(props, dict):
                continue
            selected = props.get("selectedId")
            if isinstance(selected, dict) and "const" in selected:
                value = str(selected["const"])
                label = str(selected.get("title") or titles.get(value) or value)
                choices.append(Choice(label, {"selectedId": value}, (value.lower(), label.lower())))
            elif "freeText" in props:
                free_text = True
    else:
        raw_json = True
    message = str(interrupt.get("message") or "")
    prompt = metadata.get("prompt")
    text = prompt if choices and isinstance(prompt, str) and prompt else message
    facts = tuple(
        (label, str(metadata[key]))
        for label, key in (("tool", "toolName"), ("target", "target"), ("summary", "safeSummary"))
        if isinstance(metadata.get(key), str | int | float) and metadata.get(key) != ""
    )
    title = metadata.get("title")
    default_title = "Permission required" if interrupt.get("reason") == "tool_call" else "Input required"
    free_prompt = metadata.get("freeTextPrompt")
    expires_at = interrupt.get("expiresAt")
    return Question(
        interrupt_id=str(interrupt.get("id") or ""),
        title=title if isinstance(title, str) and title else default_title,
        text=text,
        facts=facts,
        choices=tuple(choices),
        free_text=free_text,
        free_text_prompt=free_prompt if isinstance(free_prompt, str) and free_prompt else None,
        raw_json=raw_json,
        expires_at=expires_at if isinstance(expires_at, str) else None,
    )


def answer_payload(question: Question, typed: str) -> dict[str, Any] | None:
    """The payload for what the user typed, or None if it is not an answer (ask again)."""
    text = typed.strip()
    if not text:
        return None
    if question.raw_json:
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    if text.isdigit() and 1 <= int(text) <= len(question.choices):
        return dict(question.choices[int(text) - 1].payload)
    for choice in question.choices:
        if text.lower() in choice.aliases:
            return dict(choice.payload)
    if question.free_text:
        return {"freeText": text}
    return None


def expires_in(expires_at: str | None, now: datetime | None = None) -> str | None:
    """`"8m59s"` until an RFC 3339 expiry, `"expired"` after it, None if absent or unparsable."""
    if not expires_at:
        return None
    try:
        moment = datetime.fromisoformat(expires_at)
    except ValueError:
        return None
    seconds = int((moment - (now or datetime.now(UTC))).total_seconds())
    if seconds <= 0:
        return "expired"
    return f"{seconds // 60}m{seconds % 60:02d}s"
