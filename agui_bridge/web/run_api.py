"""`POST /`: RunAgentInput in, SSE out (docs/design.md#pre-stream-checks, in exact order)."""

from __future__ import annotations

from flask import Blueprint, Response, g, request

from agui_bridge.i18n.language import normalise_language
from agui_bridge.i18n.message_keys import MessageKey
from agui_bridge.protocol.sse import SSE_CONTENT_TYPE, SSE_RESPONSE_HEADERS
from agui_bridge.validation.run_input import raw_preferred_language
from agui_bridge.web.context import get_service
from agui_bridge.web.request_body import decode_run_body, read_json_object
from agui_bridge.worker.start_gate import admission_slot

bp = Blueprint("agui", __name__)


@bp.post("/")
def run() -> Response:
    service = get_service()
    settings = service.settings
    raw = read_json_object(
        settings,
        settings.max_request_bytes,
        too_large_key=MessageKey.REQUEST_TOO_LARGE,
        invalid_json_key=MessageKey.INVALID_JSON,
        not_object_key=MessageKey.NOT_AN_OBJECT,
        decode=decode_run_body,
    )
    preferred = normalise_language(raw_preferred_language(raw))
    if preferred is not None:
        g.agui_language = preferred
    # A burst is admitted a few runs at a time, once each body is in (docs/design.md#start-gate).
    with admission_slot(service.runtime.start_gate):
        stream = service.start_run(raw, g.agui_language, client_socket=request.environ.get("gunicorn.socket"))
    response = Response(stream, status=200, content_type=SSE_CONTENT_TYPE, direct_passthrough=True)
    for name, value in SSE_RESPONSE_HEADERS:
        response.headers[name] = value
    return response
