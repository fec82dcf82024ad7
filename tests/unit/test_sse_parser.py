from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_bridge.protocol.sse_parser import (
    SseComment,
    SseItem,
    SseMessage,
    SseParser,
    iter_messages,
    iter_records,
    parse_body,
    parse_body_records,
)
from tests.support.golden import transcript_bytes


def parse(chunks: list[bytes]) -> list[SseMessage]:
    parser = SseParser()
    out = [m for c in chunks for m in parser.feed(c)]
    return out + parser.close()


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b"data: {}\r\n\r\n"], [SseMessage("message", b"{}")]),
        ([b"data: {}\n\n"], [SseMessage("message", b"{}")]),
        ([b"data: {}\r\r"], [SseMessage("message", b"{}")]),
        ([b"data: {}\r", b"\n\r", b"\n"], [SseMessage("message", b"{}")]),
        ([b": ping - 2026\r\n\r\ndata: 1\r\n\r\n"], [SseMessage("message", b"1")]),
        ([b'event: error\r\ndata: {"error":1}\r\n\r\n'], [SseMessage("error", b'{"error":1}')]),
        ([b"data: a\ndata: b\n\n"], [SseMessage("message", b"a\nb")]),
        ([b"data:x\n\n"], [SseMessage("message", b"x")]),
        ([b"data: unterminated"], [SseMessage("message", b"unterminated")]),
        ([b"id: 7\nretry: 5\n\n"], []),
    ],
)
def test_parser_handles_framing_variants(chunks: list[bytes], expected: list[SseMessage]) -> None:
    assert parse(chunks) == expected


def test_multibyte_utf8_split_across_reads_is_kept_whole() -> None:
    record = 'data: {"text":"云资源"}\r\n\r\n'.encode()
    split = record.index("资".encode()) + 1
    messages = parse([record[:split], record[split:]])
    assert messages[0].data.decode("utf-8") == '{"text":"云资源"}'


@pytest.mark.parametrize("chunk_size", [1, 7, 512, 1 << 20])
def test_recorded_kernel_stream_parses_identically_whatever_the_chunking(chunk_size: int) -> None:
    raw = transcript_bytes("iac-x-llm-unreachable.sse")
    whole = parse([raw])
    pieces = [raw[i : i + chunk_size] for i in range(0, len(raw), chunk_size)]
    assert parse(pieces) == whole
    assert len(whole) == 7  # the two ': ping' comments are dropped


def test_a_record_keeps_its_own_id_line_and_the_next_starts_without_one() -> None:
    parser = SseParser()
    messages = parser.feed(b"id: 7\r\ndata: {}\r\n\r\ndata: {}\n\n")
    assert [(m.event_id, m.data) for m in messages] == [(b"7", b"{}"), (None, b"{}")]


def reference_parse(raw: bytes) -> list[SseMessage]:
    """The line-by-line reading of the whole stream at once: what any chunking must give."""
    return [item for item in reference_records(raw) if isinstance(item, SseMessage)]


def reference_records(raw: bytes) -> list[SseItem]:
    """`reference_parse` with the comment lines, in order: the standard's line rules written out plainly, the
    oracle the reader's fast paths and chunk handling are checked against (no code reads a stream with it)."""
    lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    out: list[SseItem] = []
    data: list[bytes] = []
    event, event_id = "", None
    for line in [*lines, b""]:
        if not line:
            if data:
                out.append(SseMessage(event or "message", b"\n".join(data), event_id))
            data, event, event_id = [], "", None
        elif line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
        elif line.startswith(b":"):
            out.append(SseComment(line[2:] if line.startswith(b": ") else line[1:]))
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"id:"):
            event_id = line[3:].strip()
    return out


_PIECES = st.sampled_from(
    [b"data: ", b"data:", b'{"a":1}', b"x", b"\r\n", b"\n", b"\r", b": ping", b"event: error", b"id: 7", b"\r\n\r\n"]
)


@given(pieces=st.lists(_PIECES, max_size=40), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_the_fast_path_reads_any_framing_and_chunking_like_lines(pieces: list[bytes], cuts: list[int]) -> None:
    raw = b"".join(pieces)
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    assert parse([raw[a:b] for a, b in itertools.pairwise(points)]) == reference_parse(raw)


def test_kernel_records_in_one_read_come_out_in_order_and_a_cut_one_waits() -> None:
    parser = SseParser()
    first = parser.feed(b'data: {"n":1}\r\n\r\ndata: {"n":2}\r\n\r\ndata: {"n":')
    assert [m.data for m in first] == [b'{"n":1}', b'{"n":2}']
    assert [m.data for m in parser.feed(b"3}\r\n\r\n")] == [b'{"n":3}']


def parse_records(chunks: list[bytes]) -> list[SseItem]:
    parser = SseParser()
    return [item for chunk in chunks for item in parser.feed_records(chunk)] + parser.close_records()


@given(pieces=st.lists(_PIECES, max_size=40), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_comments_come_out_in_stream_order_whatever_the_chunking(pieces: list[bytes], cuts: list[int]) -> None:
    raw = b"".join(pieces)
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    assert parse_records([raw[a:b] for a, b in itertools.pairwise(points)]) == reference_records(raw)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b": heartbeat\n\n"], [SseComment(b"heartbeat")]),
        ([b":heartbeat\n\n"], [SseComment(b"heartbeat")]),
        ([b": ping - 2026\r\n\r\ndata: 1\r\n\r\n"], [SseComment(b"ping - 2026"), SseMessage("message", b"1")]),
        (
            [b"id: 1\ndata: {}\n\n: heart", b"beat\n\nid: 2\ndata: []\n\n"],
            [SseMessage("message", b"{}", b"1"), SseComment(b"heartbeat"), SseMessage("message", b"[]", b"2")],
        ),
        (
            [b"data: a\n: inside a record\ndata: b\n\n"],
            [SseComment(b"inside a record"), SseMessage("message", b"a\nb")],
        ),
        ([b": cut at the end"], [SseComment(b"cut at the end")]),
    ],
)
def test_feed_records_hands_over_comments_with_the_records(chunks: list[bytes], expected: list[SseItem]) -> None:
    assert parse_records(chunks) == expected


def test_feed_drops_the_comments_feed_records_keeps() -> None:
    raw = b": heartbeat\n\nid: 1\ndata: {}\n\n: heartbeat\n\n"
    assert parse([raw]) == [item for item in parse_records([raw]) if isinstance(item, SseMessage)]
    assert parse([raw]) == [SseMessage("message", b"{}", b"1")]


def test_a_whole_body_keeps_an_unterminated_last_record() -> None:
    body = b": heartbeat\n\ndata: 1\n\ndata: 2"
    assert parse_body(body) == [SseMessage("message", b"1"), SseMessage("message", b"2")]
    assert parse_body_records(body) == [
        SseComment(b"heartbeat"),
        SseMessage("message", b"1"),
        SseMessage("message", b"2"),
    ]


def test_a_streamed_body_yields_each_record_as_its_read_completes_and_drops_a_cut_one() -> None:
    read: list[bytes] = []

    def network_reads() -> Iterator[bytes]:
        for chunk in (b"id: 1\ndata: {}\n\n", b": heartbeat\n\nid: 2\ndata: {", b"}\n\nid: 3\ndata: {"):
            read.append(chunk)
            yield chunk

    messages = iter_messages(network_reads())
    assert next(messages) == SseMessage("message", b"{}", b"1") and len(read) == 1  # no read ahead
    assert list(messages) == [SseMessage("message", b"{}", b"2")]  # the record cut by the end is not one
    assert list(iter_records(iter([b": heartbeat\n\ndata: 1\n\ndata: 2"]))) == [
        SseComment(b"heartbeat"),
        SseMessage("message", b"1"),
    ]
