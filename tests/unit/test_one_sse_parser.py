"""SSE is split in one place: `agui_bridge/protocol/sse_parser.py` reads it, `protocol/sse.py` writes it.

Every Python reader of a stream (the A2A pump, the run record's readers, the chat client, the testing plugin,
the tests, the bench) goes through the one parser (docs/design.md#sse-reading), so they cannot disagree about
what a stream says. A search for a frame end, a field prefix handled by hand, or a frame-end constant
anywhere else fails here. The JavaScript and TypeScript outside node_modules are held to the same: they read
SSE with their client library's parser (`@ag-ui/client`'s `parseSSEStream`), except the web console, which
runs in the browser and has its own, and the reattach example, which shows reading the SSE yourself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

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


_JS_QUOTE = "[\"'`]"
JS_HAND_SPLITTING = re.compile(
    "|".join(
        [
            # searching or splitting text at a frame end (`text.split("\n\n")`, `buffer.indexOf("\n\n")`, `/\n\n/`)
            rf"\.(?:split|indexOf|lastIndexOf|search|includes|match|matchAll)\(\s*"
            rf"(?:{_JS_QUOTE}(?:\\r)?\\n(?:\\r)?\\n|/[^/]*\\n[^/]*\\n[^/]*/)",
            # a field's prefix handled by hand (`line.startsWith("data:")`, `line.replace(/^data: ?/, "")`)
            rf"\.(?:startsWith|indexOf|slice|replace|split|match|includes)\(\s*"
            rf"(?:{_JS_QUOTE}(?:data|id|event|retry):|/\^?(?:data|id|event|retry):)",
            r"/\^(?:data|id|event|retry):",
            # a frame-end constant of one's own (`const FRAME_END = "\n\n"`)
            rf"(?:const|let|var)\s+\w+\s*=\s*{_JS_QUOTE}(?:\\r)?\\n(?:\\r)?\\n{_JS_QUOTE}",
        ]
    )
)
JS_SUFFIXES = {".js", ".mjs", ".cjs", ".ts", ".mts"}
#: Third-party code kept in the repository (checked against its sha256 manifest), not ours.
VENDORED = Path("agui_bridge/console/static/vendor")
JS_ALLOWED = {
    # The web console runs in the browser, which has no @ag-ui/client: its reader is the browser's own.
    Path("agui_bridge/console/static/console.js"),
}
#: The reattach example shows a reader of one's own on purpose (docs/reattach.md quotes it): it needs each
#: record's `id`, which `parseSSEStream` drops.
JS_READ_YOURSELF_EXAMPLE = Path("tests/conformance/reattach_example.mjs")


def lines_matching(pattern: re.Pattern[str], source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if pattern.search(line)]


def hand_splitting(source: str) -> list[str]:
    return lines_matching(HAND_SPLITTING, source)


def js_hand_splitting(source: str) -> list[str]:
    return lines_matching(JS_HAND_SPLITTING, source)


def is_ours(path: Path) -> bool:
    """Not in node_modules, a virtualenv or a cache, nor under a hidden directory (bench/.venv-ref, ...)."""
    parts = path.relative_to(ROOT).parts
    return not SKIPPED_DIRS.intersection(parts) and not any(part.startswith(".") for part in parts)


def js_sources() -> list[Path]:
    """Every JavaScript/TypeScript file of ours, but the vendored files."""
    return sorted(
        path
        for path in ROOT.rglob("*")
        if path.suffix in JS_SUFFIXES
        and path.is_file()
        and is_ours(path)
        and not path.relative_to(ROOT).is_relative_to(VENDORED)
    )


def python_sources() -> list[Path]:
    return sorted(path for folder in SEARCHED for path in (ROOT / folder).rglob("*.py") if is_ours(path))


@dataclass(frozen=True)
class Scan:
    """One language's sources, held to its pattern of SSE split by hand."""

    sources: Callable[[], list[Path]]
    pattern: re.Pattern[str]
    #: Files that may split SSE by hand.
    allowed: frozenset[Path]
    #: Readers the scan must reach (a scan that reaches none of them finds nothing).
    reached: tuple[Path, ...]
    #: Folders the scan must not read.
    not_reached: tuple[Path, ...] = ()


SCANS = [
    pytest.param(
        Scan(
            python_sources,
            HAND_SPLITTING,
            frozenset(ALLOWED),
            (Path("agui_bridge/reattach/reader.py"), Path("tests/support/sse.py")),
        ),
        id="python",
    ),
    pytest.param(
        Scan(
            js_sources,
            JS_HAND_SPLITTING,
            frozenset(JS_ALLOWED | {JS_READ_YOURSELF_EXAMPLE}),
            (Path("tests/interop/drive.mjs"), Path("clients/typescript/reattaching-http-agent.ts")),
            not_reached=(VENDORED,),
        ),
        id="javascript",
    ),
]


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


def test_the_js_check_finds_hand_written_sse_splitting() -> None:
    found = js_hand_splitting(
        "\n".join(
            [
                r'for (const record of text.split("\n\n")) {',
                r"const parts = buffer.split(/\r?\n\r?\n/);",
                r'while ((end = buffer.indexOf("\n\n")) >= 0) {',
                r'const complete = text.slice(0, text.lastIndexOf("\n\n") + 2);',
                r'.filter((line) => line.startsWith("data:"))',
                r"const id = line.replace(/^id: ?/, '');",
                r"if (/^event:/.test(line)) continue;",
                r'const FRAME_END = "\n\n";',
            ]
        )
    )
    assert len(found) == 8


def test_the_js_check_leaves_writing_frames_and_other_text_alone() -> None:
    assert not js_hand_splitting(
        "\n".join(
            [
                r"res.write(`data: ${JSON.stringify(event)}\n\n`);",
                r'const lines = message.split("\n");',
                r"parseSSEStream(source).subscribe({ next: (event) => events.push(event) });",
                r"process.stdout.write(`${JSON.stringify(result)}\n`);",
            ]
        )
    )


@pytest.mark.parametrize("scan", SCANS)
def test_no_source_of_ours_but_the_allowed_readers_splits_sse_by_hand(scan: Scan) -> None:
    sources = [path.relative_to(ROOT) for path in scan.sources()]
    assert set(scan.reached) <= set(sources)
    assert not [path for path in sources for folder in scan.not_reached if path.is_relative_to(folder)]
    found = [
        f"{path}: {line}"
        for path in sources
        if path not in scan.allowed
        for line in lines_matching(scan.pattern, (ROOT / path).read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_js_checks_exceptions_are_real_readers() -> None:
    """An exception that no longer reads SSE by hand is stale: it would let a new reader through unseen."""
    for allowed in JS_ALLOWED | {JS_READ_YOURSELF_EXAMPLE}:
        assert js_hand_splitting((ROOT / allowed).read_text(encoding="utf-8")), allowed
