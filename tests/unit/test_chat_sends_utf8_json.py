"""`agui-bridge chat` sends its bodies as UTF-8 JSON, non-ASCII written as itself: the shipped HAProxy config
refuses a threadId written with `\\u` escapes above U+007F (it would key the thread differently from its path)."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from agui_bridge.chat.client import ChatClient, options_from_args
from agui_bridge.chat.sse import ChatUsageError
from agui_bridge.cli.command import build_parser

THREAD = "café 线程"


class RecordingAdapter(HTTPAdapter):
    """Keeps every request's body and answers 503, as a load balancer with no live host would."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[bytes] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        body = request.body
        self.bodies.append(body.encode() if isinstance(body, str) else bytes(body or b""))
        response = requests.Response()
        response.status_code = 503
        response.headers["Content-Type"] = "application/json"
        response.raw = io.BytesIO(b'{"error":{"code":"SERVICE_UNAVAILABLE","message":"no host"}}')
        response.request = request
        return response


def client_recording() -> tuple[ChatClient, RecordingAdapter]:
    options = options_from_args(
        build_parser().parse_args(["chat", "--url", "http://lb.test/", "--thread", THREAD, "--ros", "r", "hi"]), {}
    )
    adapter = RecordingAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    return ChatClient(options, session, io.StringIO(), io.StringIO(), io.StringIO()), adapter


def decoded(body: bytes) -> Mapping[str, Any]:
    value = json.loads(body.decode("utf-8"))
    assert isinstance(value, dict)
    return value


def test_a_run_is_posted_with_the_threadId_in_utf8_not_escaped() -> None:
    client, adapter = client_recording()
    with pytest.raises(ChatUsageError):
        client.stream({"threadId": THREAD, "runId": "run-1", "messages": []})
    (body,) = adapter.bodies
    assert THREAD.encode("utf-8") in body and b"\\u" not in body
    assert decoded(body)["threadId"] == THREAD


def test_a_cancel_is_posted_with_the_threadId_in_utf8_not_escaped() -> None:
    client, adapter = client_recording()
    client.execution_id = "execution-1"
    assert client.cancel() is None
    (body,) = adapter.bodies
    assert THREAD.encode("utf-8") in body and b"\\u" not in body
    assert decoded(body)["threadId"] == THREAD
