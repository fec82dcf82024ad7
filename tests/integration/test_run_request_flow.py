"""`POST /` end to end through its one read of the body (runs/request.py) and its one seam to the worker
(worker/host.py): the language of each refusal, the order of the checks after the body, and the worker's
beacon started by the first admission (docs/design.md#pre-stream-checks, #language-selection, #layers)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import translate
from agui_bridge.store.owner import current_owner
from agui_bridge.worker.hooks import worker_host
from tests.support.harness import new_thread_id, run_body


def _drained(app: Flask) -> Flask:
    host = worker_host(app)
    assert host is not None
    assert host.loops.drain(0.0) == 0  # nothing was running
    return app


def _body(workspace: Path, language: str | None, *, valid: bool = True) -> dict[str, Any]:
    body = run_body(new_thread_id(), "hi", workspace, **({"preferredLanguage": language} if language else {}))
    if not valid:
        del body["threadId"]
    return body


@pytest.mark.parametrize(
    ("draining", "language", "valid", "accept", "status", "key", "expected_language"),
    [
        (True, "de-DE", True, "fr", 503, "service_unavailable", "de"),  # capacity refusal: the body's language
        (True, "de", False, "fr", 503, "service_unavailable", "de"),  # capacity before validation
        (True, None, False, "ja-JP, en;q=0.5", 503, "service_unavailable", "ja"),
        (False, "zh-CN", False, "ja", 400, "field_required", "zh"),  # even an envelope error
        (False, "ko", False, "fr", 400, "field_required", "fr"),  # unsupported: Accept-Language
        (False, None, False, None, 400, "field_required", "en"),
    ],
)
def test_post_refusals_answer_in_the_selected_language(
    settings: Settings,
    workspace: Path,
    draining: bool,
    language: str | None,
    valid: bool,
    accept: str | None,
    status: int,
    key: str,
    expected_language: str,
) -> None:
    app = create_app(settings)
    if draining:
        _drained(app)
    headers = {"Accept-Language": accept} if accept else {}
    response = app.test_client().post("/", json=_body(workspace, language, valid=valid), headers=headers)
    assert response.status_code == status
    error = response.get_json()["error"]
    params = {"field": "threadId"} if key == "field_required" else {}
    assert error["message"] == translate(key, expected_language, **params)


def _beacon_path(state_dir: Path) -> Path:
    name = hashlib.sha256(current_owner().encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return state_dir / "owners" / f"{name}.json"


def _eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Wait for `condition` with a bounded deadline (the beacon loop writes on its own thread)."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not condition():
        if time.monotonic() >= deadline:
            return False
        pause.wait(0.02)
    return True


def test_the_first_admission_starts_the_workers_beacon(settings: Settings, workspace: Path, state_dir: Path) -> None:
    """The app factory spawns nothing; the worker's beacon loop (worker/maintenance.py) starts with the
    first admission, through the web layer's seam, and publishes this process's runs."""
    app = create_app(settings.replace(beacon_interval_s=0.2))
    beacon = _beacon_path(state_dir)
    assert app.test_client().get("/health").status_code == 200
    assert not beacon.exists()
    response = app.test_client().post("/", json=run_body(new_thread_id(), "hi", workspace))
    assert response.status_code == 200
    response.get_data()
    assert _eventually(beacon.exists)

    def published_empty() -> bool:
        try:
            document = json.loads(beacon.read_text())
        except (OSError, ValueError):
            return False
        return bool(document["owner"] == current_owner() and document["runs"] == [])

    assert _eventually(published_empty)  # the run ended: the next publication lists nothing
