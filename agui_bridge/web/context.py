"""Access to the per-app service from views (one place that knows the extension key)."""

from __future__ import annotations

from flask import current_app

from agui_bridge.runs.service import BridgeService

EXTENSION_KEY = "agui_bridge"


def get_service() -> BridgeService:
    service: BridgeService = current_app.extensions[EXTENSION_KEY]
    return service
