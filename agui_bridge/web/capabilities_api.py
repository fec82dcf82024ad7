"""`GET /extensions/iac-code/v1/capabilities`: what this server supports.

Authenticated like the other extensions, by the app's guard (`web/auth.guard_request`: the bearer token
when one is configured; the 401 is localised from Accept-Language). The document is built by
`agui_bridge.runs.capabilities` from the settings this worker runs with.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from agui_bridge.runs.capabilities import build_capabilities
from agui_bridge.web.context import get_service

bp = Blueprint("iac_code_capabilities", __name__)

CAPABILITIES_PATH = "/extensions/iac-code/v1/capabilities"


@bp.get(CAPABILITIES_PATH)
def capabilities() -> Response:
    response = jsonify(build_capabilities(get_service().settings))
    response.headers["Cache-Control"] = "no-store"
    return response
