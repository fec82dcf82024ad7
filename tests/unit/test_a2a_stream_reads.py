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

from agui_bridge.a2a.client import A2AClient
from agui_bridge.a2a.errors import A2ATransportError
from agui_bridge.a2a.signals import A2AEvent

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
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                body = self.bodies.pop(0)
                conn.sendall(body)
                if not body.endswith(b"0\r\n\r\n"):
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
