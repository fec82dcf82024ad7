"""`POST /extensions/iac-code/v1/executions/<executionId>/cancel` (behaviour.md 7)."""

from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n import language_from_accept
from agui_bridge.web.auth import check_bearer
from agui_bridge.web.context import get_service
from agui_bridge.web.request_body import decode_json, read_limited, require_json_media_type

bp = Blueprint("iac_code_ext", __name__)


def _required_string(body: dict[str, object], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidInput("cancel_fields_required", field=f"/{name}")
    return value


@bp.post("/extensions/iac-code/v1/executions/<execution_id>/cancel")
def cancel_execution(execution_id: str) -> Response:
    service = get_service()
    settings = service.settings
    g.agui_language = language_from_accept(request.headers.get("Accept-Language"), settings.default_language)
    check_bearer(request.headers.get("Authorization"), settings.auth_token)
    require_json_media_type(request.headers.get("Content-Type"))
    limit = min(settings.max_request_bytes, settings.max_cancel_bytes)
    body = decode_json(
        read_limited(
            request.stream,
            request.headers.get("Content-Length"),
            limit,
            "cancel_request_too_large",
            "cancel_invalid_json",
        ),
        "cancel_invalid_json",
    )
    if not isinstance(body, dict):
        raise InvalidInput("cancel_not_an_object", field="")
    thread_id = _required_string(body, "threadId")
    ros_invocation_id = _required_string(body, "rosInvocationId")
    return jsonify(service.cancel(execution_id, thread_id, ros_invocation_id))
