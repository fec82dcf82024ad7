"""A kernel that answers a streaming call with broken or endless HTTP gets a typed error, never a hang or a
growing buffer (docs/design.md#a2a-stream-batches)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from agui_bridge.a2a.errors import A2ABadReply, A2ATransportError
from agui_bridge.kernel import stream as kernel_stream
from agui_bridge.kernel.client import MAX_REPLY_BYTES, A2AClient
from agui_bridge.kernel.exchange import Response

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
RECORD = (
    b'data: {"result":{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}\r\n\r\n'
)
OFFERED = 8 * 1024 * 1024  # far beyond every bound: the client must stop reading long before


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def endless(first: bytes, filler: bytes) -> Iterator[bytes]:
    yield first
    piece = filler * (65536 // len(filler))
    for _ in range(OFFERED // len(piece)):
        yield piece


class HostileKernel:
    """Reads one request, then sends the scripted pieces until they end or the client hangs up."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, data = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(data) < length:
                data += conn.recv(65536)
            try:
                for piece in self.pieces:
                    conn.sendall(piece)
                    self.sent += len(piece)
            except OSError:
                return  # the client hung up


def serve(pieces: Iterator[bytes]) -> tuple[HostileKernel, A2AClient]:
    kernel = HostileKernel(pieces)
    return kernel, A2AClient(f"http://127.0.0.1:{kernel.port}/", None)


def drain(client: A2AClient) -> None:
    stream = client.open_stream("SendStreamingMessage", {"message": {}})
    try:
        for _ in stream.batches():
            pass
    finally:
        stream.close()


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param(lambda: endless(b"HTTP/1.1 200 OK\r\n", b"x-filler: 1\r\n"), id="headers without end"),
        pytest.param(lambda: endless(b"HTTP/1.1 200 OK\r\nx-filler: ", b"v"), id="a header value without end"),
        pytest.param(lambda: iter([b"SSH-2.0-OpenSSH\r\n\r\n"]), id="not HTTP"),
        pytest.param(lambda: iter([b"HTTP/1.1 200 OK\r\ncontent-"]), id="a head cut short"),
    ],
)
def test_a_broken_head_is_a_failed_request(pieces: object) -> None:
    assert callable(pieces)
    kernel, client = serve(pieces())
    with pytest.raises(A2ATransportError, match="A2A request failed"):
        client.open_stream("SendStreamingMessage", {"message": {}})
    client.close()
    kernel.thread.join(timeout=30)
    assert kernel.sent < OFFERED


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param(lambda: endless(HEAD + chunk(RECORD) + b"5;ext=", b"v"), id="a chunk-size line without end"),
        pytest.param(lambda: endless(HEAD + chunk(RECORD) + b"0\r\nx-trailer: ", b"v"), id="a trailer without end"),
        pytest.param(lambda: iter([HEAD + chunk(RECORD) + b"zz\r\n"]), id="a chunk size that is not hex"),
        pytest.param(lambda: iter([HEAD + chunk(RECORD) + b"40\r\ndata: {"]), id="a body cut short"),
    ],
)
def test_a_broken_body_breaks_the_stream(pieces: object) -> None:
    assert callable(pieces)
    kernel, client = serve(pieces())
    with pytest.raises(A2ATransportError, match="A2A stream broke"):
        drain(client)
    client.close()
    kernel.thread.join(timeout=30)
    assert kernel.sent < OFFERED


def test_an_sse_record_without_end_breaks_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_stream, "MAX_RECORD_BYTES", 256 * 1024)
    line = chunk(b"v" * 4096)
    kernel, client = serve(endless(HEAD + chunk(RECORD) + chunk(b"data: "), line))
    with pytest.raises(A2ATransportError, match="SSE record without end"):
        drain(client)
    client.close()
    kernel.thread.join(timeout=30)
    assert kernel.sent < OFFERED


def test_a_json_answer_beyond_its_bound_is_a_bad_reply() -> None:
    size = MAX_REPLY_BYTES + 1
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % size
    kernel, client = serve(iter([head, b" " * size]))
    with pytest.raises(A2ABadReply, match="not JSON"):
        client.open_stream("SendStreamingMessage", {"message": {}})
    client.close()
    kernel.server.close()


def test_a_compressed_stream_is_a_bad_reply() -> None:
    head = HEAD.replace(b"\r\n\r\n", b"\r\ncontent-encoding: gzip\r\n\r\n")
    kernel, client = serve(iter([head, chunk(b"\x1f\x8b"), b"0\r\n\r\n"]))
    with pytest.raises(A2ABadReply, match="content encoding 'gzip'"):
        client.open_stream("SendStreamingMessage", {"message": {}})
    client.close()
    kernel.server.close()


def test_a_stream_aborted_from_another_thread_wakes_its_reader() -> None:
    kernel, client = serve(iter([HEAD + chunk(RECORD)]))  # then silence, the connection open
    stream = client.open_stream("SendStreamingMessage", {"message": {}})
    batches = stream.batches()
    assert len(next(batches)) == 1
    failures: list[BaseException] = []
    reading = threading.Event()

    def read_on() -> None:
        reading.set()
        try:
            next(batches)
        except BaseException as exc:
            failures.append(exc)

    reader = threading.Thread(target=read_on, daemon=True)
    reader.start()
    assert reading.wait(timeout=30)
    stream.abort()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], A2ATransportError)
    client.close()
    kernel.server.close()


def test_a_kept_connection_the_kernel_closed_meanwhile_is_replaced() -> None:
    """The kernel may close an idle keep-alive connection; the next stream connects again instead of failing."""
    served: list[threading.Event] = [threading.Event(), threading.Event()]
    server = socket.create_server(("127.0.0.1", 0))

    def serve_each_once() -> None:
        for done in served:
            conn, _ = server.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                conn.sendall(HEAD + chunk(RECORD) + b"0\r\n\r\n")
            done.set()  # closed after a body that allowed keep-alive

    threading.Thread(target=serve_each_once, daemon=True).start()
    client = A2AClient(f"http://127.0.0.1:{server.getsockname()[1]}/", None)
    for done in served:
        drain(client)
        assert done.wait(timeout=30)
    client.close()
    server.close()


class Killed(BaseException):
    """What a killed greenlet raises at its blocking read (GreenletExit is a BaseException)."""


def test_a_caller_killed_while_waiting_for_the_head_leaves_no_socket_open(monkeypatch: pytest.MonkeyPatch) -> None:
    server = socket.create_server(("127.0.0.1", 0))

    def killed(_response: Response) -> None:
        raise Killed

    monkeypatch.setattr(Response, "read_head", killed)
    client = A2AClient(f"http://127.0.0.1:{server.getsockname()[1]}/", None)
    with pytest.raises(Killed):
        client.open_stream("SendStreamingMessage", {"message": {}})
    conn, _ = server.accept()
    with conn:
        conn.settimeout(30)
        received = b""
        while more := conn.recv(65536):  # ends once the client closed its socket
            received += more
    assert received.startswith(b"POST / HTTP/1.1\r\n")
    client.close()
    server.close()
