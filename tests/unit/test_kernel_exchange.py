"""The kernel's HTTP answer parsed a network read at a time (docs/design.md#a2a-stream-batches).

Any split of the bytes gives the same payload; bad or endless framing is refused with bounded memory.
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_bridge.kernel.exchange import (
    MAX_FRAMING_BYTES,
    MAX_HEAD_BYTES,
    PARSER_ERRORS,
    HttpFramingError,
    Response,
    header_lines,
)

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
READ_SIZE = 8192


def chunked(*payloads: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n" + trailer + b"\r\n"


class Reads:
    """A socket's `recv` handing over the given pieces (at most `size` bytes each), then the end."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces
        self.given = 0

    def recv(self, size: int) -> bytes:
        piece = next(self.pieces, b"")
        assert len(piece) <= size
        self.given += len(piece)
        return piece


def read_body(pieces: list[bytes]) -> tuple[bytes, Response]:
    response = Response(Reads(iter(pieces)).recv, READ_SIZE)
    response.read_head()
    parts = [response.take()]
    while not response.done:
        parts.append(response.read())
    return b"".join(parts), response


@given(
    payloads=st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=12),
)
def test_any_split_of_a_response_gives_its_payload(payloads: list[bytes], cuts: list[int]) -> None:
    body = HEAD + chunked(*payloads, trailer=b"X-Trailer: 1\r\n")
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    data, response = read_body([body[a:b] for a, b in itertools.pairwise(points) if b > a])
    assert data == b"".join(payloads)
    assert response.done and response.clean
    assert response.status == 200 and response.headers["content-type"] == "text/event-stream"


def test_extensions_are_ignored_and_bytes_after_the_body_make_the_connection_unusable() -> None:
    data, response = read_body([HEAD + b"5;name=v\r\nhello\r\n0\r\n\r\nHTTP/1.1"])
    assert data == b"hello"
    assert response.done and not response.clean


def test_a_connection_the_kernel_closes_is_not_kept() -> None:
    head = HEAD.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n")
    data, response = read_body([head + chunked(b"hello")])
    assert data == b"hello"
    assert response.done and not response.clean


def test_a_body_delimited_by_the_end_of_the_connection_is_complete_but_not_kept() -> None:
    data, response = read_body([b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}", b"[]"])
    assert data == b"{}[]"
    assert response.done and not response.clean


def test_a_body_cut_before_its_last_chunk_is_a_framing_error() -> None:
    response = Response(Reads(iter([HEAD + b"5\r\nhel"])).recv, READ_SIZE)
    response.read_head()
    assert response.read() == b"hel"
    with pytest.raises(HttpFramingError, match="ended inside"):
        response.read()


def test_a_connection_that_ends_inside_the_head_is_a_framing_error() -> None:
    with pytest.raises(HttpFramingError, match="ended inside"):
        Response(Reads(iter([b"HTTP/1.1 200 OK\r\ncontent-"])).recv, READ_SIZE).read_head()


@pytest.mark.parametrize("body", [b"zz\r\n", b"-5\r\nhello\r\n", b"5\r\nhelloXX", b"%s\r\n" % (b"1" * 40)], ids=str)
def test_bad_chunk_framing_is_a_parser_error(body: bytes) -> None:
    response = Response(Reads(iter([HEAD, body])).recv, READ_SIZE)
    response.read_head()
    with pytest.raises(PARSER_ERRORS):
        while True:  # the payload before the error comes first; the end of the reads would be another error
            response.read()


def test_the_payload_before_a_framing_error_is_handed_over_first() -> None:
    response = Response(Reads(iter([HEAD + b"5\r\nhello\r\nzz\r\n"])).recv, READ_SIZE)
    response.read_head()
    assert response.read() == b"hello"
    with pytest.raises(PARSER_ERRORS):
        response.read()


def endless(first: bytes, filler: bytes, total: int) -> Iterator[bytes]:
    """`first`, then `filler` repeated in full reads until `total` bytes were offered."""
    yield first
    piece = filler * (READ_SIZE // len(filler))
    for _ in range(total // len(piece)):
        yield piece


MEBIBYTES_OFFERED = 16 * 1024 * 1024
MEMORY_BOUND = 2 * (MAX_HEAD_BYTES + MAX_FRAMING_BYTES)


def refused_with_bounded_memory(pieces: Iterator[bytes], *, head_only: bool) -> tuple[str, int]:
    """Read until refused; the error's message and the peak memory the read allocated."""
    reads = Reads(pieces)
    response = Response(reads.recv, READ_SIZE)
    tracemalloc.start()
    try:
        with pytest.raises(HttpFramingError) as refused:
            response.read_head()
            while not head_only:
                response.read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reads.given < MEBIBYTES_OFFERED  # refused long before the peer stopped
    return str(refused.value), peak


def test_a_head_without_end_is_refused_with_bounded_memory() -> None:
    message, peak = refused_with_bounded_memory(
        endless(b"HTTP/1.1 200 OK\r\n", b"x-filler: 1\r\n", MEBIBYTES_OFFERED), head_only=True
    )
    assert "head too long" in message
    assert peak < MEMORY_BOUND


def test_a_header_value_without_end_is_refused_with_bounded_memory() -> None:
    message, peak = refused_with_bounded_memory(
        endless(b"HTTP/1.1 200 OK\r\nx-filler: ", b"v", MEBIBYTES_OFFERED), head_only=True
    )
    assert "head too long" in message
    assert peak < MEMORY_BOUND


def test_a_chunk_size_line_without_end_is_refused_with_bounded_memory() -> None:
    message, peak = refused_with_bounded_memory(endless(HEAD + b"5;ext=", b"v", MEBIBYTES_OFFERED), head_only=False)
    assert "framing without end" in message
    assert peak < MEMORY_BOUND


def test_a_trailer_without_end_is_refused_with_bounded_memory() -> None:
    message, peak = refused_with_bounded_memory(
        endless(HEAD + b"5\r\nhello\r\n0\r\nx-trailer: ", b"v", MEBIBYTES_OFFERED), head_only=False
    )
    assert "framing without end" in message
    assert peak < MEMORY_BOUND


def test_a_reply_read_whole_is_refused_beyond_its_bound() -> None:
    body = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n" + b"x" * 5000
    response = Response(Reads(iter([body[i : i + 1000] for i in range(0, len(body), 1000)])).recv, READ_SIZE)
    response.read_head()
    with pytest.raises(HttpFramingError, match="too large"):
        response.read_all(4096)


def test_a_reply_read_whole_within_its_bound_is_returned() -> None:
    body = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n" + b'{"a":1}'
    response = Response(Reads(iter([body[:60], body[60:]])).recv, READ_SIZE)
    response.read_head()
    assert response.read_all(4096) == b'{"a":1}'
    assert response.clean


@pytest.mark.parametrize("headers", [{"X-A": "1\r\nX-Injected: 2"}, {"X-A\nB": "1"}], ids=str)
def test_a_request_header_with_a_line_break_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(HttpFramingError, match="line break"):
        header_lines(headers)
