"""An https kernel: streams are read over TLS with the system's verification (docs/design.md#a2a-stream-batches)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agui_bridge.a2a.errors import A2ATransportError
from agui_bridge.kernel.client import A2AClient

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
RECORD = (
    b'data: {"result":{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}\r\n\r\n'
)
BODY = HEAD + b"%x\r\n%s\r\n" % (len(RECORD), RECORD) + b"0\r\n\r\n"


@pytest.fixture
def certificate(tmp_path: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 (key beside it)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp_path / "key.pem"),
         "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return tmp_path / "cert.pem"


@pytest.fixture
def tls_kernel(certificate: Path) -> Iterator[int]:
    """A TLS server answering each request on one connection with BODY; its port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificate, certificate.with_name("key.pem"))
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                raw, _ = server.accept()
            except OSError:
                return  # the test closed the server
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    data = b""
                    while True:
                        while b"\r\n\r\n" not in data:
                            more = conn.recv(65536)
                            if not more:
                                raise ConnectionError("closed")
                            data += more
                        head, _, data = data.partition(b"\r\n\r\n")
                        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                        while len(data) < length:
                            data += conn.recv(65536)
                        data = data[length:]
                        conn.sendall(BODY)
            except (OSError, ConnectionError):
                continue  # a client that refused the certificate, or hung up

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def read_events(client: A2AClient) -> int:
    stream = client.open_stream("SendStreamingMessage", {"message": {}})
    try:
        return sum(len(batch) for batch in stream.batches())
    finally:
        stream.close()


def test_an_https_kernel_with_an_untrusted_certificate_is_refused(
    tls_kernel: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    client = A2AClient(f"https://127.0.0.1:{tls_kernel}/", None)
    with pytest.raises(A2ATransportError, match="request failed: SSLCertVerificationError"):
        client.open_stream("SendStreamingMessage", {"message": {}})
    client.close()


def test_an_https_kernel_with_a_trusted_certificate_streams_over_tls(
    tls_kernel: int, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))  # OpenSSL's default trust store, as for urllib3
    client = A2AClient(f"https://127.0.0.1:{tls_kernel}/", None)
    assert read_events(client) == 1
    assert read_events(client) == 1  # on the kept-alive TLS connection
    client.close()
