"""Helpers over the real kernel's recordings kept in tests/fixtures/a2a-transcripts/ (see its README)."""

from __future__ import annotations

from pathlib import Path

from agui_bridge.a2a.signals import A2AEvent, decode_message
from agui_bridge.protocol.sse_parser import SseParser

TRANSCRIPTS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "a2a-transcripts"


def transcript_bytes(name: str) -> bytes:
    """The exact recorded bytes; refuses a copy whose CRLF framing a checkout has rewritten."""
    raw = (TRANSCRIPTS_DIR / name).read_bytes()
    if name.endswith(".sse") and b"\r\n" not in raw:
        raise ValueError(f"{name} lost its CRLF framing (see tests/fixtures/.gitattributes)")
    return raw


def transcript_events(name: str, chunk: int = 0) -> list[A2AEvent]:
    """Decode a recorded `.sse` file; `chunk` > 0 feeds it in pieces of that size."""
    raw = transcript_bytes(name)
    parser = SseParser()
    pieces = [raw] if chunk <= 0 else [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
    messages = [m for piece in pieces for m in parser.feed(piece)] + parser.close()
    return [decode_message(m) for m in messages]
