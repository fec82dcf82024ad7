"""`agui-bridge chat` sends its bodies as UTF-8 JSON, non-ASCII written as itself: the shipped HAProxy config
refuses a threadId written with `\\u` escapes above U+007F (it would key the thread differently from its path).
Text with no UTF-8 (a lone surrogate) falls back to ASCII-escaped JSON; `--thread` is checked as the server would."""

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


#: What argv or a prompt's answer holds for a byte that is not UTF-8 under a non-UTF-8 locale (surrogateescape).
LONE_SURROGATE_TEXT = "caf\udce9"


def test_a_body_with_a_lone_surrogate_is_posted_as_ascii_escaped_json() -> None:
    """The server then answers with its documented error; chat never fails encoding its own body."""
    client, adapter = client_recording()
    with pytest.raises(ChatUsageError):
        client.stream({"threadId": THREAD, "runId": "run-1", "messages": [{"content": LONE_SURROGATE_TEXT}]})
    (body,) = adapter.bodies
    assert body.isascii() and b"caf\\udce9" in body
    assert decoded(body)["messages"] == [{"content": LONE_SURROGATE_TEXT}]
    assert decoded(body)["threadId"] == THREAD


@pytest.mark.parametrize("thread", [LONE_SURROGATE_TEXT, "/leading-slash", "tab\there", "x" * 201])
def test_a_thread_id_the_server_would_refuse_is_a_usage_error(thread: str) -> None:
    args = build_parser().parse_args(["chat", "--thread", thread, "hi"])
    with pytest.raises(ChatUsageError, match="--thread"):
        options_from_args(args, {})


def test_a_thread_id_with_spaces_and_non_ascii_is_kept() -> None:
    args = build_parser().parse_args(["chat", "--thread", THREAD, "hi"])
    assert options_from_args(args, {}).thread_id == THREAD
