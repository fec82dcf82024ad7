"""The web console in headless Chromium (Selenium + the Debian chromium/chromium-driver packages) against
`agui-bridge serve` (gunicorn + gevent workers) with the demo agent and a bearer token.

Without a browser the tests skip with the reason, unless CI is truthy: then they fail, so a CI run can
never pass without them. `bash scripts/install-browser` installs the browser. Screenshots of every
step go to tests/artifacts/screenshots/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import (
    TOKEN,
    assert_no_page_errors,
    css,
    open_console,
    query_of,
    send_message,
    shoot,
    text_of,
    wait_for,
)
from tests.support.harness import BridgeServer, bridge_server, wait_for_task_state

pytestmark = pytest.mark.e2e


@pytest.fixture
def console_bridge(demo_url: str, demo_token: str, state_dir: Path, tmp_path: Path) -> Iterator[BridgeServer]:
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": TOKEN, "IAC_CODE_AGUI_CONSOLE": "1"}
    with bridge_server(demo_url, demo_token, state_dir, tmp_path, heartbeat_interval=1, env=env) as server:
        yield server


# --------------------------------------------------------------------------------------------- tests


def test_permission_flow_streams_asks_resumes_and_survives_reloads(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    open_console(driver, console_bridge, workspace)
    send_message(driver, "please write file [PAUSE 3]")

    # Text and the tool call arrive while the run is still streaming (the agent pauses before asking).
    wait_for(lambda: "I will write a file." in text_of(driver, "#transcript .msg.assistant"), what="streamed text")
    assert css(driver, "#connection")[0].get_attribute("data-state") == "streaming"
    assert css(driver, "#interrupts fieldset") == []
    tool = wait_for(lambda: css(driver, "[data-tool-call-id='call_demo_write_1']"), what="the tool card")[0]
    assert "write_file" in tool.text and "/workspace/x.yaml" in tool.text
    shoot(driver, "console-permission-1-streaming")

    # The permission form: tool, message, choices generated from the schema, expiry countdown.
    card = wait_for(lambda: css(driver, "#interrupts fieldset.interrupt"), what="the permission form")[0]
    assert card.get_attribute("data-reason") == "tool_call"
    assert "Change a workspace file" in card.text
    assert "Write /workspace/x.yaml. Allow once?" in card.text
    assert css(driver, "#interrupts dd[data-fact='tool']")[0].text == "write_file"
    assert [b.text for b in css(driver, "#interrupts button.choice")] == ["Allow once", "Deny"]
    wait_for(lambda: re.fullmatch(r"expires in \d+:\d\d", text_of(driver, "#interrupts .expiry")), what="countdown")
    assert css(driver, "#thread-status")[0].get_attribute("data-state") == "pending"
    execution_id = css(driver, "#ids dd[data-id='executionId']")[0].text
    assert execution_id
    shoot(driver, "console-permission-2-form")

    # A reload restores the thread from the query string and asks the status extension again.
    query = query_of(driver)
    assert set(query) == {"threadId", "rosInvocationId", "cwd"} and query["cwd"] == [str(workspace)]
    assert TOKEN not in driver.current_url
    driver.refresh()
    card = wait_for(lambda: css(driver, "#interrupts fieldset.interrupt"), what="the form after a reload")[0]
    assert "Write /workspace/x.yaml. Allow once?" in card.text
    assert "I will write a file." in text_of(driver, "#transcript .msg.assistant")
    assert query_of(driver) == query
    shoot(driver, "console-permission-3-reloaded-pending")

    # "Allow once" resumes: the tool result, the artifact and the final text appear.
    next(b for b in css(driver, "#interrupts button.choice") if b.text == "Allow once").click()
    wait_for(lambda: css(driver, "[data-tool-call-id='call_demo_write_1'][data-status='done']"), what="the tool result")
    assert "Successfully wrote 3 lines to /workspace/x.yaml" in text_of(driver, "[data-tool-call-id] .result")
    wait_for(lambda: "The tool ran; all done." in text_of(driver, "#transcript .msg.assistant"), what="final text")
    wait_for(lambda: css(driver, "#thread-status[data-state='idle']"), what="the idle thread status")
    artifact = css(driver, "#transcript .artifact")[0]
    assert "x.yaml" in artifact.text
    assert css(driver, ".artifact .artifact-uri")[0].text.startswith("iac-code-artifact://")
    assert "demo/demo-scripted" in text_of(driver, "#usage")
    assert css(driver, "#interrupts fieldset") == []
    assert css(driver, "#ids dd[data-id='executionId']")[0].text == execution_id
    shoot(driver, "console-permission-4-finished")

    # Another reload shows the finished thread: transcript from this tab, nothing pending on the server.
    driver.refresh()
    wait_for(lambda: css(driver, "#thread-status[data-state='idle']"), what="the finished thread after a reload")
    assert "The tool ran; all done." in text_of(driver, "#transcript .msg.assistant")
    assert "Successfully wrote 3 lines" in text_of(driver, "[data-tool-call-id] .result")
    assert css(driver, "#interrupts fieldset") == []
    assert css(driver, "#ids dd[data-id='executionId']")[0].text == execution_id
    assert driver.execute_script("return sessionStorage.getItem('agui-console:token')") == TOKEN
    shoot(driver, "console-permission-5-reloaded-finished")
    assert_no_page_errors(driver)


def test_cancel_a_slow_run_from_the_console(
    driver: Any, console_bridge: BridgeServer, workspace: Path, demo_url: str, demo_token: str
) -> None:
    open_console(driver, console_bridge, workspace)
    send_message(driver, "slow [SLOW 20]")
    wait_for(lambda: "slow chunk 1." in text_of(driver, "#transcript .msg.assistant"), what="the first chunk")
    # ': heartbeat' comments (1 s here) blink the connection indicator between chunks.
    wait_for(lambda: int(css(driver, "#connection")[0].get_attribute("data-heartbeats")) >= 1, what="a heartbeat blink")
    task_id = css(driver, "#ids dd[data-id='taskId']")[0].text
    cancel = css(driver, "#cancel")[0]
    assert cancel.is_enabled()
    shoot(driver, "console-cancel-1-streaming")
    cancel.click()
    error = wait_for(lambda: css(driver, "#transcript .run-error[data-code='CANCELLED']"), what="RUN_ERROR")[0]
    assert "CANCELLED" in error.text and "cancelled" in error.text.lower()
    assert css(driver, "#error-code")[0].text == "CANCELLED"
    wait_for(lambda: re.search(r"execution \S+: cancelled", text_of(driver, "#transcript .note")), what="cancel note")
    wait_for(lambda: css(driver, "#thread-status[data-state='idle']"), what="the idle thread status")
    assert "slow chunk 6." not in text_of(driver, "#transcript")
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    shoot(driver, "console-cancel-2-cancelled")
    assert_no_page_errors(driver)


def test_reasoning_is_collapsed_and_tools_show_progress(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    open_console(driver, console_bridge, workspace)
    send_message(driver, "think")
    wait_for(lambda: "Answer: 42." in text_of(driver, "#transcript .msg.assistant"), what="the answer")
    reasoning = css(driver, "#transcript details.reasoning")[0]
    assert reasoning.get_attribute("open") is None  # collapsed
    assert reasoning.get_attribute("textContent") == "ReasoningLet me think..."
    wait_for(lambda: css(driver, "#send")[0].is_enabled(), what="the run to end")

    send_message(driver, "list files")  # a second turn on the same thread
    tool = wait_for(lambda: css(driver, "[data-tool-call-id='call_demo_1'][data-status='done']"), what="tool")[0]
    assert "list_files" in tool.text and '"path": "."' in tool.text
    assert css(driver, "[data-tool-call-id='call_demo_1'] .progress")[0].text == "Done (100%)"
    assert "hello.txt" in css(driver, "[data-tool-call-id='call_demo_1'] .result")[0].text
    wait_for(lambda: "has 3 files." in text_of(driver, "#transcript .msg.assistant"), what="the text after the tool")
    after_tool = driver.execute_script(
        "return document.querySelector(\"[data-tool-call-id='call_demo_1']\").nextElementSibling.textContent"
    )
    assert after_tool == "The workspace has 3 files."  # the message continues below the tool card
    assert "demo/demo-scripted" in text_of(driver, "#usage")
    shoot(driver, "console-reasoning-and-tools")
    assert_no_page_errors(driver)
