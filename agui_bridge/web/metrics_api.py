"""`GET /metrics`: Prometheus exposition (behind the bearer token when one is configured).

Serve it to the internal network only (deploy/nginx keeps it off the public site).
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from agui_bridge.observability.metrics import render
from agui_bridge.web.auth import check_bearer
from agui_bridge.web.context import get_service

bp = Blueprint("metrics", __name__)


@bp.get("/metrics")
def metrics() -> Response:
    check_bearer(request.headers.get("Authorization"), get_service().settings.auth_token)
    body, content_type = render()
    return Response(body, content_type=content_type)
