"""`POST /extensions/iac-code/v1/executions/<executionId>/cancel` (docs/design.md#cancellation)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from agui_bridge.config import limits
from agui_bridge.errors import ExecutionNotFound
from agui_bridge.validation.extension_bodies import CANCEL_BODY, CancelRequest, load_extension_body
from agui_bridge.web.context import get_service
from agui_bridge.web.request_body import read_extension_body

bp = Blueprint("iac_code_ext", __name__)


@bp.post("/extensions/iac-code/v1/executions/<execution_id>/cancel")
def cancel_execution(execution_id: str) -> Response:
    service = get_service()
    body = read_extension_body(service.settings, "cancel")
    request: CancelRequest = load_extension_body(CANCEL_BODY, body)
    if len(execution_id) > limits.MAX_ID_CHARS:
        raise ExecutionNotFound()  # no execution can have such an id: no state is touched
    return jsonify(service.cancel(execution_id, request.thread_id, request.ros_invocation_id))
