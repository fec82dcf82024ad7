"""`GET /extensions/iac-code/v1/capabilities`: what this server supports.

Authenticated like the other extensions (the bearer token when one is configured; the 401 is
localised from Accept-Language). The document is built by `agui_bridge.runs.capabilities` from the
settings this worker runs with.
"""

from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from agui_bridge.i18n.language import language_from_accept
from agui_bridge.runs.capabilities import build_capabilities
from agui_bridge.web.auth import check_bearer
from agui_bridge.web.context import get_service

bp = Blueprint("iac_code_capabilities", __name__)

CAPABILITIES_PATH = "/extensions/iac-code/v1/capabilities"


@bp.get(CAPABILITIES_PATH)
def capabilities() -> Response:
    settings = get_service().settings
    g.agui_language = language_from_accept(request.headers.get("Accept-Language"), settings.default_language)
    check_bearer(request.headers.get("Authorization"), settings.auth_token)
    response = jsonify(build_capabilities(settings))
    response.headers["Cache-Control"] = "no-store"
    return response
