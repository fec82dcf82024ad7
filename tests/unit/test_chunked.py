"""The chunked-body decoder of the A2A stream: any split of the bytes gives the same payload."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_bridge.kernel.chunked import MAX_SIZE_LINE, ChunkDecoder, ChunkedError


def chunked(*payloads: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n" + trailer + b"\r\n"


def decode(pieces: list[bytes]) -> tuple[bytes, ChunkDecoder]:
    decoder = ChunkDecoder()
    return b"".join(decoder.feed(piece) for piece in pieces), decoder


@given(
    payloads=st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=12),
)
def test_any_split_of_a_body_decodes_to_its_payload(payloads: list[bytes], cuts: list[int]) -> None:
    body = chunked(*payloads, trailer=b"X-Trailer: 1\r\n")
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    data, decoder = decode([body[a:b] for a, b in itertools.pairwise(points)])
    assert data == b"".join(payloads)
    assert decoder.done and decoder.clean
    decoder.check_complete()


def test_extensions_are_ignored_and_bytes_after_the_body_are_not_clean() -> None:
    data, decoder = decode([b"5;name=v\r\nhello\r\n0\r\n\r\nHTTP/1.1"])
    assert data == b"hello"
    assert decoder.done and not decoder.clean


def test_a_body_cut_before_its_last_chunk_is_incomplete() -> None:
    data, decoder = decode([b"5\r\nhel"])
    assert data == b"hel"
    with pytest.raises(ChunkedError):
        decoder.check_complete()


@pytest.mark.parametrize(
    "body",
    [b"zz\r\n", b"-5\r\nhello\r\n", b"5\r\nhelloXX", b"1" * (MAX_SIZE_LINE + 2), b"%s\r\n" % (b"1" * MAX_SIZE_LINE)],
)
def test_framing_errors_raise(body: bytes) -> None:
    with pytest.raises(ChunkedError):
        ChunkDecoder().feed(body)
