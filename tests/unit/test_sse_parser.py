from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

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


@dataclass(frozen=True)
class Line:
    """One line of a stream as the standard names its parts: what it is, and how it is written."""

    kind: Literal["data", "comment", "event", "id", "unknown", "blank"]
    value: bytes = b""
    spaced: bool = True  # one space after the colon (the reader drops exactly that one)
    ending: bytes = b"\n"


_TEXT = st.binary(max_size=12).map(lambda raw: bytes(b for b in raw if b not in b"\r\n"))
_WORD = st.text("abcdefghij-_0123456789", min_size=1, max_size=8).map(str.encode)
_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
_UNKNOWN_FIELDS = st.sampled_from([b"retry: 5", b"x", b"datax: 1", b"ID: 2"])  # lines a reader ignores
_LINES = st.one_of(
    st.builds(Line, st.just("data"), _TEXT, st.booleans(), _ENDINGS),
    st.builds(Line, st.just("comment"), _TEXT, st.booleans(), _ENDINGS),
    st.builds(Line, st.just("event"), _WORD, st.booleans(), _ENDINGS),
    st.builds(Line, st.just("id"), _WORD, st.booleans(), _ENDINGS),
    st.builds(
        Line, st.just("unknown"), st.sampled_from([b"retry: 5", b"x", b"datax: 1", b"ID: 2"]), st.just(True), _ENDINGS
    ),
    st.builds(Line, st.just("blank"), st.just(b""), st.just(True), _ENDINGS),
)


def written(lines: list[Line]) -> bytes:
    """The stream's bytes. A blank line after a CR-ended one is written with CR: a lone LF would join that
    CR into one CRLF ending, which is a different stream than the lines describe."""
    out = b""
    for index, line in enumerate(lines):
        ending = line.ending
        if line.kind == "blank" and ending == b"\n" and index and lines[index - 1].ending == b"\r":
            ending = b"\r"
        field = {"data": b"data", "comment": b"", "event": b"event", "id": b"id"}.get(line.kind)
        if field is None:
            out += line.value + ending
        else:
            # A value that starts with a space is written after ": ": the reader drops the first space only.
            spaced = line.spaced or line.value.startswith(b" ")
            out += field + (b": " if spaced else b":") + line.value + ending
    return out


def expected_records(lines: list[Line]) -> list[SseItem]:
    """What the standard says a reader makes of the lines: every comment where it stands, and a message
    (its data lines joined by LF, its event name or "message", its own id) at each blank line or the end."""
    out: list[SseItem] = []
    data: list[bytes] = []
    event, event_id = "", None
    for line in [*lines, Line("blank")]:
        if line.kind == "blank":
            if data:
                out.append(SseMessage(event or "message", b"\n".join(data), event_id))
            data, event, event_id = [], "", None
        elif line.kind == "data":
            data.append(line.value)
        elif line.kind == "comment":
            out.append(SseComment(line.value))
        elif line.kind == "event":
            event = line.value.decode()
        elif line.kind == "id":
            event_id = line.value
    return out


@given(lines=st.lists(_LINES, max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_the_fast_path_reads_any_framing_and_chunking_as_the_standard_says(lines: list[Line], cuts: list[int]) -> None:
    raw = written(lines)
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    expected = [item for item in expected_records(lines) if isinstance(item, SseMessage)]
    assert parse([raw[a:b] for a, b in itertools.pairwise(points)]) == expected


def test_kernel_records_in_one_read_come_out_in_order_and_a_cut_one_waits() -> None:
    parser = SseParser()
    first = parser.feed(b'data: {"n":1}\r\n\r\ndata: {"n":2}\r\n\r\ndata: {"n":')
    assert [m.data for m in first] == [b'{"n":1}', b'{"n":2}']
    assert [m.data for m in parser.feed(b"3}\r\n\r\n")] == [b'{"n":3}']


def parse_records(chunks: list[bytes]) -> list[SseItem]:
    parser = SseParser()
    return [item for chunk in chunks for item in parser.feed_records(chunk)] + parser.close_records()


@given(lines=st.lists(_LINES, max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_comments_come_out_in_stream_order_whatever_the_chunking(lines: list[Line], cuts: list[int]) -> None:
    raw = written(lines)
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    assert parse_records([raw[a:b] for a, b in itertools.pairwise(points)]) == expected_records(lines)


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
