"""The web console reattaches to a live run: in headless Chromium against `agui-bridge serve`
(gunicorn + gevent workers) and the demo agent, a reload in the middle of a slow run continues the
transcript where it was, with nothing shown twice, up to the run's terminal event.

Skips with the reason when the bridge does not advertise reattach (tests/support/reattach_probe.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import (
    TOKEN,
    assert_no_page_errors,
    css,
    open_console,
    send_message,
    shoot,
    text_of,
    wait_for,
)
from tests.support.harness import BridgeServer, bridge_server
from tests.support.reattach_probe import require_reattach

CHUNKS = [f"slow chunk {n}." for n in range(1, 7)]


@pytest.fixture
def console_bridge(demo_url: str, demo_token: str, state_dir: Path, tmp_path: Path) -> Iterator[BridgeServer]:
    """The console's bridge with a reattach window: a reload leaves the run going for 30 s."""
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": TOKEN, "IAC_CODE_AGUI_CONSOLE": "1"}
    options = {"heartbeat_interval": 1, "reattach_window": 30, "env": env}
    with bridge_server(demo_url, demo_token, state_dir, tmp_path, **options) as server:
        yield server


def assistant_text(driver: Any) -> str:
    return str(
        driver.execute_script(
            "return [...document.querySelectorAll('#transcript .msg.assistant')].map(n => n.textContent).join('')"
        )
    )


def test_a_reload_during_a_slow_run_reattaches_and_continues_without_duplicates(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    require_reattach(console_bridge.url, TOKEN)
    open_console(driver, console_bridge, workspace)
    send_message(driver, "slow [SLOW 8]")
    wait_for(lambda: "slow chunk 2." in assistant_text(driver), what="the second chunk")
    run = json.loads(driver.execute_script("return JSON.stringify(sessionStorage)"))
    cursor = next(json.loads(v) for k, v in run.items() if k.startswith("agui-console:run:"))
    assert cursor["lastId"] > 1 and not cursor["ended"]
    shoot(driver, "console-reattach-1-before-reload")

    driver.refresh()  # the fetch dies with the page; the bridge keeps the run for its reattach window
    wait_for(
        lambda: "reattaching to run" in text_of(driver, "#transcript .note"), what="the reattach note", timeout_s=10
    )
    wait_for(lambda: "run finished" in text_of(driver, "#transcript .note"), what="the terminal event", timeout_s=30)
    text = assistant_text(driver)
    for chunk in CHUNKS:
        assert text.count(chunk) == 1, text
    assert text.index(CHUNKS[0]) < text.index(CHUNKS[-1])
    assert text_of(driver, "#transcript .note").count("run finished") == 1
    assert css(driver, "#transcript .msg.user")[0].text == "slow [SLOW 8]"
    wait_for(lambda: css(driver, "#thread-status[data-state='idle']"), what="the idle thread status")
    assert css(driver, "#error")[0].is_displayed() is False
    stored = json.loads(driver.execute_script("return JSON.stringify(sessionStorage)"))
    cursor = next(json.loads(v) for k, v in stored.items() if k.startswith("agui-console:run:"))
    assert cursor["ended"] is True
    shoot(driver, "console-reattach-2-finished")

    # A reload after the end replays the transcript from this tab and does not reattach again.
    driver.refresh()
    wait_for(lambda: css(driver, "#thread-status[data-state='idle']"), what="the idle thread after the end")
    assert "reattaching to run" not in text_of(driver, "#transcript .note")
    assert assistant_text(driver).count(CHUNKS[-1]) == 1
    assert_no_page_errors(driver)


def test_a_reload_before_the_interrupt_reattaches_and_the_form_appears(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    require_reattach(console_bridge.url, TOKEN)
    open_console(driver, console_bridge, workspace)
    send_message(driver, "please write file [PAUSE 4]")
    wait_for(lambda: css(driver, "[data-tool-call-id='call_demo_write_1']"), what="the tool card")
    assert css(driver, "#interrupts fieldset") == []
    driver.refresh()  # before the agent asks: the run goes on without a reader
    wait_for(lambda: "reattaching to run" in text_of(driver, "#transcript .note"), what="the reattach note")
    card = wait_for(lambda: css(driver, "#interrupts fieldset.interrupt"), what="the permission form", timeout_s=30)[0]
    assert "Write /workspace/x.yaml. Allow once?" in card.text
    assert assistant_text(driver).count("I will write a file.") == 1
    assert len(css(driver, "[data-tool-call-id='call_demo_write_1']")) == 1
    shoot(driver, "console-reattach-3-form-after-reload")

    next(b for b in css(driver, "#interrupts button.choice") if b.text == "Allow once").click()
    wait_for(lambda: "The tool ran; all done." in assistant_text(driver), what="the text after the tool")
    wait_for(lambda: css(driver, "#thread-status[data-state='idle']"), what="the idle thread status")
    assert "Successfully wrote 3 lines" in text_of(driver, "[data-tool-call-id] .result")
    assert_no_page_errors(driver)
