"""The offset helpers a run record's bounded readers use to find the bridge's own frames."""

from __future__ import annotations

import pytest

from agui_bridge.protocol.sse import FRAME_END, encode_comment, encode_numbered
from agui_bridge.protocol.sse_parser import (
    frame_ends,
    frame_id_and_data,
    is_comment_frame,
    last_frame_end,
    last_numbered_frame,
    next_frame_end,
    next_numbered_frame,
    parse_body,
    resume_search_at,
)

HEAD = encode_comment(b'record {"v":1}')
FIRST = encode_numbered(1, {"type": "RUN_STARTED"})
SECOND = encode_numbered(2, {"type": "RUN_FINISHED"})
RECORD = HEAD + FIRST + SECOND


def test_frame_ends_are_offsets_just_past_each_frame() -> None:
    assert next_frame_end(RECORD) == len(HEAD)
    assert next_frame_end(RECORD, len(HEAD)) == len(HEAD + FIRST)
    assert last_frame_end(RECORD) == len(RECORD)
    assert last_frame_end(RECORD, 0, len(RECORD) - 1) == len(HEAD + FIRST)
    assert next_frame_end(RECORD[:-1], len(HEAD + FIRST)) == -1 and last_frame_end(FIRST[:-1]) == -1


def test_one_call_gives_every_whole_frame_of_a_read_and_leaves_a_cut_one() -> None:
    assert frame_ends(RECORD) == [len(HEAD), len(HEAD + FIRST), len(RECORD)]
    assert frame_ends(RECORD[:-1]) == [len(HEAD), len(HEAD + FIRST)]
    assert frame_ends(FIRST[:-2]) == []


def test_a_search_resumed_after_a_read_finds_a_frame_end_split_across_two_reads() -> None:
    searched = len(HEAD + FIRST) - 1  # the first read stopped between the frame end's two bytes
    assert next_frame_end(RECORD[:searched]) == len(HEAD)
    assert next_frame_end(RECORD, max(len(HEAD), resume_search_at(searched))) == len(HEAD + FIRST)
    assert resume_search_at(0) == 0


def test_numbered_frames_are_found_where_they_start_and_comments_are_not() -> None:
    assert next_numbered_frame(RECORD) == len(HEAD)
    assert next_numbered_frame(RECORD, len(HEAD)) == len(HEAD + FIRST)
    assert last_numbered_frame(RECORD) == len(HEAD + FIRST)
    assert next_numbered_frame(RECORD, 0, len(HEAD) + 2) == -1  # its id field is not inside the window
    assert next_numbered_frame(HEAD + encode_comment(b"truncated")) == -1


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (FIRST, (1, b'{"type":"RUN_STARTED"}')),
        (FIRST[:20], (1, FIRST[len(b"id: 1\ndata: ") : 20])),
        (b"data: {}\nid: 7\n\n", (7, b"{}")),
        (b"id: x\ndata: {}\n\n", (0, b"")),
        (b"id: 0\ndata: {}\n\n", (0, b"")),
        (HEAD, (0, b"")),
        (b"data: {}\n\n", (0, b"")),
    ],
)
def test_a_frames_id_and_data_are_read_from_its_first_bytes(frame: bytes, expected: tuple[int, bytes]) -> None:
    assert frame_id_and_data(frame) == expected


def test_what_the_offset_helpers_read_agrees_with_the_one_parser() -> None:
    (first, second) = parse_body(RECORD)
    assert [frame_id_and_data(FIRST), frame_id_and_data(SECOND)] == [
        (int(first.event_id or b"0"), first.data),
        (int(second.event_id or b"0"), second.data),
    ]
    assert is_comment_frame(HEAD) and not is_comment_frame(FIRST) and RECORD[-2:] == FRAME_END
