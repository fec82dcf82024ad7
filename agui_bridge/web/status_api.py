"""`POST /extensions/iac-code/v1/threads/<threadId>/status`: the thread status extension
(docs/design.md#decision-status-extension).

Same checks, order, limits and error envelope as the cancellation extension (docs/design.md#cancellation):
language from Accept-Language, auth 401, media type 415, 64 KiB body limit 413, JSON 400, object
400, then `rosInvocationId` (a non-empty string) 400, then a threadId `POST /` would refuse (control
characters, `/`) 400. The answer is built by `runs.status`.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from agui_bridge.config import limits
from agui_bridge.errors import ExecutionNotFound
from agui_bridge.protocol.events import now_ms
from agui_bridge.runs.status import thread_status
from agui_bridge.validation.addressable import check_addressable_ids
from agui_bridge.validation.extension_bodies import STATUS_BODY, StatusRequest, load_extension_body
from agui_bridge.web.context import get_service
from agui_bridge.web.request_body import read_extension_body

bp = Blueprint("iac_code_status", __name__)

STATUS_PATH = "/extensions/iac-code/v1/threads/<path:thread_id>/status"


@bp.post(STATUS_PATH)
def thread_status_view(thread_id: str) -> Response:
    service = get_service()
    body = read_extension_body(service.settings, "status")
    request: StatusRequest = load_extension_body(STATUS_BODY, body)
    ros_invocation_id = request.ros_invocation_id
    check_addressable_ids(threadId=thread_id)
    if len(thread_id) > limits.MAX_ID_CHARS or len(ros_invocation_id) > limits.MAX_ROS_INVOCATION_ID_CHARS:
        raise ExecutionNotFound()  # POST / never admits such ids, so no such thread exists
    answer = thread_status(service.store, thread_id, ros_invocation_id, now_ms(), service.lease_live)
    response = jsonify(answer)
    response.headers["Cache-Control"] = "no-store"
    return response
