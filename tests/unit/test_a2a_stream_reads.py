"""The A2A stream reads a chunked body a network read at a time (docs/design.md#a2a-stream-batches).

A raw-socket server stands in for the kernel, so the framing, the keep-alive and a body cut short are
the real bytes on a real connection.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from agui_bridge.a2a.errors import A2ABadReply, A2ARpcError, A2ATransportError
from agui_bridge.a2a.signals import A2AEvent
from agui_bridge.kernel.client import A2AClient

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def record(n: int, state: str = "TASK_STATE_WORKING") -> bytes:
    result = {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": state}, "metadata": {"n": n}}}
    return b"data: " + json.dumps({"result": result, "id": "r", "jsonrpc": "2.0"}).encode() + b"\r\n\r\n"


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Kernel:
    """Answers each request on a connection with the next scripted body; counts connections."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies
        self.heads: list[bytes] = []
        self.connections = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.bodies:
            conn, _ = self.server.accept()
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while self.bodies:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, data = data.partition(b"\r\n\r\n")
                self.heads.append(head)
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                body = self.bodies.pop(0)
                conn.sendall(body)
                if b"chunked" in body[:200] and not body.endswith(b"0\r\n\r\n"):
                    return  # a body cut short: the connection ends


def read_all(client: A2AClient) -> list[list[A2AEvent]]:
    stream = client.open_stream("SendStreamingMessage", {"message": {}})
    try:
        return list(stream.batches())
    finally:
        stream.close()


@pytest.fixture
def kernel(request: pytest.FixtureRequest) -> Iterator[Kernel]:
    kernel = Kernel(list(request.param))
    yield kernel
    kernel.server.close()


SPLIT = record(1)[:50], record(1)[50:] + record(2)[:3], record(2)[3:] + record(3, "TASK_STATE_COMPLETED")
BODY = HEAD + b"".join(chunk(p) for p in SPLIT) + b"0\r\n\r\n"


@pytest.mark.parametrize("kernel", [[BODY, BODY]], indirect=True)
def test_records_cut_across_chunks_arrive_whole_and_the_connection_is_kept(kernel: Kernel) -> None:
    client = A2AClient(f"http://127.0.0.1:{kernel.port}/", None)
    for _ in range(2):
        events = [event for batch in read_all(client) for event in batch]
        assert [e.body["metadata"]["n"] for e in events] == [1, 2, 3]
        assert events[-1].state == "completed"
    assert kernel.connections == 1  # the body was read to its end: the connection went back to the pool


FIFTY = HEAD + b"".join(chunk(record(n)) for n in range(50)) + b"0\r\n\r\n"


@pytest.mark.parametrize("kernel", [[FIFTY]], indirect=True)
def test_records_already_received_come_out_as_one_batch(kernel: Kernel) -> None:
    batches = read_all(A2AClient(f"http://127.0.0.1:{kernel.port}/", None))
    assert sum(len(b) for b in batches) == 50
    assert len(batches) < 50


@pytest.mark.parametrize("kernel", [[HEAD + chunk(record(1)) + b"40\r\ndata: {"]], indirect=True)
def test_a_body_cut_before_its_last_chunk_is_a_transport_error(kernel: Kernel) -> None:
    stream = A2AClient(f"http://127.0.0.1:{kernel.port}/", None).open_stream("SendStreamingMessage", {})
    batches = stream.batches()
    assert [e.body["metadata"]["n"] for e in next(batches)] == [1]
    with pytest.raises(A2ATransportError, match="stream broke"):
        next(batches)
    stream.close()


ENDING_FIRST = HEAD + chunk(record(1)) + chunk(record(2, "TASK_STATE_INPUT_REQUIRED")) + b"0\r\n\r\n"


@pytest.mark.parametrize("kernel", [[ENDING_FIRST] * 3], indirect=True)
def test_a_reader_that_stops_at_the_ending_state_keeps_the_connection(kernel: Kernel) -> None:
    """The run stops reading at its ending state; a body that ended in the same read is not wasted."""
    client = A2AClient(f"http://127.0.0.1:{kernel.port}/", "tok")
    for _ in range(3):
        stream = client.open_stream("SendStreamingMessage", {"message": {}})
        batch = next(stream.batches())
        assert batch[-1].state == "input-required"
        stream.close()
    assert kernel.connections == 1
    head = kernel.heads[0].lower()
    assert b"a2a-version: 1.0" in head and b"authorization: bearer tok" in head
    assert b"content-type: application/json" in head


def reply(status: str, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        status.encode(), content_type, len(body), body)  # fmt: skip


RPC_ERROR = b'{"jsonrpc":"2.0","id":"x","error":{"code":-32001,"message":"Task not found"}}'
TASK = (
    b'{"jsonrpc":"2.0","id":"x","result":{"task":{"id":"t1","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}'
)


@pytest.mark.parametrize(
    ("kernel", "error", "match"),
    [
        ([reply("500 Internal Server Error", b"")], A2ATransportError, "HTTP 500"),
        ([reply("200 OK", RPC_ERROR)], A2ARpcError, "Task not found"),
        ([reply("200 OK", b"<html>")], A2ABadReply, "not JSON"),
        ([reply("200 OK", TASK)], A2ABadReply, "without a stream"),
    ],
    indirect=["kernel"],
)
def test_a_streaming_call_answered_without_a_stream_is_a_typed_error(
    kernel: Kernel, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        A2AClient(f"http://127.0.0.1:{kernel.port}/", None).open_stream("SendStreamingMessage", {})


@pytest.mark.parametrize("kernel", [[reply("200 OK", TASK), reply("200 OK", RPC_ERROR), reply("404 Not Found", b"")]],
                         indirect=True)  # fmt: skip
def test_unary_calls_share_the_connection_and_keep_their_typed_errors(kernel: Kernel) -> None:
    client = A2AClient(f"http://127.0.0.1:{kernel.port}/", None)
    assert client.get_task("t1").task_id == "t1"
    with pytest.raises(A2ARpcError):
        client.cancel_task("t1")
    with pytest.raises(A2ATransportError, match="HTTP 404"):
        client.get_task("t1")
    assert kernel.connections == 1


def test_a_kernel_that_is_not_listening_is_a_transport_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = A2AClient(f"http://127.0.0.1:{port}/", None)
    with pytest.raises(A2ATransportError, match="request failed"):
        client.open_stream("SendStreamingMessage", {})
    with pytest.raises(A2ATransportError, match="request failed"):
        client.get_task("t")


@pytest.mark.parametrize("kernel", [[reply("200 OK", TASK), reply("200 OK", TASK)]], indirect=True)
def test_a_pool_closed_under_the_client_is_looked_up_again(kernel: Kernel) -> None:
    client = A2AClient(f"http://127.0.0.1:{kernel.port}/", None)
    assert client.get_task("t1").task_id == "t1"
    client._adapter.poolmanager.clear()  # closes every pool, as closing the session does
    assert client.get_task("t1").task_id == "t1"
