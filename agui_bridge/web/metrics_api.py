"""`GET /metrics`: Prometheus exposition (behind the bearer token when one is configured: the app's guard,
`web/auth.guard_request`, checks it).

Serve it to the internal network only (deploy/nginx keeps it off the public site).
"""

from __future__ import annotations

from flask import Blueprint, Response

from agui_bridge.observability.metrics import render

bp = Blueprint("metrics", __name__)


@bp.get("/metrics")
def metrics() -> Response:
    body, content_type = render()
    return Response(body, content_type=content_type)
