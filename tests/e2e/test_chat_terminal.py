"""What `agui-bridge chat` shows a person: run in tmux (a real terminal emulator), read back with
`capture-pane -e` (colours kept), against `agui-bridge serve` with the demo agent, or against a canned
server that sends what the demo agent never would (terminal control sequences, an inline artifact).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.demo.scenarios import MARKDOWN_ANSWER, VPC_TEMPLATE
from tests.support.chat import chat_argv, chat_env
from tests.support.ci import skip_or_fail_in_ci
from tests.support.harness import REPO_ROOT, BridgeServer

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _needs_tmux() -> None:
    """tmux is the terminal these tests read (scripts/install-host-tools installs it; CI may not skip)."""
    if shutil.which("tmux") is None:
        skip_or_fail_in_ci("tmux is not installed (run: bash scripts/install-host-tools)")


SGR = re.compile(r"\x1b\[[0-9;]*m")
#: A foreground colour: 30-37, 90-97, or 256/true colour (38;5;n, 38;2;r;g;b).
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|38;[25];[0-9;]+)(?:;[0-9;]*)?m")
GOLDEN_JSON_LINES = REPO_ROOT / "tests" / "fixtures" / "chat" / "canned-run.jsonl"

#: What a hostile or broken server may put in a delta: set the window title, clear the screen.
TITLE_SEQUENCE = "\x1b]0;pwned\x07"
CLEAR_SEQUENCE = "\x1b[2J"

CANNED_RUN: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "thread-canned", "runId": "run-canned"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "First line, kept on screen.\n\n"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"title {TITLE_SEQUENCE} then "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"clear {CLEAR_SEQUENCE} and [red]markup[/red]"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": ' :smile: <b>html</b>\n\n```json\n{"a": 1}\n```\n'},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write_file"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"path": "/w/x.yaml"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {
        "type": "CUSTOM",
        "name": "iac-code.artifact.v1",
        "value": {
            "schemaVersion": 1,
            "name": "x.yaml",
            "parts": [{"text": f"Key: {TITLE_SEQUENCE}value\nOther: 2\n", "filename": "x.yaml"}],
        },
    },
    {"type": "RUN_FINISHED", "threadId": "thread-canned", "runId": "run-canned", "outcome": {"type": "success"}},
]


class _CannedRunHandler(BaseHTTPRequestHandler):
    """Answers every POST with CANNED_RUN as one numbered SSE stream."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = "".join(f"id: {n}\ndata: {json.dumps(e)}\n\n" for n, e in enumerate(CANNED_RUN, 1)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def canned_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CannedRunHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class TmuxPane:
    """One command in a detached tmux session of its own server; the pane stays readable after it exits."""

    def __init__(self, tmp_path: Path, argv: list[str], env: dict[str, str]) -> None:
        self.socket = str(tmp_path / "tmux.sock")
        self.status_file = tmp_path / "chat.status"
        self.exited = threading.Event()
        conf = tmp_path / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\nset -g history-limit 10000\n")
        self.env = {**env, "TERM": "xterm-256color"}
        # the pane's shell records the exit status, signals the channel the test waits on, and keeps the pane
        # alive (a dead pane reports no cursor state) until close() ends the server
        status = shlex.quote(str(self.status_file))
        script = f"{shlex.join(argv)}; echo $? > {status}; tmux wait-for -S chat-done; tmux wait-for chat-release"
        self.tmux("-f", str(conf), "new-session", "-d", "-s", "chat", "-x", "100", "-y", "50", script)

    def tmux(self, *args: str, timeout_s: float = 30) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout_s,
            check=True,
        )
        return done.stdout

    def wait_exit(self, timeout_s: float = 60) -> int:
        self.tmux("wait-for", "chat-done", timeout_s=timeout_s)
        self.exited.set()
        return int(self.status_file.read_text())

    def capture(self) -> str:
        """The pane and its history, with SGR colour sequences (`-e`)."""
        return self.tmux("capture-pane", "-p", "-e", "-S", "-", "-t", "chat")

    def expect(self, pattern: str, timeout_s: float = 30) -> str:
        """The pane's text (styles removed) once `pattern` shows on it; AssertionError after the deadline."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = SGR.sub("", self.capture())
            if re.search(pattern, text, re.MULTILINE):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not on the pane:\n{text[-3000:]}")
            self.exited.wait(0.2)  # set only by wait_exit: a bounded pause between two looks

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def cursor_visible(self) -> bool:
        return self.tmux("display-message", "-p", "-t", "chat", "#{cursor_flag}").strip() == "1"

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "chat", "#{pane_title}").strip()

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30, check=False)


@contextmanager
def tmux_pane(tmp_path: Path, argv: list[str]) -> Iterator[TmuxPane]:
    pane = TmuxPane(tmp_path, argv, chat_env())
    try:
        yield pane
    finally:
        pane.close()


def test_a_template_answer_is_rendered_with_its_code_highlighted_in_a_terminal(
    chat_bridge: BridgeServer, workspace: Path, tmp_path: Path
) -> None:
    with tmux_pane(tmp_path, chat_argv(chat_bridge.url, workspace, "show a markdown answer")) as pane:
        assert pane.wait_exit() == 0
        screen = pane.capture()
    text = SGR.sub("", screen)
    assert "```" not in text  # the fences are gone: the block is drawn instead
    assert "**" not in text and "| Resource |" not in text  # bold and the table are rendered, not raw
    assert re.search(r"^ROSTemplateFormatVersion: '2015-09-01'\s*$", text, re.MULTILINE)  # copyable: no indent
    assert re.search(r"^  Vpc:\s*$", text, re.MULTILINE)  # the template keeps its own indentation
    assert re.search(r"^ • one VPC \(192\.168\.0\.0/16\)", text, re.MULTILINE)  # a list
    assert re.search(r"Vpc\s+.\s*ALIYUN::ECS::VPC\s+.\s*192\.168\.0\.0/16", text)  # a table row
    assert "(https://www.alibabacloud.com/help/en/ros/)" in text  # a link shows where it goes
    assert "[artifact] vpc.ros.yaml" in text
    template_line = next(line for line in screen.splitlines() if "ROSTemplateFormatVersion" in line)
    assert COLOUR.search(template_line), template_line  # highlighted
    assert text.count("ROSTemplateFormatVersion") == 2  # the answer's block and the inline artifact


def test_piped_output_is_the_agents_markdown_as_written(chat_bridge: BridgeServer, workspace: Path) -> None:
    done = subprocess.run(
        chat_argv(chat_bridge.url, workspace, "show a markdown answer"),
        capture_output=True,
        text=True,
        env=chat_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    assert done.stdout.startswith(MARKDOWN_ANSWER)
    assert f"[artifact] vpc.ros.yaml\n{VPC_TEMPLATE}" in done.stdout


def test_json_lines_are_the_events_byte_for_byte(tmp_path: Path) -> None:
    with canned_server() as url:
        done = subprocess.run(
            chat_argv(url, tmp_path, "--json", "hi"), capture_output=True, env=chat_env(), timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == GOLDEN_JSON_LINES.read_bytes()  # recorded from chat before it rendered Markdown


def test_json_lines_in_a_terminal_are_not_rendered(tmp_path: Path) -> None:
    with canned_server() as url, tmux_pane(tmp_path, chat_argv(url, tmp_path, "--json", "hi")) as pane:
        assert pane.wait_exit() == 0
        screen = pane.capture()
    assert '"delta":"First line, kept on screen.\\n\\n"' in screen
    assert "```json" in screen  # the JSON is printed as sent, its Markdown untouched


def test_control_sequences_from_the_server_are_shown_not_obeyed(tmp_path: Path) -> None:
    with canned_server() as url, tmux_pane(tmp_path, chat_argv(url, tmp_path, "hi")) as pane:
        assert pane.wait_exit() == 0
        screen = pane.capture()
        title = pane.title()
    assert "pwned" not in title
    text = SGR.sub("", screen)
    assert "First line, kept on screen." in text  # the clear-screen sequence did not clear it
    # Escaped, and neither markup nor emoji codes interpreted (compared across the terminal's line wrapping).
    shown = " ".join(text.split())
    assert "title \\x1b]0;pwned\\x07 then clear \\x1b[2J and [red]markup[/red] :smile: <b>html</b>" in shown
    assert "Key: \\x1b]0;pwned\\x07value" in text  # the artifact's content too
    assert "[tool] write_file" in text


def test_a_question_is_asked_below_the_rendered_text_and_answered_at_the_prompt(
    chat_bridge: BridgeServer, workspace: Path, tmp_path: Path
) -> None:
    with tmux_pane(tmp_path, chat_argv(chat_bridge.url, workspace, "ask me a question")) as pane:
        pane.expect(r"^answer\[1-2\]>\s*$")
        pane.keys("2", "Enter")
        assert pane.wait_exit() == 0
        text = SGR.sub("", pane.capture())
    assert text.index("I need one detail first.") < text.index("[interrupt] Question from the agent")
    assert re.search(r"^  1\) Small \(2 vCPU\)\n  2\) Large \(8 vCPU\)$", text, re.MULTILINE)
    assert text.index("answer[1-2]> 2") < text.index("You chose: Large (8 vCPU).")
    assert text.count("I need one detail first.") == 1  # the live preview left nothing behind


def test_ctrl_c_while_a_message_streams_leaves_it_rendered_and_the_cursor_visible(
    chat_bridge: BridgeServer, workspace: Path, tmp_path: Path
) -> None:
    with tmux_pane(tmp_path, chat_argv(chat_bridge.url, workspace, "slow [SLOW 20]")) as pane:
        pane.expect(r"slow chunk 1\.")
        pane.keys("C-c")
        assert pane.wait_exit() == 3
        text = SGR.sub("", pane.capture())
        cursor = pane.cursor_visible()
    assert cursor
    assert re.search(r"^slow chunk 1\.", text, re.MULTILINE)
    assert text.index("slow chunk 1.") < text.index("interrupted: execution")
