"""`agui-bridge chat` output on a terminal (Markdown rendered by rich) and in a pipe (text as written),
with no server: the Printer and EventView are fed events and write to buffers."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from agui_bridge.chat import client as chat
from agui_bridge.chat.output import EventView, Printer, markdown_renderer
from agui_bridge.chat.render import MAX_RENDERED_CHARS, AgentMarkdown, _Tail, guess_lexer, tail_source
from agui_bridge.cli.command import build_parser
from agui_bridge.demo.scenarios import MARKDOWN_ANSWER, VPC_TEMPLATE, split_every

SGR = re.compile(r"\x1b\[[0-9;]*m")
#: A foreground colour: 30-37, 90-97, or 256/true colour (38;5;n, 38;2;r;g;b).
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|38;[25];[0-9;]+)(?:;[0-9;]*)?m")
#: Sequences a terminal would obey: OSC (title, hyperlinks), erase display, cursor moves, BEL, C1 CSI.
OBEYED = re.compile(r"\x1b\]|\x1b\[[0-9;]*[JHf]|\x07|\x9b|\x9d")
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m"


class TerminalBuffer(io.StringIO):
    """What chat writes to, standing in for a terminal."""

    def isatty(self) -> bool:
        return True


def terminal_view() -> tuple[EventView, TerminalBuffer]:
    out = TerminalBuffer()
    renderer = markdown_renderer(out)
    renderer.console.width = 120
    return EventView(Printer(out, io.StringIO(), color=True, markdown=renderer)), out


def pipe_view() -> tuple[EventView, io.StringIO]:
    out = io.StringIO()
    return EventView(Printer(out, io.StringIO(), color=False)), out


def stream_message(view: EventView, text: str, size: int = 7) -> None:
    for delta in split_every(text, size):
        view.event("TEXT_MESSAGE_CONTENT", {"messageId": "m", "delta": delta})
    view.event("TEXT_MESSAGE_END", {"messageId": "m"})


def final_screen(raw: str) -> str:
    """The text left in the scrollback: what follows the live preview's last erase, styles removed."""
    return SGR.sub("", raw.rpartition("\x1b[2K")[2])


def test_a_terminal_gets_the_answer_rendered_with_the_code_highlighted_and_no_fences() -> None:
    view, out = terminal_view()
    stream_message(view, MARKDOWN_ANSWER)
    screen = final_screen(out.getvalue())
    assert "```" not in screen and "**" not in screen and "|---|" not in screen
    assert re.search(r"^ROSTemplateFormatVersion: '2015-09-01'\s*$", screen, re.MULTILINE)
    assert re.search(r"^      CidrBlock: 192\.168\.0\.0/16\s*$", screen, re.MULTILINE)  # indentation kept
    assert re.search(r"^ • one VSwitch in the zone you choose", screen, re.MULTILINE)
    assert "(https://www.alibabacloud.com/help/en/ros/)" in screen
    template_line = next(line for line in out.getvalue().splitlines() if "ROSTemplateFormatVersion" in line)
    assert COLOUR.search(template_line), template_line  # coloured
    assert not view.printer.markdown or not view.printer.markdown.active


def test_a_pipe_gets_the_answer_as_the_agent_wrote_it() -> None:
    view, out = pipe_view()
    stream_message(view, MARKDOWN_ANSWER)
    assert out.getvalue() == MARKDOWN_ANSWER


def test_a_rendered_answer_shows_control_characters_markup_and_html_as_text() -> None:
    view, out = terminal_view()
    stream_message(view, f"say {HOSTILE} [bold red]loud[/bold red] :smile: <script>x()</script>\n")
    raw = out.getvalue()
    assert not OBEYED.search(raw), repr(raw)
    screen = final_screen(raw)
    assert "say \\x1b]0;owned\\x07\\x1b[2J\\x9b31m [bold red]loud[/bold red] :smile: <script>x()</script>" in screen


def test_links_are_written_out_not_hidden_behind_their_text() -> None:
    view, out = terminal_view()
    stream_message(view, "see [the docs](https://example.com/evil)\n")
    assert "\x1b]8;" not in out.getvalue()  # no OSC 8 hyperlink
    assert "the docs (https://example.com/evil)" in final_screen(out.getvalue())


def test_other_output_waits_for_the_message_in_progress_to_be_rendered() -> None:
    view, out = terminal_view()
    view.event("TEXT_MESSAGE_CONTENT", {"messageId": "m", "delta": "- first item\n"})
    view.event("TOOL_CALL_START", {"toolCallId": "c", "toolCallName": "list_files"})
    view.event("TOOL_CALL_END", {"toolCallId": "c"})
    screen = SGR.sub("", out.getvalue())
    assert screen.rindex(" • first item") < screen.index("[tool] list_files")
    assert view.printer.markdown is not None and not view.printer.markdown.active


def test_an_inline_artifact_is_highlighted_on_a_terminal_and_printed_as_written_in_a_pipe() -> None:
    artifact = {"name": "vpc.ros.yaml", "parts": [{"text": VPC_TEMPLATE, "filename": "vpc.ros.yaml"}]}
    event: dict[str, Any] = {"type": "CUSTOM", "name": "iac-code.artifact.v1", "value": artifact}
    view, out = pipe_view()
    view.event("CUSTOM", event)
    assert out.getvalue() == f"[artifact] vpc.ros.yaml\n{VPC_TEMPLATE}"
    view, terminal = terminal_view()
    view.event("CUSTOM", event)
    assert "[artifact] vpc.ros.yaml" in terminal.getvalue()
    template_line = next(line for line in terminal.getvalue().splitlines() if "ROSTemplateFormatVersion" in line)
    assert COLOUR.search(template_line), template_line


def test_inline_artifact_content_is_escaped_on_a_terminal() -> None:
    view, out = terminal_view()
    parts = [{"text": f"Key: {HOSTILE}\n", "filename": "x.yaml"}, {"data": {"k": HOSTILE}}]
    view.event("CUSTOM", {"name": "iac-code.artifact.v1", "value": {"name": "x", "parts": parts}})
    assert not OBEYED.search(out.getvalue()), repr(out.getvalue())
    assert "Key: \\x1b]0;owned\\x07" in SGR.sub("", out.getvalue())


@pytest.mark.parametrize(
    ("filename", "media_type", "lexer"),
    [
        ("vpc.ros.yaml", "", "yaml"),
        ("template", "application/yaml", "yaml"),
        ("main.tf", "", "terraform"),
        ("out.json", "", "json"),
        ("notes", "", "default"),
    ],
)
def test_guess_lexer(filename: str, media_type: str, lexer: str) -> None:
    assert guess_lexer(filename, media_type, "") == lexer


@pytest.mark.parametrize(
    ("text", "keep_lines", "keep_chars", "tail"),
    [
        ("a\nb\nc", 5, 100, "a\nb\nc"),
        ("a\nb\nc\nd", 2, 100, "c\nd"),
        ("intro\n```yaml\nk: 1\nk: 2\nk: 3", 2, 100, "```yaml\nk: 2\nk: 3"),  # the open fence's language stays
        ("```yaml\nk: 1\n```\nafter\nmore", 2, 100, "after\nmore"),  # a closed fence is not carried
        ("~~~~\nx\n~~~\ny\nz", 2, 100, "~~~~\ny\nz"),  # a shorter closer does not close
        ("    ```\nx\ny\nz", 2, 100, "y\nz"),  # indented four spaces: code, not a fence
        ("x" * 50 + "yz", 10, 2, "yz"),  # one endless line: bounded by characters
        ("```py\n" + "x" * 50 + "yz", 10, 2, "```py\nyz"),
    ],
)
def test_tail_source(text: str, keep_lines: int, keep_chars: int, tail: str) -> None:
    assert tail_source(text, keep_lines, keep_chars) == tail


def test_the_live_preview_stays_shorter_than_the_screen() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=60, height=12)
    long_answer = "\n\n".join(f"paragraph {n}" for n in range(100))
    lines = console.render_lines(_Tail([long_answer]), pad=False)
    assert len(lines) <= 11
    assert all(sum(len(segment.text) for segment in line) < 60 for line in lines)  # never at the right edge
    assert "paragraph 99" in "".join(segment.text for segment in lines[-1])


def test_agent_markdown_shows_raw_html_as_text() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    console.print(AgentMarkdown('<div onclick="x">hi</div>\n'))
    assert '<div onclick="x">hi</div>' in console.file.getvalue()  # type: ignore[attr-defined]


def client_printer(*argv: str, stdout: io.StringIO) -> Printer:
    args = build_parser().parse_args(["chat", "--url", "http://127.0.0.1:9/", "--cwd", "/tmp", *argv])
    options = chat.options_from_args(args, {})
    return chat.ChatClient(options, None, io.StringIO(), stdout, io.StringIO()).printer  # type: ignore[arg-type]


def test_only_a_terminal_without_json_gets_markdown_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    assert client_printer("hi", stdout=TerminalBuffer()).markdown is not None
    assert client_printer("hi", stdout=io.StringIO()).markdown is None
    assert client_printer("--json", "hi", stdout=TerminalBuffer()).markdown is None
    monkeypatch.setenv("TERM", "dumb")  # no cursor movement: the live preview could not be erased
    assert client_printer("hi", stdout=TerminalBuffer()).markdown is None


def test_a_paused_stream_is_not_redrawn() -> None:
    view, out = terminal_view()
    view.event("TEXT_MESSAGE_CONTENT", {"messageId": "m", "delta": "waiting for the next delta"})
    renderer = view.printer.markdown
    assert renderer is not None and renderer._live is not None
    drawn = len(out.getvalue())
    renderer._live.refresh()  # what the refresh thread does while no delta arrives
    assert len(out.getvalue()) == drawn
    view.event("TEXT_MESSAGE_CONTENT", {"messageId": "m", "delta": " and it came"})
    renderer._live.refresh()
    assert len(out.getvalue()) > drawn
    view.event("TEXT_MESSAGE_END", {"messageId": "m"})


def test_a_message_too_large_to_render_is_printed_as_written() -> None:
    view, out = terminal_view()
    huge = "**not bold** " * (MAX_RENDERED_CHARS // 13 + 1)
    stream_message(view, huge, size=4096)
    assert out.getvalue().endswith(huge + "\n")
