"""`agui-bridge chat` end to end: `python -m agui_bridge.cli chat` in a pseudo-terminal (stdlib `pty`)
against `agui-bridge serve` (gunicorn + gevent workers) and the demo agent, with a bearer token.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.chat import CHAT_TOKEN, chat_argv, chat_env
from tests.support.harness import BridgeServer, wait_for_task_state

pytestmark = pytest.mark.e2e

ANSI = re.compile(rb"\x1b\[[0-9;]*m")


class Terminal:
    """A child process on a pseudo-terminal (stdin, stdout and stderr), read with a deadline."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = b""
        self.closed = False

    @property
    def text(self) -> str:
        return ANSI.sub(b"", self.raw).replace(b"\r\n", b"\n").decode("utf-8", "replace")

    def _read(self, timeout_s: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout_s)
        if not ready:
            return
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            self.closed = True
        self.raw += data

    def expect(self, pattern: str, timeout_s: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while True:
            match = re.search(pattern, self.text)
            if match is not None:
                return match
            if self.closed or time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not seen in:\n{self.text[-3000:]}")
            self._read(0.2)

    def send(self, text: str) -> None:
        os.write(self.master, text.encode("utf-8"))

    def wait(self, timeout_s: float = 30) -> int:
        deadline = time.monotonic() + timeout_s
        while not self.closed and time.monotonic() < deadline:
            self._read(0.2)
        code = self.process.wait(max(deadline - time.monotonic(), 1))
        os.close(self.master)
        return code


def test_question_answered_at_the_prompt(chat_bridge: BridgeServer, workspace: Path) -> None:
    terminal = Terminal(chat_argv(chat_bridge.url, workspace, "ask me a question"), chat_env())
    try:
        terminal.expect(r"I need one detail first\.")
        terminal.expect(r"\[tool\] ask_user_question")
        terminal.expect(r"\[interrupt\] Question from the agent\nWhich instance size should I use\?")
        terminal.expect(r"1\) Small \(2 vCPU\)\n  2\) Large \(8 vCPU\)\n  or type an answer \(Or type another size\)")
        terminal.expect(r"expires in \d+m\d\ds")
        terminal.expect(r"answer\[1-2\]> $")
        terminal.send("medium please\n")  # not an option: the schema's freeText branch
        terminal.expect(r"\[result\] ask_user_question: medium please")
        terminal.expect(r"You chose: medium please\.")
        assert terminal.wait() == 0
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    assert b"\x1b[" in terminal.raw  # a terminal gets ANSI styling


def test_numbered_choice_in_a_terminal(chat_bridge: BridgeServer, workspace: Path) -> None:
    terminal = Terminal(chat_argv(chat_bridge.url, workspace, "ask me a question"), chat_env())
    try:
        terminal.expect(r"answer\[1-2\]> $")
        terminal.send("2\n")
        terminal.expect(r"You chose: Large \(8 vCPU\)\.")
        assert terminal.wait() == 0
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    text = terminal.text
    assert text.index("[result] ask_user_question: Large (8 vCPU)") < text.index("You chose: Large (8 vCPU).")
    assert re.search(r"^thread [0-9a-f-]{36}$", text, re.MULTILINE)
    assert CHAT_TOKEN not in text


def test_json_lines_with_the_answer_from_stdin(chat_bridge: BridgeServer, workspace: Path) -> None:
    done = subprocess.run(
        chat_argv(chat_bridge.url, workspace, "--json", "ask me a question"),
        input="small\n",
        capture_output=True,
        text=True,
        env=chat_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout
    events = [json.loads(line) for line in done.stdout.splitlines()]
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"]
    assert len(starts) == 2  # the question run and its resume
    runs = [events[a:b] for a, b in zip(starts, [*starts[1:], len(events)], strict=True)]
    for run in runs:
        raw = "".join(f"data: {json.dumps(e, ensure_ascii=False, separators=(',', ':'))}\n\n" for e in run)
        assert_valid_agui_stream(raw.encode(), expect_terminal="RUN_FINISHED")
    assert runs[0][-1]["outcome"]["type"] == "interrupt"
    assert runs[1][-1]["outcome"] == {"type": "success"}
    assert runs[0][0]["threadId"] == runs[1][0]["threadId"]
    text = "".join(e["delta"] for e in runs[1] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "You chose: Small (2 vCPU)."
    assert "[interrupt] Question from the agent" in done.stderr and "answer[1-2]> small" in done.stderr


def test_ctrl_c_cancels_the_execution(
    chat_bridge: BridgeServer, workspace: Path, demo_url: str, demo_token: str
) -> None:
    terminal = Terminal(chat_argv(chat_bridge.url, workspace, "--json", "slow [SLOW 20]"), chat_env())
    try:
        terminal.expect(r'"delta":"slow chunk 1\. "')
        session: dict[str, Any] = next(
            json.loads(line)["value"]
            for line in terminal.text.splitlines()
            if line.startswith("{") and '"iac-code.session.v1"' in line
        )
        terminal.process.send_signal(signal.SIGINT)
        terminal.expect(r"interrupted: execution (cancelled|already_terminal)")
        assert terminal.wait() == 3
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    state = wait_for_task_state(demo_url, demo_token, session["taskId"], "TASK_STATE_CANCELED")
    assert state == "TASK_STATE_CANCELED"


def test_a_failing_turn_exits_1_and_http_errors_exit_2(chat_bridge: BridgeServer, workspace: Path) -> None:
    failing = subprocess.run(
        chat_argv(chat_bridge.url, workspace, "please fail"), capture_output=True, text=True, env=chat_env(), timeout=60
    )
    assert failing.returncode == 1
    assert "error A2A_EXECUTION_FAILED" in failing.stderr
    env = {**chat_env(), "IAC_CODE_AGUI_AUTH_TOKEN": "wrong"}
    refused = subprocess.run(
        chat_argv(chat_bridge.url, workspace, "hi"), capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode == 2
    assert "HTTP 401 UNAUTHORIZED" in refused.stderr
    assert "wrong" not in refused.stderr + refused.stdout
