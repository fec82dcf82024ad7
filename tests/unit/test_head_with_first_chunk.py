"""The worker's response sends its head in the same send as the first body bytes, with the same bytes on the
wire as gunicorn's own response (docs/design.md#head-with-first-chunk)."""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Sequence

import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi as gunicorn_wsgi

from agui_bridge.worker.gevent_worker import HeadWithFirstChunkResponse, use_head_with_first_chunk

_DATE = re.compile(rb"\r\nDate: [^\r]*\r\n")


class RecordingSocket:
    """A client socket that keeps each send apart."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sends.append(bytes(data))


def request(method: str = "POST") -> types.SimpleNamespace:
    return types.SimpleNamespace(version=(1, 1), method=method, should_close=lambda: False, headers=[], path="/")


def serve(
    response_class: Callable[..., gunicorn_wsgi.Response],
    headers: Sequence[tuple[str, str]],
    body: Sequence[bytes],
    *,
    method: str = "POST",
) -> list[bytes]:
    """What gunicorn's request handler does with a WSGI response: start it, write each item, close it."""
    sock = RecordingSocket()
    response = response_class(request(method), sock, Config())
    response.start_response("200 OK", list(headers))
    for item in body:
        response.write(item)
    response.close()
    return [_DATE.sub(b"\r\nDate: -\r\n", send) for send in sock.sends]


STREAM = [("Content-Type", "text/event-stream")]
SIZED = [("Content-Type", "application/json"), ("Content-Length", "9")]


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        (STREAM, [b"data: 1\n\n", b"data: 2\n\n"]),
        (SIZED, [b'{"a": 1}\n']),
        (SIZED, [b'{"a": 1}\n', b"more than the length"]),
    ],
)
def test_the_head_leaves_with_the_first_body_bytes_and_the_wire_bytes_stay_gunicorns(
    headers: list[tuple[str, str]], body: list[bytes]
) -> None:
    ours = serve(HeadWithFirstChunkResponse, headers, body)
    theirs = serve(gunicorn_wsgi.Response, headers, body)
    assert b"".join(ours) == b"".join(theirs)
    assert ours[0] == theirs[0] + theirs[1]  # one send instead of two
    assert len(ours) == len(theirs) - 1


def test_an_empty_first_write_still_sends_the_head_at_once() -> None:
    ours = serve(HeadWithFirstChunkResponse, STREAM, [b"", b"data: 1\n\n"])
    theirs = serve(gunicorn_wsgi.Response, STREAM, [b"", b"data: 1\n\n"])
    assert ours == theirs
    assert ours[0].endswith(b"\r\n\r\n") and b"data:" not in ours[0]


@pytest.mark.parametrize("method", ["HEAD", "POST"])
def test_a_response_without_body_bytes_sends_its_head_as_gunicorn_does(method: str) -> None:
    body = [b'{"a": 1}\n'] if method == "HEAD" else []
    assert serve(HeadWithFirstChunkResponse, SIZED, body, method=method) == serve(
        gunicorn_wsgi.Response, SIZED, body, method=method
    )


def test_the_worker_makes_gunicorn_build_its_responses_with_the_head_in_the_first_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gunicorn_wsgi, "Response", gunicorn_wsgi.Response)  # restored after the test
    use_head_with_first_chunk()
    assert gunicorn_wsgi.Response is HeadWithFirstChunkResponse
