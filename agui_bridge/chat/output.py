"""Human output of `agui-bridge chat`: text as it arrives, compact lines for everything else.

ANSI styles only on a tty. On a tty the assistant's Markdown is rendered (`chat/render.py`, which imports
`rich` and so is imported only then); piped, the text is printed as the agent wrote it. The view keeps
the little state a terminal needs (tool names and argument deltas by call id) and never prints a token
or anything the stream did not carry. Everything the network sent passes `escape_terminal` at the
Printer, the one output boundary: a server cannot set the window title, clear the screen or move the
cursor of the terminal `chat` runs in.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from agui_bridge.chat.sse import one_line
from agui_bridge.protocol.control import TERMINAL_CONTROL, escape_matches

if TYPE_CHECKING:
    from agui_bridge.chat.render import MarkdownRenderer

PREVIEW_CHARS = 240

DIM, BOLD, RED, GREEN, YELLOW, CYAN, RESET = "2", "1", "31", "32", "33", "36", "0"


def escape_terminal(text: str) -> str:
    """Network text made inert for a terminal: each control character becomes its visible escape (`ESC` is
    the four characters `\\x1b`); line feed and tab stay, as the text's own layout, and a CRLF line end
    is a line feed."""
    return escape_matches(TERMINAL_CONTROL, text.replace("\r\n", "\n"))


def _one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    return one_line(text, limit)


def _compact_json(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return raw


def markdown_renderer(out: TextIO) -> MarkdownRenderer:
    """The rendered view of assistant messages, for a terminal (imports `rich`)."""
    from agui_bridge.chat.render import MarkdownRenderer

    return MarkdownRenderer(out)


class Printer:
    """Human output: text as it arrives, compact lines for everything else, ANSI only on a tty.

    With `markdown` (a terminal), assistant text goes to the renderer, and any other output first settles
    the message in progress, so nothing is ever printed into the renderer's live region."""

    def __init__(self, out: TextIO, err: TextIO, *, color: bool, markdown: MarkdownRenderer | None = None) -> None:
        self.out = out
        self.err = err
        self.color = color
        self.markdown = markdown
        self._at_line_start = True

    def style(self, text: str, *codes: str) -> str:
        if not self.color or not codes:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[{RESET}m"

    def settle(self) -> None:
        """Finish showing the assistant message in progress (a no-op without a renderer)."""
        if self.markdown is not None and self.markdown.active:
            self.markdown.settle()
            self._at_line_start = True

    def message_text(self, delta: str) -> None:
        """A delta of the assistant's message: rendered as Markdown on a terminal, else printed as it is."""
        if self.markdown is None:
            self.write(delta)
        else:
            self.markdown.add(escape_terminal(delta))

    def end_message(self) -> None:
        self.settle()
        self.end_line()

    def code(self, content: str, filename: str, media_type: str) -> None:
        """A block of code (an artifact's content): highlighted on a terminal, else printed as it is."""
        if self.markdown is None:
            self.end_line()
            self.write(content)
            self.end_line()
        else:
            self.settle()
            self.markdown.code(escape_terminal(content), filename, media_type)

    def write(self, text: str, *codes: str) -> None:
        if not text:
            return
        self.settle()
        self.out.write(self.style(escape_terminal(text), *codes))
        self.out.flush()
        self._at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        self.settle()
        if not self._at_line_start:
            self.write("\n")

    def line(self, text: str, *codes: str) -> None:
        self.end_line()
        self.write(text + "\n", *codes)

    def error(self, text: str, *codes: str) -> None:
        self.end_line()
        self.err.write(self.style(escape_terminal(text), *codes) + "\n")
        self.err.flush()


class EventView:
    """Renders AG-UI events (other than the terminal ones) through a Printer."""

    def __init__(self, printer: Printer) -> None:
        self.printer = printer
        self._tool_names: dict[str, str] = {}
        self._tool_args: dict[str, str] = {}

    def usage(self, usage: object) -> None:
        if not isinstance(usage, list):
            return
        for entry in usage:
            if isinstance(entry, dict):
                model = "/".join(str(entry[k]) for k in ("provider", "model") if entry.get(k)) or "usage"
                counts = f"in {entry.get('inputTokens', 0)} out {entry.get('outputTokens', 0)}"
                self.printer.line(f"[usage] {model}: {counts} total {entry.get('totalTokens', 0)}", DIM)

    def event(self, kind: str, event: dict[str, Any]) -> None:
        p = self.printer
        match kind:
            case "TEXT_MESSAGE_CONTENT":
                p.message_text(str(event.get("delta", "")))
            case "TEXT_MESSAGE_END":
                p.end_message()
            case "REASONING_MESSAGE_START":
                p.end_line()
                p.write("[reasoning] ", DIM)
            case "REASONING_MESSAGE_CONTENT":
                p.write(str(event.get("delta", "")), DIM)
            case "REASONING_MESSAGE_END":
                p.end_line()
            case "TOOL_CALL_START":
                call_id = str(event.get("toolCallId", ""))
                self._tool_names[call_id] = str(event.get("toolCallName") or "tool")
                self._tool_args[call_id] = ""
            case "TOOL_CALL_ARGS":
                call_id = str(event.get("toolCallId", ""))
                self._tool_args[call_id] = self._tool_args.get(call_id, "") + str(event.get("delta", ""))
            case "TOOL_CALL_END":
                call_id = str(event.get("toolCallId", ""))
                name = self._tool_names.get(call_id, "tool")
                args = _one_line(_compact_json(self._tool_args.get(call_id, "")))
                p.line(f"[tool] {name} {args}".rstrip(), CYAN)
            case "TOOL_CALL_RESULT":
                call_id = str(event.get("toolCallId", ""))
                name = self._tool_names.get(call_id, "tool")
                p.line(f"[result] {name}: {_one_line(str(event.get('content', '')))}", CYAN)
            case "STEP_STARTED":
                p.line(f"[step] {event.get('stepName', '')} started", YELLOW)
            case "STEP_FINISHED":
                p.line(f"[step] {event.get('stepName', '')} finished", YELLOW)
            case "CUSTOM":
                self._custom(str(event.get("name", "")), event.get("value"))
            case _:
                pass

    def _custom(self, name: str, value: object) -> None:
        if not isinstance(value, dict):
            return
        if name == "iac-code.artifact.v1":
            parts = value.get("parts") or []
            links = [str(part["url"]) for part in parts if isinstance(part, dict) and part.get("url")]
            self.printer.line(f"[artifact] {value.get('name', 'artifact')} {' '.join(links)}".rstrip(), GREEN)
            for part in parts:
                self._inline_content(part, str(value.get("name") or ""))
        elif name == "iac-code.tool-progress.v1":
            progress = value.get("mcpProgress", value.get("status", ""))
            text = progress if isinstance(progress, str) else json.dumps(progress, ensure_ascii=False)
            self.printer.line(f"[progress] {value.get('name', 'tool')}: {_one_line(text)}", DIM)
        elif name == "iac-code.pipeline.v1":
            self.printer.line(f"[pipeline] {value.get('eventType', 'event')}", DIM)

    def _inline_content(self, part: object, artifact_name: str) -> None:
        """An artifact part that carries its content (`text`, or JSON `data`) is shown as code."""
        if not isinstance(part, dict):
            return
        filename = str(part.get("filename") or artifact_name)
        media_type = str(part.get("mediaType") or "")
        if isinstance(part.get("text"), str) and part["text"]:
            self.printer.code(part["text"], filename, media_type)
        elif part.get("data") is not None:
            self.printer.code(json.dumps(part["data"], ensure_ascii=False, indent=2), "data.json", "application/json")
