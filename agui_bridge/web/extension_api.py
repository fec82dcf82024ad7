"""`POST /extensions/iac-code/v1/executions/<executionId>/cancel` (docs/design.md#cancellation)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from agui_bridge import limits
from agui_bridge.errors import ExecutionNotFound, InvalidInput
from agui_bridge.validation.bounds import check_id
from agui_bridge.web.context import get_service
from agui_bridge.web.request_body import read_extension_body

bp = Blueprint("iac_code_ext", __name__)


def _required_string(body: dict[str, object], name: str, max_chars: int) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidInput("cancel_fields_required", field=f"/{name}")
    check_id(value, (name,), max_chars)
    return value


@bp.post("/extensions/iac-code/v1/executions/<execution_id>/cancel")
def cancel_execution(execution_id: str) -> Response:
    service = get_service()
    body = read_extension_body(service.settings, "cancel")
    thread_id = _required_string(body, "threadId", limits.MAX_ID_CHARS)
    ros_invocation_id = _required_string(body, "rosInvocationId", limits.MAX_ROS_INVOCATION_ID_CHARS)
    if len(execution_id) > limits.MAX_ID_CHARS:
        raise ExecutionNotFound()  # no execution can have such an id: no state is touched
    return jsonify(service.cancel(execution_id, thread_id, ros_invocation_id))
