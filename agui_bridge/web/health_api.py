"""`GET /health`: liveness and protocol versions; never probes A2A, never needs a token."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from agui_bridge.web.context import get_service

bp = Blueprint("health", __name__)


@bp.get("/health")
def health() -> Response:
    return jsonify(get_service().health())
