"""The reattach clients end to end: `agui-bridge chat` cut by a proxy and reattaching,
`agui-bridge chat --attach` following a run started elsewhere, and the README's JavaScript example
(tests/conformance/reattach_example.mjs with @ag-ui/client's verifier) against `agui-bridge serve`
(gunicorn + gevent workers) and the demo agent.

Every test skips with the reason when the bridge does not advertise reattach (tests/support/reattach_probe.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.cutting_proxy import cutting_proxy
from tests.support.harness import REPO_ROOT, BridgeServer, bridge_server
from tests.support.reattach_probe import require_reattach

pytestmark = pytest.mark.e2e

TOKEN = "reattach-clients-token"
SLOW = "slow [SLOW 4]"
CHUNKS = [f"slow chunk {n}." for n in range(1, 7)]
EXAMPLE = REPO_ROOT / "tests" / "conformance" / "reattach_example.mjs"


@pytest.fixture
def bridge(demo_url: str, demo_token: str, state_dir: Path, tmp_path: Path) -> Iterator[BridgeServer]:
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": TOKEN}
    with bridge_server(demo_url, demo_token, state_dir, tmp_path, reattach_window=30, env=env) as server:
        require_reattach(server.url, TOKEN)
        yield server


def chat_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["IAC_CODE_AGUI_AUTH_TOKEN"] = TOKEN
    return env


def chat(url: str, workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agui_bridge.cli", "chat", "--url", url, "--cwd", str(workspace), "--json", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=chat_env(), timeout=90, stdin=subprocess.DEVNULL)


def framed(events: list[dict[str, Any]]) -> bytes:
    """The events as the bridge frames them, for the AG-UI checks and the @ag-ui/client verifier."""
    return b"".join(
        b"data: " + json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n" for e in events
    )


def assert_whole_slow_run(events: list[dict[str, Any]]) -> None:
    assert_valid_agui_stream(framed(events), expect_terminal="RUN_FINISHED")
    text = "".join(str(e.get("delta", "")) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    for chunk in CHUNKS:
        assert text.count(chunk) == 1, text
    assert [e["type"] for e in events].count("RUN_STARTED") == 1


def test_chat_reattaches_after_a_proxy_cuts_the_stream(bridge: BridgeServer, workspace: Path) -> None:
    with cutting_proxy(bridge.url, b"slow chunk 2.") as proxy:
        done = chat(proxy.url, workspace, SLOW)
    assert done.returncode == 0, done.stderr
    assert proxy.cuts == 1 and proxy.connections >= 2
    assert "reattaching to run" in done.stderr and "reattached to run" in done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert_whole_slow_run([json.loads(line) for line in done.stdout.splitlines()])


def test_chat_sees_the_tool_result_when_its_resume_stream_is_cut(bridge: BridgeServer, workspace: Path) -> None:
    # the answer is accepted (RUN_STARTED of the resume run), then the connection drops before the result
    with cutting_proxy(bridge.url, b'"RUN_STARTED"', request_has=b'"resume"') as proxy:
        argv = [sys.executable, "-m", "agui_bridge.cli", "chat", "--url", proxy.url, "--cwd", str(workspace), "--json"]
        done = subprocess.run(
            [*argv, "please write file"], input="1\n", capture_output=True, text=True, env=chat_env(), timeout=90
        )
    assert done.returncode == 0, done.stderr
    assert proxy.cuts == 1 and "reattaching to run" in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    resume = events[[e["type"] for e in events].index("RUN_STARTED", 1) :]
    assert_valid_agui_stream(framed(resume), expect_terminal="RUN_FINISHED")
    results = [e for e in resume if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1 and "Successfully wrote 3 lines" in results[0]["content"]


def test_chat_attach_follows_a_run_started_elsewhere(bridge: BridgeServer, workspace: Path) -> None:
    thread_id, run_id, ros = str(uuid.uuid4()), f"run-{uuid.uuid4()}", f"ros-{uuid.uuid4().hex}"
    body = {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": SLOW}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": ros, "cwd": str(workspace)}},
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream"}
    with requests.post(bridge.url, json=body, headers=headers, stream=True, timeout=30) as started:
        assert started.status_code == 200
        next(started.iter_content(chunk_size=None))  # the run is under way; this client goes away
    done = chat(bridge.url, workspace, "--attach", f"{thread_id}/{run_id}", "--ros", ros)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "RUN_STARTED" and events[0]["runId"] == run_id
    assert_whole_slow_run(events)
    missing = chat(bridge.url, workspace, "--attach", f"{thread_id}/run-unknown", "--ros", ros)
    assert missing.returncode == 2 and "HTTP 404" in missing.stderr


def test_the_readme_javascript_example_reattaches(bridge: BridgeServer, workspace: Path) -> None:
    node = shutil.which("node")
    if node is None or not (EXAMPLE.parent / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("node or tests/conformance/node_modules is missing (npm ci --prefix tests/conformance)")
    argv = [node, str(EXAMPLE), "--url", bridge.url, "--token", TOKEN, "--cwd", str(workspace)]
    done = subprocess.run([*argv, "--message", SLOW, "--cut-after", "4"], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["lastIdAtCut"] >= 4
    assert result["ids"] == list(range(1, len(result["ids"]) + 1))  # contiguous: nothing missed, nothing twice
    assert_whole_slow_run(result["events"])


def test_the_readme_quotes_the_javascript_example() -> None:
    source = EXAMPLE.read_text(encoding="utf-8")
    begin, end = "// --- reattach example: begin\n", "// --- reattach example: end\n"
    snippet = source[source.index(begin) + len(begin) : source.index(end)]
    assert snippet.strip() in (REPO_ROOT / "docs" / "reattach.md").read_text(encoding="utf-8")
