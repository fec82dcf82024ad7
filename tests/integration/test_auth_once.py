"""The bearer token is checked in one place, once per request, before any body is read
(docs/design.md#authentication, docs/design.md#pre-stream-checks)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.web import auth
from tests.support.harness import new_thread_id, run_body

TOKEN = "s3cret-token"
GOOD = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer not-the-token"}


@pytest.fixture
def guarded(settings: Settings) -> Flask:
    return create_app(settings.replace(auth_token=TOKEN, metrics_enabled=True))


class _RecordingBody(io.BytesIO):
    """A request body that remembers whether anyone read it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads = 0

    def read(self, size: int | None = -1) -> bytes:
        self.reads += 1
        return super().read(size)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/", b'{"threadId": 5}'),  # would fail validation
        ("/", b"{not json"),  # would fail decoding
        ("/", b"x" * 64),  # neither
        ("/extensions/iac-code/v1/executions/exec-1/cancel", b'{"threadId": []}'),
        ("/extensions/iac-code/v1/threads/t-1/status", b"[]"),
    ],
)
def test_a_wrong_token_is_refused_before_the_body_is_read(guarded: Flask, path: str, body: bytes) -> None:
    recording = _RecordingBody(body)
    response = guarded.test_client().post(
        path,
        data=body,
        headers={**WRONG, "Accept-Language": "fr"},
        content_type="application/json",
        environ_overrides={"wsgi.input": recording},
    )
    assert response.status_code == 401
    error = response.get_json()["error"]
    assert error["code"] == "UNAUTHORIZED" and "field" not in error
    assert error["message"] != guarded.test_client().post(path, headers=WRONG).get_json()["error"]["message"]  # fr
    assert recording.reads == 0


def _count_token_checks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every comparison of a presented token goes through `auth.tokens_match`: record them."""
    compared: list[bytes] = []
    real = auth.tokens_match

    def counting(presented: bytes, expected: bytes) -> bool:
        compared.append(presented)
        return real(presented, expected)

    monkeypatch.setattr(auth, "tokens_match", counting)
    return compared


def _requests(workspace: Path) -> list[tuple[str, str, dict[str, Any], int]]:
    """(method, path, keyword arguments, the status expected with the right token) of every guarded route."""
    thread_id = new_thread_id()
    body = run_body(thread_id, "hi", workspace)
    ros_invocation_id = body["forwardedProps"]["iacCode"]["rosInvocationId"]
    status_body = {"rosInvocationId": ros_invocation_id}
    return [
        ("POST", "/", {"json": body}, 200),
        ("POST", "/", {"json": {"threadId": 5}}, 400),
        ("POST", f"/extensions/iac-code/v1/threads/{thread_id}/status", {"json": status_body}, 200),
        ("POST", "/extensions/iac-code/v1/executions/exec-1/cancel", {"json": {"threadId": thread_id}}, 400),
        ("GET", "/extensions/iac-code/v1/capabilities", {}, 200),
        ("GET", "/metrics", {}, 200),
        ("GET", f"/extensions/iac-code/v1/threads/{thread_id}/runs/run-1/events?rosInvocationId=r", {}, 404),
    ]


def test_the_token_is_compared_once_per_request(
    guarded: Flask, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared = _count_token_checks(monkeypatch)
    client = guarded.test_client()
    for method, path, kwargs, status in _requests(workspace):
        compared.clear()
        response = client.open(path, method=method, headers=GOOD, **kwargs)
        response.get_data()  # a stream runs to its end
        assert response.status_code == status, (path, response.get_data(as_text=True))
        assert compared == [TOKEN.encode()], path


def test_a_refused_token_is_compared_once(guarded: Flask, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compared = _count_token_checks(monkeypatch)
    client = guarded.test_client()
    for method, path, kwargs, _status in _requests(workspace):
        compared.clear()
        response = client.open(path, method=method, headers=WRONG, **kwargs)
        assert response.status_code == 401, path
        assert compared == [b"not-the-token"], path


def test_health_needs_no_token_and_compares_none(guarded: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    compared = _count_token_checks(monkeypatch)
    assert guarded.test_client().get("/health").status_code == 200
    assert compared == []
