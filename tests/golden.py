"""Helpers over the real kernel's recordings in ../shared/fixtures/a2a-transcripts/."""

from __future__ import annotations

import os
from pathlib import Path

from agui_bridge.a2a.signals import A2AEvent, decode_message
from agui_bridge.a2a.sse_parser import SseParser


def transcripts_dir() -> Path:
    configured = os.environ.get("AGUI_TRANSCRIPTS_DIR")
    if configured:
        return Path(configured)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "fixtures" / "a2a-transcripts"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("a2a-transcripts fixtures not found (set AGUI_TRANSCRIPTS_DIR)")


def transcript_bytes(name: str) -> bytes:
    return (transcripts_dir() / name).read_bytes()


def transcript_events(name: str, chunk: int = 0) -> list[A2AEvent]:
    """Decode a recorded `.sse` file; `chunk` > 0 feeds it in pieces of that size."""
    raw = transcript_bytes(name)
    parser = SseParser()
    pieces = [raw] if chunk <= 0 else [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
    messages = [m for piece in pieces for m in parser.feed(piece)] + parser.close()
    return [decode_message(m) for m in messages]
