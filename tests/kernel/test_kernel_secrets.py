"""Secrets stay out of the state directory and the logs when the real kernel is upstream.

Every turn carries distinctive credentials in `forwardedProps.iacCode` (LLM key and header, AccessKey,
STS token, a model name) and a private message; the bridge runs at DEBUG with an auth token. A plain
turn, a permission turn and its resume, and a refused request: none of those strings may occur in any
file under the state directory or in the bridge's log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kernel.helpers import answer, resume_body, workspace
from tests.kernel.kernel_harness import Kernel
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import BridgeServer, bridge_server, new_thread_id, run_body
from tests.support.state_checks import Secrets, assert_documented_document, assert_state_clean, leaks


def run(server: BridgeServer, body: dict[str, Any], bearer: str, expect: str) -> list[dict[str, Any]]:
    with server.post(body, headers={"Authorization": f"Bearer {bearer}"}) as response:
        assert response.status_code == 200, response.text
        raw = b"".join(response.iter_content(chunk_size=None))
    return assert_valid_agui_stream(raw, expect_terminal=expect)


def test_secrets_stay_out_of_state_and_logs_with_the_real_kernel(kernel: Kernel, kernel_root: Path) -> None:
    s = Secrets()
    state_dir = kernel_root / "state-secrets"
    ws = workspace(kernel_root)
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": s.bearer}
    thread_id = new_thread_id()
    with bridge_server(
        kernel.url, kernel.token, state_dir, kernel_root, log_level="debug", heartbeat_interval=1, env=env
    ) as server:
        run(server, run_body(thread_id, f"[REASON] {s.message}", ws, **s.props()), s.bearer, "success")
        events = run(
            server,
            run_body(thread_id, f"[WRITE] {s.message}", ws, ros_invocation_id="invocation-2", **s.props()),
            s.bearer,
            "interrupt",
        )
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        assert not leaks(repr(interrupt).encode(), s.credentials())
        body = resume_body(thread_id, ws, [answer(interrupt, "allow_once")], ros="invocation-2", **s.props())
        run(server, body, s.bearer, "success")
        rejected = {**run_body(thread_id, s.message, ws, **s.props()), "tools": [{"name": "x", "description": "y"}]}
        with server.post(rejected, headers={"Authorization": f"Bearer {s.bearer}", "Connection": "close"}) as refused:
            assert refused.status_code == 400
            assert not leaks(refused.content, s.credentials())
        log_path = server.log_path
    files = assert_state_clean(state_dir, s.never_stored())
    (thread_file,) = [p for p in files if p.parent.name == "threads" and p.suffix == ".json"]
    assert_documented_document(thread_file)
    log = log_path.read_bytes()
    assert log, "the bridge wrote no log at DEBUG"
    assert not leaks(log, s.credentials()), leaks(log, s.credentials())
