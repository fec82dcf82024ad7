"""End to end: the official ``@ag-ui/client`` 1.0 ``HttpAgent`` drives interrupt -> resume flows.

One ``agui-bridge serve`` (gunicorn, gevent, 4 workers, bearer auth on) runs against the demo agent;
for each flow ``tests/conformance/interrupt_flows.mjs`` runs one ``HttpAgent`` (verifier on, as
``runAgent`` always does): a first run that must end in ``RUN_FINISHED`` outcome ``interrupt``, then a
resume through the client's own API (``runAgent({runId: <new>, forwardedProps: <same>, resume})``,
``resume`` from ``buildResumeArray(agent.pendingInterrupts, ...)``) that must end in outcome
``success``. The script prints one JSON line per run and one per flow.

Needs ``node`` and ``tests/conformance/node_modules`` (``npm ci --prefix tests/conformance``): skipped
locally without them, a failure when ``CI`` is truthy (as ``tests/support/conformance.py``).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.conformance import CONFORMANCE_DIR, in_ci, node_verifier_available
from tests.support.harness import BridgeServer, bridge_server

pytestmark = pytest.mark.e2e

SCRIPT = CONFORMANCE_DIR / "interrupt_flows.mjs"
RUN_TIMEOUT_S = 40  # per runAgent call inside the script
NODE_TIMEOUT_S = 100  # the whole flow (pytest's own timeout is 120 s per test)


@dataclass(frozen=True)
class Flow:
    reason: str  # the interrupt's `reason` (docs/design.md#interrupt-building)
    payload: dict[str, Any]  # the answer the script sends
    text: str  # what the demo agent says once it got that answer


FLOWS = {
    "allow": Flow("tool_call", {"decision": "allow_once"}, "all done."),
    "deny": Flow("tool_call", {"decision": "deny"}, "was denied; nothing changed."),
    "question": Flow("input_required", {"selectedId": "small"}, "You chose: Small (2 vCPU)."),
    "question-free": Flow("input_required", {"freeText": "medium"}, "You chose: medium."),
}


@dataclass
class BridgeUnderTest:
    server: BridgeServer
    token: str
    workspace: Path


@pytest.fixture(scope="module")
def node() -> str:
    missing = node_verifier_available()
    if missing is None and not SCRIPT.is_file():
        missing = f"{SCRIPT} is missing"
    if missing is not None:
        message = f"@ag-ui/client interrupt flows cannot run: {missing}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    path = shutil.which("node")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def bridge(
    node: str, tmp_path_factory: pytest.TempPathFactory, demo_url: str, demo_token: str
) -> Iterator[BridgeUnderTest]:
    root = tmp_path_factory.mktemp("agui-client-interrupts")
    workspace = root / "workspace"
    workspace.mkdir()
    token = "agui-" + secrets.token_urlsafe(24)
    with bridge_server(
        demo_url, demo_token, root / "state", root, workers=4, env={"IAC_CODE_AGUI_AUTH_TOKEN": token}
    ) as server:
        yield BridgeUnderTest(server, token, workspace)


def run_flow(
    node: str, bridge: BridgeUnderTest, flow: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    cmd = [
        node,
        str(SCRIPT),
        "--url",
        bridge.server.url,
        "--token",
        bridge.token,
        "--cwd",
        str(bridge.workspace),
        "--flow",
        flow,
        "--timeout",
        str(RUN_TIMEOUT_S),
    ]
    proc = subprocess.run(cmd, cwd=CONFORMANCE_DIR, capture_output=True, text=True, timeout=NODE_TIMEOUT_S, check=False)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip().startswith("{")]
    return proc, lines


def diagnostics(proc: subprocess.CompletedProcess[str], bridge: BridgeUnderTest) -> str:
    log = bridge.server.log_path.read_text(errors="replace")[-3000:] if bridge.server.log_path.exists() else ""
    return (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-6000:]}\nstderr:\n{proc.stderr[-3000:]}\n"
        f"bridge log tail:\n{log}"
    )


@pytest.mark.parametrize("flow", list(FLOWS))
def test_official_client_interrupt_then_resume(node: str, bridge: BridgeUnderTest, flow: str) -> None:
    expected = FLOWS[flow]
    proc, lines = run_flow(node, bridge, flow)
    why = diagnostics(proc, bridge)
    runs = {line["run"]: line for line in lines if line.get("kind") == "run"}
    assert "interrupt" in runs, why

    # Run 1: the official client accepted the stream and saw exactly one interrupt of the right kind.
    first = runs["interrupt"]
    assert first["problems"] == [] and first["ok"], why
    assert first["httpStatus"] == 200 and first["error"] is None, why
    assert first["events"][0] == "RUN_STARTED" and first["events"][-1] == "RUN_FINISHED", why
    assert first["outcome"] == "interrupt", why
    assert len(first["interrupts"]) == 1, why
    interrupt = first["interrupts"][0]
    assert interrupt["reason"] == expected.reason, why
    # Every interrupt carries its expiry (docs/design.md#decision-interrupts-expire).
    assert interrupt["expiresAt"] and interrupt["expiredForClient"] is False, why
    assert "resume" not in first["request"], why
    # With an interrupt pending the client itself refuses a plain run, before sending anything.
    assert first["clientGuard"]["refused"] is True and first["clientGuard"]["requestsSent"] == 0, why

    # Run 2: the resume the client sent, and its outcome.
    assert "resume" in runs, why
    second = runs["resume"]
    request = second["request"]
    assert request["threadId"] == first["threadId"] == first["request"]["threadId"], why
    assert request["runId"] == second["runId"] != first["runId"], why
    assert request["forwardedProps"] == first["request"]["forwardedProps"], why
    answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": expected.payload}
    assert request["resume"] == [answer], why
    assert second["httpStatus"] == 200, why
    assert second["runError"] is None, why
    assert second["outcome"] == "success", why
    assert second["problems"] == [] and second["ok"], why
    assert second["pendingAfter"] == [], why
    assert expected.text in second["text"], why

    flow_line = [line for line in lines if line.get("kind") == "flow"]
    assert flow_line and flow_line[-1]["ok"] is True, why
    assert proc.returncode == 0, why


def test_official_client_cancels_an_expired_interrupt_and_continues_the_thread(
    node: str, tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    """Interrupts expire, with the official client: an expired interrupt can only be cancelled, and that frees
    the thread (docs/design.md#decision-interrupts-expire).

    The bridge runs with a 2 s interrupt TTL; the script waits until the client itself considers
    the interrupt expired, resumes with ``cancelled`` (the only answer the client allows), expects
    RUN_FINISHED ``cancelled`` (after which the client forgets the interrupt), then a plain new run
    on the same agent and thread, which must succeed.
    """
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    token = "agui-" + secrets.token_urlsafe(24)
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": token}
    with bridge_server(
        demo_url, demo_token, tmp_path / "state", tmp_path, workers=4, interrupt_ttl=2, env=env
    ) as server:
        bridge = BridgeUnderTest(server, token, workspace)
        proc, lines = run_flow(node, bridge, "expired-cancel")
        why = diagnostics(proc, bridge)
    runs = {line["run"]: line for line in lines if line.get("kind") == "run"}
    assert runs["interrupt"]["outcome"] == "interrupt", why
    resume = runs["resume"]
    assert resume["request"]["resume"] == [
        {"interruptId": runs["interrupt"]["interrupts"][0]["id"], "status": "cancelled"}
    ], why
    assert resume["outcome"] == "cancelled" and resume["pendingAfter"] == [], why
    assert runs["followup"]["outcome"] == "success" and runs["followup"]["ok"], why
    assert proc.returncode == 0, why
