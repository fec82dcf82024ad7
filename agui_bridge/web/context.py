"""Access to the per-app service and worker seam from views (one place that knows the extension keys)."""

from __future__ import annotations

from flask import current_app

from agui_bridge.runs.service import BridgeService
from agui_bridge.worker.host import WORKER_KEY, WorkerHost

EXTENSION_KEY = "agui_bridge"


def get_service() -> BridgeService:
    service: BridgeService = current_app.extensions[EXTENSION_KEY]
    return service


def get_worker() -> WorkerHost:
    worker: WorkerHost = current_app.extensions[WORKER_KEY]
    return worker
