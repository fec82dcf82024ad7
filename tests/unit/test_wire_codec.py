"""The fast JSON codec on the hot path writes and reads exactly what the standard library did."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agui_bridge.protocol.sse import encode_event, encode_events
from agui_bridge.protocol.sse_parser import decode_data

_STD = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t-1", "runId": "r-1", "timestamp": 1764612345678},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 'héllo \u2028 "quoted" \\ \n\t 😀 \x00'},
    {"type": "CUSTOM", "name": "x", "value": {"nested": [1, 2.5, -0.0, True, None, {"k": []}], "c": 0.25}},
    {"type": "RUN_FINISHED", "outcome": {"type": "success"}, "usage": [{"totalTokens": 2**63 - 1}]},
]


@pytest.mark.parametrize("event", EVENTS)
def test_encoding_matches_the_standard_library_byte_for_byte(event: dict[str, Any]) -> None:
    assert encode_event(event) == b"data: " + _STD.encode(event).encode("utf-8") + b"\n\n"


def test_exponent_floats_keep_their_value() -> None:
    """The one spelling difference: orjson writes `1e-7` where Python writes `1e-07` (same number)."""
    event = {"v": [1e-7, 1.5e300, 123456789.125, 0.1 + 0.2]}
    assert json.loads(encode_event(event)[6:]) == event


def test_a_batch_is_the_concatenation_of_its_events() -> None:
    assert encode_events(EVENTS) == b"".join(encode_event(e) for e in EVENTS)
    assert encode_events([]) == b""


def test_values_orjson_refuses_fall_back_to_the_standard_encoder() -> None:
    big = {"type": "CUSTOM", "value": 2**70, "keys": {1: "int key"}}
    assert encode_event(big) == b'data: {"type":"CUSTOM","value":1180591620717411303424,"keys":{"1":"int key"}}\n\n'
    with pytest.raises(TypeError):  # not JSON at all: refused as before
        encode_event({"type": "CUSTOM", "value": object()})


def test_a_non_finite_float_becomes_null() -> None:
    assert encode_event({"v": math.nan}) == b'data: {"v":null}\n\n'


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}}',
        '{"text":"h\u00e9llo \\ud83d\\ude00"}'.encode(),
        b"[1, 2.5, -0, 1E2, true, false, null]",
        b'{"nan": NaN, "inf": Infinity}',  # the standard library accepts these: so must we
        b'{"lone": "\\ud800"}',
        b'{"huge": 1e400}',
    ],
)
def test_decoding_matches_the_standard_library(raw: bytes) -> None:
    ours, theirs = decode_data(raw), json.loads(raw)
    assert json.dumps(ours) == json.dumps(theirs)


def test_invalid_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_data(b'{"a":')
    with pytest.raises(ValueError):
        decode_data(b"\xff")
