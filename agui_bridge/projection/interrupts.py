"""A2A input-required inputs -> AG-UI interrupts (pure).

See docs/design.md#a2a-metadata-read and docs/design.md#interrupt-building.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from agui_bridge.i18n.language import normalise_language, translate
from agui_bridge.projection.values import integral, non_empty_str
from agui_bridge.protocol.ids import emitted_id

INPUT_ALLOWED_KEYS = frozenset(
    {
        "schemaVersion", "kind", "requestTaskId", "contextId", "inputId", "toolUseId", "toolName", "title",
        "purpose", "effect", "target", "isReadOnly", "prompt", "safeSummary", "options", "language",
        "deploymentSummary", "scope", "subPipelineId", "operation", "displayParameters", "allowFreeText",
        "freeTextPrompt", "required",
    }
)  # fmt: skip


@dataclass(frozen=True)
class InputRequest:
    """One allow-listed input projection and whether it is a sideband (Pipeline) wait.

    `input_id` is the AG-UI interrupt id (the kernel's `value["inputId"]`, bounded like every emitted
    id: docs/design.md#emitted-ids); the kernel is always answered with `value["inputId"]`.
    """

    input_id: str
    value: dict[str, Any]
    sideband: bool


def allow_listed(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(integral(v)) for k, v in raw.items() if k in INPUT_ALLOWED_KEYS}


def collect_inputs(iac: dict[str, Any]) -> list[InputRequest]:
    """`input` plus every `pendingPermissions` entry with `required === true`, de-duplicated."""
    if "input" not in iac and "pendingPermissions" not in iac:
        return []  # most events (every text delta) ask for nothing
    candidates: list[tuple[dict[str, Any], bool]] = []
    direct = iac.get("input")
    if isinstance(direct, dict):
        sideband = direct.get("scope") == "candidate" or isinstance(direct.get("subPipelineId"), str)
        candidates.append((direct, sideband))
    pending = iac.get("pendingPermissions")
    if isinstance(pending, list):
        candidates.extend((item, True) for item in pending if isinstance(item, dict))
    found: dict[str, InputRequest] = {}
    for raw, sideband in candidates:
        if raw.get("required") is not True:
            continue
        value = allow_listed(raw)
        kernel_input_id = non_empty_str(value.get("inputId"))
        if kernel_input_id is None:
            kernel_input_id = f"input-{uuid.uuid4().hex}"
            value["inputId"] = kernel_input_id
        input_id = emitted_id(kernel_input_id)
        previous = found.get(input_id)
        found[input_id] = InputRequest(input_id, value, sideband or (previous.sideband if previous else False))
    return list(found.values())


def _standard_options(options: object) -> list[dict[str, str]]:
    if not isinstance(options, list):
        return []
    result: list[dict[str, str]] = []
    used: dict[str, int] = {}
    for index, option in enumerate(options):
        if isinstance(option, dict):
            raw_id = option.get("id", option.get("candidate_index", index))
            option_id = str(integral(raw_id)) if raw_id is not None else ""
            title_raw = option.get("label") or option.get("name") or option.get("title")
            title = str(title_raw) if title_raw else option_id
        else:
            option_id = title = str(integral(option))
        if not option_id:
            option_id = f"option-{index + 1}"
            title = title or option_id
        count = used.get(option_id, 0) + 1
        used[option_id] = count
        if count > 1:
            option_id = f"{option_id}-{count}"
        result.append({"id": option_id, "title": title})
    return result


def option_title(value: dict[str, Any], option_id: str) -> str | None:
    """The title of the standard option `option_id` of an input (label, name or title), if any."""
    for option in _standard_options(value.get("options")):
        if option["id"] == option_id:
            return option["title"]
    return None


def response_schema(value: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema an answer to this input must satisfy (docs/design.md#interrupt-building)."""
    if value.get("kind") == "permission":
        return {
            "type": "object",
            "properties": {"decision": {"type": "string", "enum": ["allow_once", "deny"]}},
            "required": ["decision"],
            "additionalProperties": False,
        }
    options = _standard_options(value.get("options"))
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"selectedId": {"type": "string", "const": o["id"], "title": o["title"]}},
            "required": ["selectedId"],
            "additionalProperties": False,
        }
        for o in options
    ]
    if value.get("allowFreeText") or not options:
        branches.append(
            {
                "type": "object",
                "properties": {"freeText": {"type": "string", "minLength": 1}},
                "required": ["freeText"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": branches}


def build_interrupt(value: dict[str, Any], expires_at: str) -> dict[str, Any]:
    """The AG-UI interrupt announced in RUN_FINISHED (camelCase, no null optional fields)."""
    language = normalise_language(value.get("language")) or "en"
    options = _standard_options(value.get("options"))
    metadata: dict[str, Any] = {"schemaVersion": 1, **value, "standardOptions": options}
    interrupt: dict[str, Any] = {"id": emitted_id(value["inputId"])}
    if value.get("kind") == "permission":
        interrupt["reason"] = "tool_call"
        interrupt["message"] = (
            non_empty_str(value.get("prompt"))
            or non_empty_str(value.get("title"))
            or translate("permission_required", language)
        )
    else:
        interrupt["reason"] = "input_required"
        message = non_empty_str(value.get("prompt")) or translate("input_required", language)
        if options:
            message += "\n" + "\n".join(f"- {o['id']}: {o['title']}" for o in options)
        interrupt["message"] = message
    tool_call_id = non_empty_str(value.get("toolUseId"))
    if tool_call_id is not None:
        interrupt["toolCallId"] = emitted_id(tool_call_id)
    interrupt["responseSchema"] = response_schema(value)
    interrupt["expiresAt"] = expires_at
    interrupt["metadata"] = metadata
    return interrupt
