"""Property tests for POST /: whatever arrives, never a 500 (docs/design.md#decision-no-500).

Covers docs/design.md#pre-stream-checks, docs/design.md#error-envelope, docs/design.md#input-validation,
docs/design.md#workspace-cwd and, in the stream, docs/design.md#decision-balanced-spans-and-strict-framing.

The app's upstream is a closed loopback port, so any body that passes every pre-stream check ends at
once with RUN_STARTED + RUN_ERROR(A2A_UNAVAILABLE) (or an in-stream INVALID_INPUT for message
content). Every response must be either a conforming AG-UI stream or a documented JSON error envelope.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from werkzeug.test import TestResponse

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.demo.testing import free_port
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.fuzz_inputs import (
    TOKEN,
    accept_language,
    authorization,
    base_body,
    content_length,
    content_type,
    json_values,
    mutate,
    pad_to_declared_length,
)

#: docs/design.md#error-envelope (POST / only; EXECUTION_NOT_FOUND is the cancel route's) -> HTTP status.
PRESTREAM_STATUS: dict[str, int] = {
    "UNAUTHORIZED": 401,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "REQUEST_TOO_LARGE": 413,
    "INVALID_JSON": 400,
    "INVALID_INPUT": 400,
    "STATE_UNAVAILABLE": 503,
    "EXECUTION_LOST": 409,
    "DUPLICATE_RUN_ID": 409,
    "RUN_ID_CONFLICT": 409,
    "THREAD_BUSY": 409,
    "THREAD_BINDING_CONFLICT": 409,
    "RESUME_REQUIRED": 409,
}
#: RUN_ERROR codes a stream against a dead upstream may end with (Appendix A).
STREAM_CODES = frozenset({"A2A_UNAVAILABLE", "INVALID_INPUT"})

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def dead_upstream_settings(settings: Settings, workspace: Path) -> Settings:
    """The shared test settings, pointed at a closed port so admitted runs end at once."""
    return settings.replace(a2a_url=f"http://127.0.0.1:{free_port()}/", a2a_token="upstream-token")


@pytest.fixture
def fuzz_app(dead_upstream_settings: Settings) -> Flask:
    return create_app(dead_upstream_settings)


@pytest.fixture
def auth_app(dead_upstream_settings: Settings) -> Flask:
    return create_app(dead_upstream_settings.replace(auth_token=TOKEN))


def check_response(response: TestResponse) -> dict[str, Any] | list[dict[str, Any]]:
    """The one property: a valid stream or a documented envelope; never a 500.

    Returns the events (200) or the error document; see ``outcome`` for a statistics label.
    """
    raw = response.get_data()
    assert response.status_code != 500, raw[:2000]
    if response.status_code == 200:
        assert response.mimetype == "text/event-stream", response.headers
        events = assert_valid_agui_stream(raw, capture=False)
        assert events[-1]["type"] == "RUN_ERROR", events
        assert events[-1]["code"] in STREAM_CODES, events[-1]
        return events
    assert response.mimetype == "application/json", (response.status_code, response.headers, raw[:500])
    document = json.loads(raw)
    assert isinstance(document, dict) and set(document) == {"error"}, document
    error = document["error"]
    assert isinstance(error, dict), document
    assert error.get("code") in PRESTREAM_STATUS, document
    assert response.status_code == PRESTREAM_STATUS[error["code"]], (response.status_code, document)
    assert isinstance(error.get("message"), str) and error["message"], document
    assert set(error) <= {"code", "message", "field"}, document
    if "field" in error:
        assert error["code"] == "INVALID_INPUT" and isinstance(error["field"], str), document
    return document


def outcome(result: dict[str, Any] | list[dict[str, Any]]) -> str:
    """Label for ``--hypothesis-show-statistics``: which branch an example reached."""
    if isinstance(result, list):
        return f"200 RUN_ERROR {result[-1]['code']}"
    return f"error {result['error']['code']}"


# ------------------------------------------------------------------------------------------ properties


@FUZZ
@given(value=json_values)
def test_random_json_bodies_never_500(fuzz_app: Flask, value: Any) -> None:
    body = json.dumps(value).encode()
    event(outcome(check_response(fuzz_app.test_client().post("/", data=body, content_type="application/json"))))


@FUZZ
@given(data=st.data())
def test_mutated_run_inputs_never_500(fuzz_app: Flask, tmp_path: Path, data: st.DataObject) -> None:
    body = mutate(data, base_body(str(uuid.uuid4()), tmp_path / "workspace"))
    payload = json.dumps(body).encode()
    event(outcome(check_response(fuzz_app.test_client().post("/", data=payload, content_type="application/json"))))


def test_the_unmutated_base_body_reaches_the_stream(fuzz_app: Flask, tmp_path: Path) -> None:
    """Guard for the mutation property: the base body is valid, so mutations start from a 200."""
    body = base_body(str(uuid.uuid4()), tmp_path / "workspace")
    events = check_response(fuzz_app.test_client().post("/", json=body))
    assert isinstance(events, list) and [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "A2A_UNAVAILABLE"


@FUZZ
@given(
    auth=authorization,
    ctype=content_type,
    length=content_length,
    language=accept_language,
    valid_body=st.booleans(),
)
def test_random_headers_never_500(
    auth_app: Flask,
    tmp_path: Path,
    auth: str | None,
    ctype: str | None,
    length: str | None,
    language: str | None,
    valid_body: bool,
) -> None:
    body = json.dumps(base_body(str(uuid.uuid4()), tmp_path / "workspace") if valid_body else [1]).encode()
    headers = {name: value for name, value in (("Authorization", auth), ("Accept-Language", language)) if value}
    environ: dict[str, str] = {}
    if ctype is not None:
        environ["CONTENT_TYPE"] = ctype
    if length is not None:
        body = pad_to_declared_length(length, body)
        environ["CONTENT_LENGTH"] = length
    response = auth_app.test_client().post("/", data=body, headers=headers, environ_overrides=environ)
    result = check_response(response)
    event(outcome(result))
    if isinstance(result, dict) and result["error"]["code"] == "UNAUTHORIZED":
        assert auth is None or auth.partition(" ")[2] != TOKEN or auth.partition(" ")[0].lower() != "bearer"
