"""The reattach clients against a stand-in for the server's contract (tests/support/fake_reattach_bridge.py):
the first connection of a run breaks mid-run, the replay starts before the client's cursor. The web
console in headless Chromium, the README's JavaScript example with the @ag-ui/client verifier, and
`agui-bridge chat` must each show the whole run once, ending with its terminal event.

These run whatever the state of the server side; tests/e2e/test_reattach_clients.py and
test_console_reattach.py do the same against the real bridge.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import css, shoot, text_of, wait_for
from tests.support.fake_reattach_bridge import CHUNKS, fake_reattach_bridge, slow_run
from tests.support.harness import REPO_ROOT

pytestmark = pytest.mark.e2e

EXAMPLE = REPO_ROOT / "tests" / "conformance" / "reattach_example.mjs"
ASSISTANT_TEXT = "return [...document.querySelectorAll('#transcript .msg.assistant')].map(n => n.textContent).join(' ')"
#: The message's words in order: the console renders Markdown, which drops a paragraph's trailing space.
WHOLE_MESSAGE = "".join(CHUNKS).split()


def test_console_reattaches_after_a_network_error(driver: Any, tmp_path: Path) -> None:
    with fake_reattach_bridge() as (url, fake):
        driver.get(f"{url}console?cwd={tmp_path}")
        wait_for(lambda: css(driver, "#thread-status[data-state='new']"), what="the console to load")
        css(driver, "#token")[0].send_keys("fake-token")
        css(driver, "#message")[0].send_keys("slow")
        css(driver, "#send")[0].click()
        wait_for(lambda: "run finished" in text_of(driver, "#transcript .note"), what="the terminal event")
        text = str(driver.execute_script(ASSISTANT_TEXT))
        assert text.split() == WHOLE_MESSAGE  # the whole message, in order, nothing twice
        assert text_of(driver, "#transcript .note").count("run finished") == 1
        assert css(driver, "#error")[0].is_displayed() is False
        wait_for(lambda: css(driver, "#connection[data-state='idle']"), what="the stream to close")
        [get] = fake.gets
        assert get["last"] == "5" and get["ros"] and get["ros"].startswith("console-")
        assert get["in"] == "header"  # the run's credential stays out of the URL
        shoot(driver, "console-reattach-after-network-error")


def test_console_reattaches_after_a_reload(driver: Any, tmp_path: Path) -> None:
    with fake_reattach_bridge() as (url, fake):
        fake.posts, fake.pace_s = 1, 0.4  # the POST is not broken: the reload cuts it
        driver.get(f"{url}console?cwd={tmp_path}")
        wait_for(lambda: css(driver, "#thread-status[data-state='new']"), what="the console to load")
        css(driver, "#message")[0].send_keys("slow")
        css(driver, "#send")[0].click()
        wait_for(lambda: CHUNKS[1].strip() in str(driver.execute_script(ASSISTANT_TEXT)), what="the second chunk")
        driver.refresh()
        wait_for(lambda: "reattaching to run" in text_of(driver, "#transcript .note"), what="the reattach note")
        wait_for(lambda: css(driver, "#connection[data-state='idle']"), what="the stream to close")
        assert str(driver.execute_script(ASSISTANT_TEXT)).split() == WHOLE_MESSAGE
        assert text_of(driver, "#transcript .note").count("run finished") == 1
        assert css(driver, "#transcript .msg.user")[0].text == "slow"
        [get] = fake.gets
        assert get["last"] is not None and int(get["last"]) >= 5
        driver.refresh()  # after the end: the transcript comes back, no reattach
        wait_for(lambda: "run finished" in text_of(driver, "#transcript .note"), what="the restored transcript")
        assert str(driver.execute_script(ASSISTANT_TEXT)).split() == WHOLE_MESSAGE
        assert len(fake.gets) == 1


def test_the_javascript_example_reattaches_and_the_verifier_accepts(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not (EXAMPLE.parent / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("node or tests/conformance/node_modules is missing (npm ci --prefix tests/conformance)")
    with fake_reattach_bridge() as (url, fake):
        fake.posts = 1  # no server-side break: the example cuts the connection itself
        argv = [node, str(EXAMPLE), "--url", url, "--token", "t", "--cwd", str(tmp_path), "--message", "slow"]
        done = subprocess.run([*argv, "--cut-after", "4"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["lastIdAtCut"] >= 4
    assert result["ids"] == list(range(1, 12))
    run = result["events"][0]
    assert result["events"] == slow_run(run["threadId"], run["runId"])
    assert fake.gets[0]["last"] == str(result["lastIdAtCut"])


def test_chat_reattaches_after_a_network_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with fake_reattach_bridge() as (url, fake):
        argv = [sys.executable, "-m", "agui_bridge.cli", "chat", "--url", url, "--cwd", str(tmp_path), "--json", "slow"]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    run = events[0]
    assert events == slow_run(run["threadId"], run["runId"])
    assert "reattaching to run" in done.stderr and fake.gets[0]["last"] == "5"
