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
from rich.text import Text

#: How often the message in progress is re-rendered while deltas arrive.
REFRESHES_PER_SECOND = 8
#: Source lines of the message in progress rendered per refresh, as screen heights (bounds its cost).
TAIL_SCREENS = 2
#: Above this size an artifact is shown as plain text: highlighting it would stall the terminal.
MAX_HIGHLIGHTED_CHARS = 200_000
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


def tail_source(text: str, keep_lines: int) -> str:
    """The last `keep_lines` lines of `text`, preceded by the opening line of the fence they sit in, if any:
    enough to preview the bottom of a long message with its code still highlighted. Pure."""
    lines = text.split("\n")
    if len(lines) <= keep_lines:
        return text
    open_at: int | None = None
    fence = ""
    for number, line in enumerate(lines):
        opener = _fence_opener(line)
        if opener is None:
            continue
        if open_at is None:
            open_at, fence = number, opener
        elif opener.startswith(fence) and not line.strip().strip(fence[0]):
            open_at = None
    cut = len(lines) - keep_lines
    kept = lines[cut:]
    if open_at is not None and open_at < cut:
        kept = [lines[open_at], *kept]
    return "\n".join(kept)


class _Tail:
    """The bottom of the message in progress, at most one line less than the screen, so that Live can
    always move the cursor back to its top and erase it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        height = max(1, console.size.height - 1)
        source = tail_source(self.text, height * TAIL_SCREENS)
        lines = console.render_lines(AgentMarkdown(source), options, pad=False)
        for line in lines[-height:]:
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


def guess_lexer(filename: str, media_type: str, code: str) -> str:
    """A Pygments lexer name for an artifact: from its media type when it names one, else its file name."""
    extension = _MEDIA_TYPE_EXTENSIONS.get(media_type.partition(";")[0].strip().lower())
    return Syntax.guess_lexer(f"artifact{extension}" if extension else filename or "artifact.txt", code)


class MarkdownRenderer:
    """The terminal side of the chat output: one assistant message at a time, rendered."""

    def __init__(self, out: TextIO) -> None:
        self.console = Console(
            file=out, force_terminal=True, markup=False, emoji=False, highlight=False, soft_wrap=False
        )
        self._text = ""
        self._live: Live | None = None

    @property
    def active(self) -> bool:
        """True while a message is being shown and has not been settled into the scrollback."""
        return bool(self._text)

    def add(self, escaped_delta: str) -> None:
        """Append a delta (already escaped) to the message in progress and let Live show it."""
        if not escaped_delta:
            return
        self._text += escaped_delta
        if self._live is None:
            self._live = Live(
                _Tail(self._text),
                console=self.console,
                refresh_per_second=REFRESHES_PER_SECOND,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                vertical_overflow="crop",
            )
            self._live.start()
        else:
            self._live.update(_Tail(self._text))

    def settle(self) -> None:
        """Erase the live preview and print the whole message rendered once; nothing when idle."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
        text, self._text = self._text, ""
        if text.strip():
            self.console.print(AgentMarkdown(text))

    def code(self, escaped_content: str, filename: str, media_type: str) -> None:
        """An artifact's inline content as a highlighted block (plain when too large to highlight)."""
        self.settle()
        content = escaped_content.rstrip("\n")
        if len(content) > MAX_HIGHLIGHTED_CHARS:
            self.console.print(Text(content))
            return
        lexer = guess_lexer(filename, media_type, content)
        self.console.print(Syntax(content, lexer, theme=CODE_THEME, word_wrap=True, padding=0))
