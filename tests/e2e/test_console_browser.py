"""The web console in headless Chromium (Selenium + the Debian chromium/chromium-driver packages) against
`agui-bridge serve` (gunicorn + gevent workers) with the demo agent and a bearer token.

Without a browser the tests skip with the reason, unless CI is truthy: then they fail, so a CI run can
never pass without them. `bash scripts/install-browser` installs the browser. Screenshots of every
step go to tests/artifacts/screenshots/.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.demo.scenarios import MARKDOWN_ANSWER, VPC_TEMPLATE
from agui_bridge.web.console_api import CONTENT_SECURITY_POLICY
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


# --------------------------------------------------------------------------------------------- helpers


def send_text(driver: Any, text: str) -> None:
    """Sends `text` as typed into the composer, newlines and all (send_keys would take a key per character)."""
    driver.execute_script("document.getElementById('message').value = arguments[0]", text)
    css(driver, "#send")[0].click()


def final_answer(driver: Any, timeout_s: float = 30) -> Any:
    """The last assistant bubble once its final rendering (at TEXT_MESSAGE_END) is in the page."""
    try:
        wait_for(lambda: css(driver, "#send")[0].is_enabled(), timeout_s, what="the run to end")
        final = "#transcript .msg.assistant .body[data-rendered='final']"
        return wait_for(lambda: css(driver, final)[-1:], timeout_s, "final render")[0]
    except AssertionError as failure:
        raise AssertionError(f"{failure}; browser log: {driver.get_log('browser')}") from None


def run_js(driver: Any, script: str, *args: Any) -> Any:
    """Runs an async `script` (its last argument is the callback) and returns what it passes back."""
    return driver.execute_async_script(script, *args)


RENDER_WHOLE = (
    "const [text, , done] = arguments; import(new URL('console/static/markdown.js', document.baseURI).href)"
    ".then((m) => { const d = document.createElement('div'); d.append(m.renderMarkdown(text)); done(d.innerHTML); },"
    " (e) => done(`ERR ${e}`));"
)
#: Records the type of every Blob the console makes a URL for (the page's CSP does not let it fetch blob: URLs).
RECORD_BLOB_TYPES = (
    "window.blobTypes = []; const make = URL.createObjectURL;"
    " URL.createObjectURL = (blob) => { window.blobTypes.push(blob.type); return make(blob); };"
)
READ_CLIPBOARD = (
    "const done = arguments[arguments.length - 1]; navigator.clipboard.readText().then(done, (e) => done(`ERR ${e}`));"
)


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


def test_a_markdown_answer_renders_as_html_with_a_highlighted_copyable_template(
    driver: Any, console_bridge: BridgeServer, workspace: Path, tmp_path: Path
) -> None:
    open_console(driver, console_bridge, workspace)
    driver.execute_script(RECORD_BLOB_TYPES)
    driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": console_bridge.url.rstrip("/"), "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    send_message(driver, "[markdown]")
    answer = final_answer(driver)

    # The Markdown is HTML: a yaml code block, a list, a table, inline code and a web link; no fences left.
    code = css(driver, "#transcript .msg.assistant pre > code")[0]
    assert "language-yaml" in code.get_attribute("class").split()
    assert code.get_attribute("textContent") == VPC_TEMPLATE
    assert css(driver, "#transcript .msg.assistant pre > code.language-yaml span[class^='hljs-']")  # highlighted
    assert "monospace" in driver.execute_script("return getComputedStyle(arguments[0]).fontFamily", code)
    assert [li.text for li in css(driver, "#transcript .msg.assistant ul > li")][:2] == [
        "one VPC (192.168.0.0/16)",
        "one VSwitch in the zone you choose",
    ]
    assert [th.text for th in css(driver, "#transcript .msg.assistant table th")] == ["Resource", "Type", "CIDR"]
    assert css(driver, "#transcript .msg.assistant table td.align-right")  # column alignment as a class
    assert "ALIYUN::ECS::VPC" in [c.text for c in css(driver, "#transcript .msg.assistant td > code")]
    link = css(driver, "#transcript .msg.assistant a[href]")[0]
    assert link.get_attribute("href") == "https://www.alibabacloud.com/help/en/ros/"
    assert link.get_attribute("rel") == "noopener noreferrer" and link.get_attribute("target") == "_blank"
    assert "```" not in answer.text and "**" not in answer.text
    # Rendered while streaming (finished blocks once, the tail again), it is what the whole text renders to.
    assert run_js(driver, RENDER_WHOLE, MARKDOWN_ANSWER, answer) == answer.get_attribute("innerHTML")

    # The copy button puts the exact template on the clipboard.
    copy = css(driver, "#transcript .msg.assistant .code-block button.copy")[0]
    copy.click()
    wait_for(lambda: copy.get_attribute("data-copied") == "ok", what="the copy to succeed")
    assert run_js(driver, READ_CLIPBOARD) == VPC_TEMPLATE

    # The inline artifact: the same template, highlighted, with copy and a download of the exact content.
    artifact = css(driver, "#transcript .artifact .code-block")[0]
    assert artifact.find_element("css selector", ".code-lang").text == "yaml"
    artifact_code = artifact.find_element("css selector", "pre > code.language-yaml")
    assert artifact_code.get_attribute("textContent") == VPC_TEMPLATE
    download = artifact.find_element("css selector", "a.download")
    assert download.get_attribute("download") == "vpc.ros.yaml"
    assert download.get_attribute("href").startswith("blob:")
    # An artifact's download link never carries its media type: a blob: URL is the console's origin, so agent
    # text/html or SVG opened from it would run there.
    assert driver.execute_script("return window.blobTypes") == ["application/octet-stream"]
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    download.click()
    saved = downloads / "vpc.ros.yaml"
    wait_for(lambda: saved.is_file() and saved.read_text(encoding="utf-8") == VPC_TEMPLATE, what="the download")
    driver.execute_script("navigator.clipboard.writeText('')")
    artifact.find_element("css selector", "button.copy").click()
    wait_for(lambda: run_js(driver, READ_CLIPBOARD) == VPC_TEMPLATE, what="the artifact on the clipboard")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", css(driver, "#transcript .msg.assistant")[0])
    shoot(driver, "console-template-answer")

    # A reload renders the same answer from this tab's transcript.
    driver.refresh()
    rendered = "#transcript .msg.assistant .body[data-rendered='final'] pre > code.language-yaml"
    wait_for(lambda: css(driver, rendered), what="the answer rendered again after a reload")
    assert css(driver, "#transcript .msg.assistant pre > code")[0].get_attribute("textContent") == VPC_TEMPLATE
    assert_no_page_errors(driver)


XSS_ANSWER = """Hello <script>window.__xss = 1</script> <img src="x" onerror="window.__xss = 2">

[a js link](javascript:window.__xss=3) [a data link](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3M9NDwvc2NyaXB0Pg==)
![a pixel](data:image/png;base64,iVBORw0KGgo=) <a href="javascript:window.__xss=5">raw link</a>
<svg onload="window.__xss = 6"></svg><iframe src="javascript:window.__xss=7"></iframe><style>body{display:none}</style>
<details open ontoggle="window.__xss = 8">x</details>
<form action="javascript:window.__xss=9"><button>go</button></form>

```html
<script>window.__xss = 10</script><img src=x onerror="window.__xss = 11">
```

[a web link](https://example.com/safe)
"""

FORBIDDEN_IN_TRANSCRIPT = "script, img, svg, iframe, style, object, embed, form, button:not(.copy), details"


def test_agent_html_and_script_urls_never_run_or_reach_the_dom(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    with urllib.request.urlopen(f"{console_bridge.url}console", timeout=10) as page:
        assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY and "unsafe-eval" not in CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    open_console(driver, console_bridge, workspace)
    send_text(driver, "[echo] " + XSS_ANSWER)
    answer = final_answer(driver)
    for link in css(driver, "#transcript .msg.assistant a:not([href])"):
        link.click()  # nothing to follow
    assert driver.execute_script("return window.__xss") is None
    assert css(driver, f"#transcript .msg.assistant :is({FORBIDDEN_IN_TRANSCRIPT})") == []
    attributes = driver.execute_script(
        "return [...document.querySelectorAll('#transcript *')].flatMap((n) => [...n.attributes]"
        ".map((a) => `${a.name}=${a.value}`))"
    )
    assert [a for a in attributes if a.startswith("on") or re.search(r"=\s*(javascript|data):", a, re.I)] == []
    assert [a.get_attribute("href") for a in css(driver, "#transcript .msg.assistant a[href]")] == [
        "https://example.com/safe"
    ]
    # What was markup is shown as text: in the paragraphs, and verbatim in the code block.
    assert "<script>window.__xss = 1</script>" in answer.text
    code = css(driver, "#transcript .msg.assistant pre > code")[0]
    assert code.get_attribute("textContent") == (
        '<script>window.__xss = 10</script><img src=x onerror="window.__xss = 11">\n'
    )
    assert "a js link" in answer.text and "a pixel" in answer.text
    assert run_js(driver, RENDER_WHOLE, XSS_ANSWER, answer) == answer.get_attribute("innerHTML")
    assert driver.execute_script("return window.__xss") is None
    shoot(driver, "console-xss-shown-as-text")
    assert_no_page_errors(driver)


#: Installs an input listener noting, per keystroke, that the answer was still being rendered as it streamed and
#: the run was still going (Send stays disabled while it runs).
STREAMING_WHEN_TYPED = """
window.__streamingWhenTyped = [];
document.querySelector('#message').addEventListener('input', () => {
  const streaming = document.querySelector("#transcript .msg.assistant .body[data-rendered='streaming']") !== null;
  window.__streamingWhenTyped.push(streaming && document.querySelector('#send').disabled);
});
"""


def test_a_20000_delta_answer_renders_completely_while_the_page_stays_responsive(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    open_console(driver, console_bridge, workspace)
    send_message(driver, "[LONG 20000]")
    wait_for(lambda: css(driver, "#transcript .msg.assistant .body[data-rendered='streaming']"), 60, "first rendering")
    # While it streams the page takes input (the bench measures how long it all takes: bench/console_render.py).
    # WebDriver queues keys until the page's main thread is free, so the value alone would also come after a page
    # that froze until the end: each keystroke records whether the answer was still streaming when it landed.
    driver.execute_script(STREAMING_WHEN_TYPED)
    composer = css(driver, "#message")[0]
    composer.send_keys("typed while streaming")
    assert composer.get_attribute("value") == "typed while streaming"
    states = driver.execute_script("return window.__streamingWhenTyped")
    assert len(states) == len("typed while streaming") and all(states), states
    answer = final_answer(driver, timeout_s=110)
    words = answer.get_attribute("textContent").split()
    assert len(words) == 20000
    assert words[:4] == ["alpha", "beta", "gamma", "delta"] and words[-1] == "delta"
    assert_no_page_errors(driver)


def test_long_tool_arguments_and_results_are_pretty_json_collapsed(
    driver: Any, console_bridge: BridgeServer, workspace: Path
) -> None:
    open_console(driver, console_bridge, workspace)
    send_message(driver, "[big tool]")
    final_answer(driver)
    tool = css(driver, "[data-tool-call-id='call_demo_big_1'][data-status='done']")[0]
    args, result = tool.find_elements("css selector", "details.collapsible")
    assert args.get_attribute("open") is None and result.get_attribute("open") is None  # collapsed
    assert re.fullmatch(r"arguments \(\d+ lines\)", args.find_element("css selector", "summary").text)
    shown = args.find_element("css selector", "pre.args > code.language-json").get_attribute("textContent")
    assert shown.startswith('{\n  "parameters": {\n    "Parameter1": {\n      "Default": "value-1",\n')
    assert shown.endswith('\n  },\n  "path": "vpc.ros.yaml"\n}')
    assert css(driver, "[data-tool-call-id='call_demo_big_1'] pre.args span[class^='hljs-']")  # highlighted
    assert result.find_element("css selector", "pre.result").get_attribute("textContent") == VPC_TEMPLATE
    args.find_element("css selector", "summary").click()
    assert args.get_attribute("open") is not None and '"Parameter8"' in args.text
    shoot(driver, "console-tool-json")
    assert_no_page_errors(driver)
