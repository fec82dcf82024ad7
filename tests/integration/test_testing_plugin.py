"""The in-process testing plugin (`agui_bridge.testing`) as a user meets it.

The README's example is extracted and run in a fresh pytest in an empty directory (no conftest: only the
plugin's entry point provides the fixtures), so the documented example cannot rot. The helpers are also
checked directly against the demo agent: event-by-event reading, heartbeats, a disconnect, an error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agui_bridge.config.settings import Settings
from agui_bridge.testing import NO_UPSTREAM, AguiClient, EventStream, Upstream, run_input
from tests.support.harness import REPO_ROOT, new_thread_id, wait_for_task_state

SECTION = "## Testing your integration in-process"


def readme_example() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert SECTION in readme, "the README must keep its in-process testing section"
    match = re.search(r"```python\n(.*?)```", readme.split(SECTION, 1)[1], re.S)
    assert match, "the in-process testing section must show a python example"
    return match.group(1)


def test_the_readme_example_passes_in_a_fresh_pytest(tmp_path: Path) -> None:
    example = readme_example()
    assert "def test_" in example and "agui_client" in example
    (tmp_path / "test_user_example.py").write_text(example, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "IAC_CODE_AGUI_"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user_example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"\b1 passed\b", result.stdout), result.stdout[-2000:]


def test_events_are_read_one_by_one_with_heartbeats(agui_settings: Settings, agui_workspace: Path) -> None:
    from agui_bridge.app import create_app

    client = AguiClient(create_app(agui_settings.replace(heartbeat_interval_s=0.2)))
    stream = client.run(run_input(new_thread_id(), "slow [SLOW 1.2]", agui_workspace))
    first = stream.next_event()
    assert first is not None and first["type"] == "RUN_STARTED"
    assert [e["type"] for e in stream.events] == ["RUN_STARTED"]  # nothing read ahead of the caller
    delta = stream.until("TEXT_MESSAGE_CONTENT")
    assert delta["delta"] == "slow chunk 1. "
    assert stream.outcome == "success"
    assert stream.text == "".join(f"slow chunk {i}. " for i in range(1, 7))
    assert "heartbeat" in stream.comments
    assert stream.next_event() is None


def test_close_is_a_disconnect_that_cancels_the_task(
    agui_client: AguiClient, agui_workspace: Path, agui_a2a: Upstream
) -> None:
    with agui_client.run(run_input(new_thread_id(), "slow [SLOW 30]", agui_workspace)) as stream:
        task_id = stream.until("iac-code.session.v1")["value"]["taskId"]
    state = wait_for_task_state(agui_a2a.url, agui_a2a.token, task_id, "TASK_STATE_CANCELED")
    assert state == "TASK_STATE_CANCELED"


def test_a_prestream_error_has_a_code_and_no_events(agui_client: AguiClient, tmp_path: Path) -> None:
    stream = agui_client.run(run_input(new_thread_id(), "hi", "/definitely/not/allowed"))
    assert stream.status_code == 400 and not stream.is_stream
    assert stream.error is not None and stream.error["code"] and stream.error["message"]
    assert stream.next_event() is None
    with pytest.raises(AssertionError):
        _ = stream.terminal


def test_a_stream_that_ended_with_run_error_shows_its_code_and_message_in_the_helpers(
    agui_client: AguiClient, agui_workspace: Path
) -> None:
    stream = agui_client.run(run_input(new_thread_id(), "please fail", agui_workspace))
    ending = "RUN_ERROR A2A_EXECUTION_FAILED: The A2A execution failed."
    with pytest.raises(AssertionError, match=re.escape(f"the stream ended without TOOL_CALL_START: {ending}")):
        stream.until("TOOL_CALL_START")
    with pytest.raises(AssertionError, match=re.escape(f"the run announced no interrupts: {ending}")):
        _ = stream.interrupts  # not an empty list that a `[permission] = ...` would trip over unexplained
    assert stream.outcome == "RUN_ERROR"


def test_a_prestream_error_shows_its_status_code_and_message_in_the_helpers(agui_client: AguiClient) -> None:
    stream = agui_client.run(run_input(new_thread_id(), "hi", "/definitely/not/allowed"))
    assert stream.error is not None
    ending = f"HTTP 400 {stream.error['code']}: {stream.error['message']}"
    with pytest.raises(AssertionError, match=re.escape(f"no terminal event: {ending}")):
        _ = stream.terminal


def test_the_plugin_is_registered_through_its_entry_point(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("agui_bridge")
    assert plugin is not None and plugin.__name__ == "agui_bridge.testing"
    assert isinstance(EventStream.__doc__, str)


USER_TESTS = """
import uuid

from agui_bridge.testing import run_input


def test_a_turn_against_the_given_upstream(agui_client, agui_workspace):
    stream = agui_client.run(run_input(str(uuid.uuid4()), "say hi", agui_workspace))
    assert stream.outcome == "success" and stream.text
"""

#: Makes every import of the demo agent fail, as when its packages are not installed.
NO_DEMO_CONFTEST = """
import sys

sys.modules["agui_bridge.demo"] = None
"""


def run_user_pytest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "IAC_CODE_AGUI_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_the_demo_agent_the_plugin_uses_the_given_url_or_fails_naming_what_to_install(
    tmp_path: Path, agui_a2a: Upstream
) -> None:
    (tmp_path / "conftest.py").write_text(NO_DEMO_CONFTEST, encoding="utf-8")
    (tmp_path / "test_user.py").write_text(USER_TESTS, encoding="utf-8")
    assert agui_a2a.token, "the project's tests run the demo agent with bearer auth on"
    token = {"IAC_CODE_AGUI_TEST_A2A_TOKEN": agui_a2a.token}
    by_option = run_user_pytest(tmp_path, "--agui-a2a-url", agui_a2a.url, env=token)
    assert by_option.returncode == 0 and "1 passed" in by_option.stdout, by_option.stdout[-2000:]
    by_env = run_user_pytest(tmp_path, env={**token, "IAC_CODE_AGUI_TEST_A2A_URL": agui_a2a.url})
    assert by_env.returncode == 0 and "1 passed" in by_env.stdout, by_env.stdout[-2000:]
    failed = run_user_pytest(tmp_path)
    assert failed.returncode == 1 and re.search(r"\b1 error\b", failed.stdout), failed.stdout[-2000:]
    assert "skipped" not in failed.stdout and NO_UPSTREAM in failed.stdout, failed.stdout[-2000:]
