"""`POST /`: RunAgentInput in, SSE out (docs/design.md#pre-stream-checks, in exact order)."""

from __future__ import annotations

from flask import Blueprint, Response, request

from agui_bridge.protocol.headers import EXECUTION_ID_HEADER
from agui_bridge.protocol.sse import SSE_CONTENT_TYPE, SSE_RESPONSE_HEADERS
from agui_bridge.web.context import get_service, get_worker
from agui_bridge.web.request_body import read_run_request

bp = Blueprint("agui", __name__)


@bp.post("/")
def run() -> Response:
    service = get_service()
    run_request = read_run_request(service.settings)
    # A burst is admitted a few runs at a time, once each body is in (docs/design.md#start-gate).
    with get_worker().admission_slot():
        stream = service.start_run(run_request, client_socket=request.environ.get("gunicorn.socket"))
    response = Response(stream, status=200, content_type=SSE_CONTENT_TYPE, direct_passthrough=True)
    for name, value in SSE_RESPONSE_HEADERS:
        response.headers[name] = value
    # A load balancer learns the execution's host from it (docs/http-api.md#execution-id-header).
    if stream.execution_id:
        response.headers[EXECUTION_ID_HEADER] = stream.execution_id
    return response
