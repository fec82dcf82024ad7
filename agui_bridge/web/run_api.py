"""`POST /`: RunAgentInput in, SSE out (behaviour.md 1.4, checks in exact order)."""

from __future__ import annotations

from flask import Blueprint, Response, g, request

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n import language_from_accept, normalise_language
from agui_bridge.validation.run_input import raw_preferred_language
from agui_bridge.web.auth import check_bearer
from agui_bridge.web.context import get_service
from agui_bridge.web.request_body import decode_json, read_limited, require_json_media_type
from agui_bridge.wire.sse import SSE_CONTENT_TYPE, SSE_RESPONSE_HEADERS

bp = Blueprint("agui", __name__)


@bp.post("/")
def run() -> Response:
    service = get_service()
    settings = service.settings
    g.agui_language = language_from_accept(request.headers.get("Accept-Language"), settings.default_language)
    check_bearer(request.headers.get("Authorization"), settings.auth_token)
    require_json_media_type(request.headers.get("Content-Type"))
    body = read_limited(
        request.stream, request.headers.get("Content-Length"), settings.max_request_bytes, "request_too_large"
    )
    raw = decode_json(body, "invalid_json")
    if not isinstance(raw, dict):
        raise InvalidInput("not_an_object", field="")
    preferred = normalise_language(raw_preferred_language(raw))
    if preferred is not None:
        g.agui_language = preferred
    stream = service.start_run(raw, g.agui_language)
    response = Response(stream, status=200, content_type=SSE_CONTENT_TYPE, direct_passthrough=True)
    for name, value in SSE_RESPONSE_HEADERS:
        response.headers[name] = value
    return response
