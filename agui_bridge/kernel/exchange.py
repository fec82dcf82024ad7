"""One HTTP/1.1 exchange with the kernel on a socket the client owns, parsed by httptools.

Streaming calls do not go through requests or urllib3: their public API hands a chunked body over a
chunk at a time (`stream()`, and `read1`, since http.client's `read1` stops at a chunk's end), and the
kernel sends one SSE record per chunk, so every event would pay a read, a generator step and a queue
hand-over of its own. Here each `recv` of at most `read_size` bytes is fed to httptools (llhttp, a
streaming parser that keeps no body bytes), and the payload it yields for that read is one batch
(docs/design.md#a2a-stream-batches). Every framing failure is an `HttpFramingError` or one of
httptools' `HttpParserError`s; the caller turns them into typed A2A errors.

Memory stays bounded whatever the kernel sends: the head may not exceed `MAX_HEAD_BYTES`, the framing
between two pieces of progress (a header, a chunk boundary, a body byte) may not exceed
`MAX_FRAMING_BYTES` (an endless chunk-size line or trailer), and a reply read whole `max_reply_bytes`.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Callable

import httptools

#: Longest response head (status line and headers) accepted, as http.client's line limit.
MAX_HEAD_BYTES = 64 * 1024
#: Most bytes of framing accepted without any progress (a header, a chunk boundary, a body byte).
MAX_FRAMING_BYTES = 64 * 1024

#: What the parser may raise on bad framing.
PARSER_ERRORS: tuple[type[Exception], ...] = (httptools.HttpParserError, httptools.HttpParserUpgrade)


class HttpFramingError(ValueError):
    """The kernel's response is not valid HTTP/1.1 (or ended inside itself, or outgrew a bound)."""


#: What an exchange may raise when the connection or the kernel's framing fails.
EXCHANGE_ERRORS: tuple[type[Exception], ...] = (HttpFramingError, OSError, *PARSER_ERRORS)


class Endpoint:
    """Where the kernel listens and how to reach it: a plain or TLS socket, no proxy, no environment."""

    __slots__ = ("_literal_family", "connect_timeout", "host", "port", "read_timeout", "tls")

    def __init__(self, scheme: str, host: str, port: int, connect_timeout: float, read_timeout: float) -> None:
        self.host = host.strip("[]")  # an IPv6 literal as the URL writes it
        self.port = port
        self._literal_family = literal_family(self.host)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        # https: the system trust store and a hostname check, as urllib3 verifies for the unary calls.
        self.tls = ssl.create_default_context() if scheme == "https" else None
        if self.tls is not None:
            self.tls.set_alpn_protocols(["http/1.1"])

    def connect(self) -> socket.socket:
        if self._literal_family is not None:
            sock = self._connect_literal(self._literal_family)
        else:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
            sock.settimeout(self.read_timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connect_literal(self, family: socket.AddressFamily) -> socket.socket:
        """An IP address needs no name lookup: under gevent `create_connection` sends even a literal through the
        resolver's thread pool, a hand-off per stream and a deeper frame stack for the pump's greenlet to keep
        (docs/design.md#stream-memory)."""
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.connect_timeout)
            sock.connect((self.host, self.port))
        except BaseException:
            sock.close()
            raise
        return sock


def literal_family(host: str) -> socket.AddressFamily | None:
    """The address family of an IP literal (without an IPv6 zone), None for a name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        return None  # a zone is resolved by getaddrinfo, as create_connection does
    return socket.AF_INET6 if address.version == 6 else socket.AF_INET


def header_lines(headers: dict[str, str]) -> bytes:
    """`Name: value` CRLF lines; refuses a CR or LF in a name or a value (as http.client does)."""
    lines = [f"{name}: {value}\r\n" for name, value in headers.items()]
    if any("\r" in line[:-2] or "\n" in line[:-2] for line in lines):
        raise HttpFramingError("a request header holds a line break")
    return "".join(lines).encode("latin-1")


def request_head(target: str, host: str, headers: dict[str, str]) -> bytes:
    """The request line and headers, without `Content-Length` and the empty line that ends the head."""
    return f"POST {target} HTTP/1.1\r\n".encode("latin-1") + header_lines({"Host": host, **headers})


class Response:
    """The kernel's answer read through `recv` (a socket's): `read_head()` first, then `read()` one network
    read at a time."""

    __slots__ = (
        "_chunked", "_failure", "_framing", "_has_length", "_head_bytes", "_parser", "_parts", "_progress",
        "_read_size", "_recv", "clean", "done", "headers", "headers_done", "status",
    )  # fmt: skip

    def __init__(self, recv: Callable[[int], bytes], read_size: int) -> None:
        self._recv = recv
        self._read_size = read_size
        self._parser = httptools.HttpResponseParser(self)
        self._parts: list[bytes] = []
        self._failure: Exception | None = None
        self._head_bytes = 0
        self._framing = 0  # bytes fed since the last progress
        self._progress = False
        self._chunked = False
        self._has_length = False
        self.headers: dict[str, str] = {}
        self.headers_done = False
        self.status = 0
        self.done = False  # the message ended
        self.clean = True  # nothing but this message came on the connection, which may carry the next

    # ---- httptools callbacks ---------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.done:  # bytes after the body: the connection cannot carry another request
            self.clean = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self._progress = True
        if self.headers_done:
            return  # a trailer field
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "transfer-encoding" and "chunked" in text.lower():
            self._chunked = True
        elif key == "content-length":
            self._has_length = True
        self.headers[key] = text

    def on_headers_complete(self) -> None:
        self._progress = True
        self.headers_done = True
        self.status = self._parser.get_status_code()

    def on_body(self, data: bytes) -> None:
        self._progress = True
        self._parts.append(data)

    def on_chunk_header(self) -> None:
        self._progress = True

    def on_chunk_complete(self) -> None:
        self._progress = True

    def on_message_complete(self) -> None:
        self._progress = True
        if not self.done:
            self.done = True
            self.clean = self.clean and self._parser.should_keep_alive()

    # ---- reading ---------------------------------------------------------------------------------------

    def _receive(self) -> None:
        if self._failure is not None:
            raise self._failure
        data = self._recv(self._read_size)
        if not data:
            if self.headers_done and not self._chunked and not self._has_length:
                self.done = True  # a body delimited by the end of the connection
                self.clean = False
                return
            raise HttpFramingError("the connection ended inside the response")
        self._progress = False
        try:
            self._parser.feed_data(data)
        except PARSER_ERRORS as exc:
            if self.done:
                self.clean = False  # garbage after a complete message
            elif self.headers_done:
                self._failure = exc  # raised once the payload that came before it was taken
            else:
                raise
        if not self.headers_done:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                raise HttpFramingError("response head too long")
        if self._progress:
            self._framing = 0
        else:
            self._framing += len(data)
            if self._framing > MAX_FRAMING_BYTES:
                raise HttpFramingError("framing without end")

    def read_head(self) -> None:
        """Read until the status line and headers are in (body bytes that came along wait for `read()`)."""
        while not self.headers_done:
            self._receive()

    def take(self) -> bytes:
        """The payload received and not yet taken."""
        parts = self._parts
        if not parts:
            return b""
        self._parts = []
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read(self) -> bytes:
        """The payload of the next network read (b"" when that read held framing only); call until `done`."""
        if not self._parts and not self.done:
            self._receive()
        return self.take()

    def read_all(self, max_bytes: int) -> bytes:
        """The whole body, refused beyond `max_bytes`."""
        parts: list[bytes] = []
        size = 0
        while not self.done:
            data = self.read()
            size += len(data)
            if size > max_bytes:
                raise HttpFramingError("reply too large")
            parts.append(data)
        data = self.take()
        if size + len(data) > max_bytes:
            raise HttpFramingError("reply too large")
        parts.append(data)
        return b"".join(parts)


__all__ = [
    "MAX_FRAMING_BYTES",
    "MAX_HEAD_BYTES",
    "PARSER_ERRORS",
    "Endpoint",
    "HttpFramingError",
    "Response",
    "header_lines",
    "literal_family",
    "request_head",
]
