"""SSE is split in one place: `agui_bridge/protocol/sse_parser.py` reads it, `protocol/sse.py` writes it.

Every reader of a stream (the A2A pump, the run record's readers, the chat client, the testing plugin, the
tests, the bench) goes through the one parser (docs/design.md#sse-reading), so they cannot disagree about
what a stream says. A search for a frame end, a field prefix handled by hand, or a frame-end constant
anywhere else fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ("agui_bridge", "tests", "bench")
SKIPPED_DIRS = {"node_modules", ".venv", "__pycache__"}
#: The reader and the writer, the only places that know SSE syntax (and this check's own examples).
ALLOWED = {
    Path("agui_bridge/protocol/sse_parser.py"),
    Path("agui_bridge/protocol/sse.py"),
    Path(__file__).resolve().relative_to(ROOT),
}

_QUOTE = "[\"']"
HAND_SPLITTING = re.compile(
    "|".join(
        [
            # searching or splitting a body at a frame end (`body.split(b"\n\n")`, `buf.find(b"\n\nid: ")`)
            rf"\.(?:find|rfind|index|rindex|split|rsplit|partition|rpartition|count)\(\s*b{_QUOTE}\\n\\n",
            # a field's prefix handled by hand (`line.startswith(b"data: ")`, `line.removeprefix("id:")`)
            rf"\.(?:startswith|endswith|find|rfind|index|split|partition|removeprefix|replace|lstrip)"
            rf"\(\s*b?{_QUOTE}(?:data|id|event|retry):\s?{_QUOTE}",
            # a frame-end constant of one's own (`_FRAME_END = b"\n\n"`)
            rf"^\s*\w+\s*(?::[^=]*)?=\s*b{_QUOTE}(?:\\r)?\\n(?:\\r)?\\n",
        ]
    )
)


def hand_splitting(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if HAND_SPLITTING.search(line)]


def python_sources() -> list[Path]:
    return sorted(
        path
        for folder in SEARCHED
        for path in (ROOT / folder).rglob("*.py")
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)  # bench/.venv-ref, ...
    )


def test_the_check_finds_hand_written_sse_splitting() -> None:
    found = hand_splitting(
        "\n".join(
            [
                r'frames = body.split(b"\n\n")',
                r'end = buffer.find(b"\n\n", start)',
                r'last = chunk.rfind(b"\n\nid: ")',
                r'if line.startswith(b"data: "):',
                r'elif line.startswith(b"id:"):',
                r'payload = line.removeprefix("data:")',
                r'_FRAME_END = b"\n\n"',
                r'CRLF_END: bytes = b"\r\n\r\n"',
            ]
        )
    )
    assert len(found) == 8


def test_the_check_leaves_writing_frames_and_other_text_alone() -> None:
    assert not hand_splitting(
        "\n".join(
            [
                r'self.wfile.write(b"data: " + payload + b"\n\n")',
                r'parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])',
                r'head, _, rest = data.partition(b"\r\n\r\n")',
                r'assert shown.startswith(b"id: 1\ndata: ")',
                r"end = parser.find_frame_end(buffer)",
            ]
        )
    )


def test_no_module_outside_the_sse_modules_splits_sse_by_hand() -> None:
    sources = python_sources()
    assert ROOT / "agui_bridge/reattach/reader.py" in sources and ROOT / "tests/support/sse.py" in sources
    found = [
        f"{path.relative_to(ROOT)}: {line}"
        for path in sources
        if path.relative_to(ROOT) not in ALLOWED
        for line in hand_splitting(path.read_text(encoding="utf-8"))
    ]
    assert found == []
