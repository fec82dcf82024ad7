from __future__ import annotations

import pytest

from agui_bridge.a2a.sse_parser import SseMessage, SseParser
from tests.golden import transcript_bytes


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
