"""agui_bridge.testing.EventStream's SSE reading, on responses cut at awkward places."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from werkzeug.wrappers import Response

from agui_bridge.testing import EventStream, answer, resume_input, run_input


def stream_of(chunks: list[bytes | str], status: int = 200, mimetype: str = "text/event-stream") -> EventStream:
    consumed: list[int] = []

    def body() -> Iterator[bytes]:
        for chunk in chunks:
            consumed.append(1)
            yield chunk if isinstance(chunk, bytes) else chunk.encode()

    response = Response(body(), status=status, mimetype=mimetype)
    stream = EventStream(response, {})  # type: ignore[arg-type]
    stream.consumed = consumed  # type: ignore[attr-defined]
    return stream


def test_records_split_across_chunks_crlf_comments_and_multiline_data() -> None:
    first = json.dumps({"type": "RUN_STARTED"}).encode()
    stream = stream_of([
        b"data: " + first[:5], first[5:] + b"\r\n\r\n: heartbeat\r\n\r\n",
        'data: {"type": "TEXT_MESSAGE_CONTENT",\ndata: "delta": "h\u00e9"}\n\n',
        b'data: {"type": "RUN_FINISHED", "outcome": {"type": "success"}}\n\n',
    ])  # fmt: skip
    assert stream.next_event() == {"type": "RUN_STARTED"}
    assert stream.consumed == [1, 1]  # type: ignore[attr-defined]  # read no further than needed
    assert stream.comments == ["heartbeat"]
    assert stream.until("TEXT_MESSAGE_CONTENT")["delta"] == "h\u00e9"
    assert stream.outcome == "success" and stream.interrupts == [] and stream.text == "h\u00e9"
    assert stream.next_event() is None


def test_interrupts_and_errors() -> None:
    interrupt: dict[str, Any] = {"id": "i-1", "reason": "tool_call"}
    finished = {"type": "RUN_FINISHED", "outcome": {"type": "interrupt", "interrupts": [interrupt]}}
    stream = stream_of([f"data: {json.dumps(finished)}\n\n"])
    assert stream.outcome == "interrupt" and stream.interrupts == [interrupt]
    failed = stream_of([b'data: {"type": "RUN_STARTED"}\n\ndata: {"type": "RUN_ERROR", "code": "X"}\n\n'])
    assert failed.outcome == "RUN_ERROR" and failed.terminal["code"] == "X"
    refused = stream_of(['{"error": {"code": "THREAD_BUSY", "message": "busy"}}'], 409, "application/json")
    assert not refused.is_stream and refused.error == {"code": "THREAD_BUSY", "message": "busy"}
    assert refused.next_event() is None


def test_request_bodies() -> None:
    body = run_input("t-1", "hi", "/ws", ros_invocation_id="r-2", runMode="pipeline")
    assert body["threadId"] == "t-1" and body["messages"][0]["content"] == "hi"
    assert body["forwardedProps"]["iacCode"] == {"schemaVersion": 1, "rosInvocationId": "r-2", "cwd": "/ws",
                                                "runMode": "pipeline"}  # fmt: skip
    entry = answer({"id": "i-1"}, {"decision": "deny"})
    assert entry == {"interruptId": "i-1", "status": "resolved", "payload": {"decision": "deny"}}
    resume = resume_input("t-1", "/ws", [entry])
    assert resume["messages"] == [] and resume["resume"] == [entry] and resume["runId"] != body["runId"]
