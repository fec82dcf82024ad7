"""Outbound A2A 1.0 messages and `metadata.iac_code` (pure; docs/design.md#a2a-metadata-written).

Credentials come from the current request on every call and are never stored (docs/design.md#state-document).
"""

from __future__ import annotations

from typing import Any

from agui_bridge.validation.run_input import IacCodeProps


def _trimmed(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def iac_code_metadata(props: IacCodeProps, cwd: str, language: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "cleanupOnly": props.cleanup_only,
        "rosInvocationId": props.ros_invocation_id,
        "preferredLanguage": language,
        "cwd": cwd,
    }
    optional: dict[str, Any] = {
        "user_id": props.user_id,
        "channel": props.channel,
        "candidatePresentation": props.candidate_presentation,
        "run_mode": props.run_mode,
        "pipeline_name": props.pipeline_name,
        "iac_code_model": _trimmed(props.model),
        "iac_code_api_key": _trimmed(props.llm_api_key),
        "llm_headers": props.llm_headers,
    }
    cloud = props.alibaba_cloud
    if cloud is not None:
        optional["alibaba_cloud_access_key_id"] = cloud.access_key_id
        optional["alibaba_cloud_access_key_secret"] = cloud.access_key_secret
        optional["alibaba_cloud_security_token"] = cloud.security_token
        optional["alibaba_cloud_region_id"] = cloud.region_id
    thinking = props.thinking
    if thinking is not None:
        block: dict[str, Any] = {"enabled": thinking.enabled}
        if effort := _trimmed(thinking.effort):
            block["effort"] = effort
        if thinking.budget is not None and thinking.budget > 0:
            block["budget"] = thinking.budget
        optional["thinking"] = block
    meta.update({k: v for k, v in optional.items() if v is not None})
    return meta


def user_message(
    message_id: str,
    parts: list[dict[str, Any]],
    metadata: dict[str, Any],
    context_id: str,
    task_id: str | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"iac_code": metadata},
        "contextId": context_id,
    }
    if task_id is not None:
        message["taskId"] = task_id
    return message


def permission_answer_part(task_id: str, input_id: str, tool_use_id: str, decision: str) -> dict[str, Any]:
    """The six-key permission answer data part (docs/design.md#a2a-metadata-written; A2A rejects any other key)."""
    return {
        "data": {
            "schemaVersion": 1,
            "kind": "permission",
            "requestTaskId": task_id,
            "inputId": input_id,
            "toolUseId": tool_use_id,
            "decision": decision,
        },
        "mediaType": "application/json",
    }


def send_params(message: dict[str, Any]) -> dict[str, Any]:
    return {"message": message, "configuration": {"acceptedOutputModes": ["text/plain"]}}


def session_id_of(iac: dict[str, Any]) -> str | None:
    """First non-empty iac-code session id of an event (docs/design.md#a2a-identities)."""
    sid = iac.get("iacCodeSessionId")
    if isinstance(sid, str) and sid:
        return sid
    pipeline = iac.get("pipeline")
    if isinstance(pipeline, dict):
        sid = pipeline.get("iacCodeSessionId")
        if isinstance(sid, str) and sid:
            return sid
    batch = iac.get("pipelineBatch")
    if isinstance(batch, dict) and isinstance(batch.get("events"), list):
        for envelope in batch["events"]:
            if isinstance(envelope, dict):
                sid = envelope.get("iacCodeSessionId")
                if isinstance(sid, str) and sid:
                    return sid
    return None
