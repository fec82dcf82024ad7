"""Markdown for `agui-bridge chat` on a terminal, drawn by `rich` (docs/design.md#terminal-output).

Agents answer in Markdown, and an IaC agent's answer is mostly a fenced template: on a terminal the
message is shown rendered (code highlighted without its fences, lists, tables, links with their URL in
full) by a well-kept renderer instead of hand-written ANSI. Piped output and `--json` never come here.

Streaming: the message in progress is re-rendered in a transient `rich.live.Live` region at a bounded
rate (the bottom of it, at most a screen high, so the region can always be erased), and when the message
ends, or anything else is about to be printed, the region is replaced by the whole message rendered once
into the scrollback. The user sees text as it arrives and keeps a clean, complete rendering.

Safety: every delta has passed `escape_terminal` before it gets here, markup and emoji codes are off
(`[red]` or `:smile:` from an agent is text), raw HTML is shown as text, and links are written out
instead of becoming OSC 8 hyperlinks whose target the user cannot see. This module imports `rich` at
the top: `chat/output.py` imports it only when stdout is a terminal.
"""

from __future__ import annotations

from typing import ClassVar, TextIO

from markdown_it import MarkdownIt
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import CodeBlock, Markdown, MarkdownElement
from rich.segment import Segment
from rich.syntax import Syntax

#: How often the message in progress is re-rendered while deltas arrive.
REFRESHES_PER_SECOND = 8
#: Source lines of the message in progress rendered per refresh, as screen heights (bounds its cost).
TAIL_SCREENS = 2
#: Above this size a message or an artifact is shown as written: rendering it would stall the terminal.
MAX_RENDERED_CHARS = 200_000
CODE_THEME = "monokai"

#: CommonMark without raw HTML (an agent's `<script>` is text), plus GFM tables and strikethrough.
_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])


class _FlushCodeBlock(CodeBlock):
    """A fenced block without rich's one-column padding, so a template copied from the terminal keeps its
    own indentation."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Syntax(str(self.text).rstrip(), self.lexer_name, theme=self.theme, word_wrap=True, padding=0)


class AgentMarkdown(Markdown):
    """rich's Markdown with the agent-facing choices above: no raw HTML, no hidden link targets."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "fence": _FlushCodeBlock,
        "code_block": _FlushCodeBlock,
    }

    def __init__(self, markup: str) -> None:
        super().__init__("", code_theme=CODE_THEME, hyperlinks=False)
        self.markup = markup
        self.parsed = _PARSER.parse(markup)


def _fence_opener(line: str) -> str | None:
    """The fence characters (three or more backticks or tildes) a line opens or closes a fence with."""
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    for mark in ("```", "~~~"):
        if stripped.startswith(mark):
            return mark[0] * (len(stripped) - len(stripped.lstrip(mark[0])))
    return None


def tail_source(text: str, keep_lines: int, keep_chars: int) -> str:
    """The end of `text` (its last `keep_lines` lines, at most `keep_chars` characters), preceded by the
    opening line of the fence it sits in, if any: enough to preview the bottom of a long message with its
    code still highlighted, at a cost that does not grow with the message. Pure."""
    lines = text[-keep_chars:].split("\n") if len(text) > keep_chars else text.split("\n")
    cut = max(0, len(lines) - keep_lines)
    if cut == 0 and len(text) <= keep_chars:
        return text
    kept = "\n".join(lines[cut:])
    opener = _open_fence(text[: len(text) - len(kept)])
    return f"{opener}\n{kept}" if opener is not None else kept


def _open_fence(text: str) -> str | None:
    """The opening line of the fence still open at the end of `text`, or None."""
    open_line: str | None = None
    fence = ""
    for line in text.split("\n"):
        marks = _fence_opener(line)
        if marks is None:
            continue
        if open_line is None:
            open_line, fence = line, marks
        elif marks.startswith(fence) and not line.strip().strip(fence[0]):
            open_line = None
    return open_line


class _Tail:
    """The bottom of the message in progress, at most one line less than the screen, so that Live can
    always move the cursor back to its top and erase it. Holds the message's list of deltas, joined at
    render time: appending a delta stays O(1) however long the message grows."""

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self._drawn: tuple[tuple[int, int, int], list[list[Segment]]] | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        height = max(1, console.size.height - 1)
        key = (len(self.parts), height, options.max_width)
        if self._drawn is None or self._drawn[0] != key:  # a refresh without a new delta draws nothing anew
            keep_lines = height * TAIL_SCREENS
            source = tail_source("".join(self.parts), keep_lines, keep_lines * max(1, options.max_width))
            # One column short of the screen and without trailing blanks: the cursor never waits at the right
            # edge, where the echo of a key the user types (^C) would wrap onto a line Live does not erase.
            narrower = options.update_width(max(1, options.max_width - 1))
            lines = console.render_lines(AgentMarkdown(source), narrower, pad=False)[-height:]
            self._drawn = key, [_without_trailing_blanks(line) for line in lines]
        for line in self._drawn[1]:
            yield from line
            yield Segment.line()


#: Media types the kernel gives artifacts whose file name may not tell (`.ros` templates, no extension).
_MEDIA_TYPE_EXTENSIONS = {
    "application/yaml": ".yaml",
    "application/x-yaml": ".yaml",
    "text/yaml": ".yaml",
    "application/json": ".json",
    "text/x-python": ".py",
    "text/x-shellscript": ".sh",
    "text/x-hcl": ".tf",
}


def _without_trailing_blanks(line: list[Segment]) -> list[Segment]:
    """A rendered line without the spaces that pad it to the full width (its styles kept)."""
    kept = list(line)
    while kept and (kept[-1].control or not kept[-1].text.rstrip(" ")):
        kept.pop()
    if kept:
        last = kept[-1]
        kept[-1] = Segment(last.text.rstrip(" "), last.style, last.control)
    return kept


def guess_lexer(filename: str, media_type: str, code: str) -> str:
    """A Pygments lexer name for an artifact: from its media type when it names one, else its file name."""
    extension = _MEDIA_TYPE_EXTENSIONS.get(media_type.partition(";")[0].strip().lower())
    return Syntax.guess_lexer(f"artifact{extension}" if extension else filename or "artifact.txt", code)


class _QuietLive(Live):
    """Live that redraws only when the message grew or the terminal changed size: a stream that pauses
    mid-message does not rewrite the same screen eight times a second."""

    def __init__(self, tail: _Tail, console: Console) -> None:
        super().__init__(
            tail,
            console=console,
            refresh_per_second=REFRESHES_PER_SECOND,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            vertical_overflow="crop",
        )
        self._tail = tail
        self._shown: tuple[int, int, int] | None = None

    def refresh(self) -> None:
        size = self.console.size
        shown = (len(self._tail.parts), size.width, size.height)
        if shown != self._shown:
            self._shown = shown
            super().refresh()


class MarkdownRenderer:
    """The terminal side of the chat output: one assistant message at a time, rendered."""

    def __init__(self, out: TextIO) -> None:
        self.console = Console(
            file=out, force_terminal=True, markup=False, emoji=False, highlight=False, soft_wrap=False
        )
        self._parts: list[str] = []
        self._live: _QuietLive | None = None

    @property
    def active(self) -> bool:
        """True while a message is being shown and has not been settled into the scrollback."""
        return bool(self._parts)

    def add(self, escaped_delta: str) -> None:
        """Append a delta (already escaped) to the message in progress and let Live show it."""
        if not escaped_delta:
            return
        self._parts.append(escaped_delta)
        if self._live is None:
            self._live = _QuietLive(_Tail(self._parts), self.console)
            self._live.start(refresh=True)  # its thread redraws the same _Tail, which sees every later delta

    def settle(self) -> None:
        """Erase the live preview and print the whole message rendered once; nothing when idle."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
        text, self._parts = "".join(self._parts), []
        if len(text) > MAX_RENDERED_CHARS:
            self.console.file.write(text if text.endswith("\n") else text + "\n")
            self.console.file.flush()
        elif text.strip():
            self.console.print(AgentMarkdown(text))

    def code(self, escaped_content: str, filename: str, media_type: str) -> None:
        """An artifact's inline content as a highlighted block (plain when too large to highlight)."""
        self.settle()
        content = escaped_content.rstrip("\n")
        if len(content) > MAX_RENDERED_CHARS:
            self.console.file.write(content + "\n")
            self.console.file.flush()
            return
        lexer = guess_lexer(filename, media_type, content)
        self.console.print(Syntax(content, lexer, theme=CODE_THEME, word_wrap=True, padding=0))
