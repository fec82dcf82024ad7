"""`agui-bridge serve --managed-a2a iac-code --iac-code-bin <kernel venv>/bin/iac-code` with the real kernel.

The kernel lives in its own virtual environment; the bridge finds it through --iac-code-bin, hands
it only its LLM configuration (IAC_CODE_*), health-checks it and stops it with the server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from tests.kernel import fake_llm
from tests.kernel.helpers import text_of
from tests.kernel.kernel_harness import kernel_environment
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import BridgeServer, custom, readme_example_body
from tests.support.processes import gone, process_environment


def kernel_child(server: BridgeServer) -> int | None:
    for pid in server.child_pids():
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(part.endswith(b"iac-code") for part in cmdline) and b"a2a" in cmdline:
                return pid
    return None


def test_managed_iac_code_streams_the_readme_example_turn(
    iac_code_bin: Path, kernel_root: Path, scripted_llm: fake_llm.ScriptedLLM
) -> None:
    home = kernel_root / "managed-home"
    env = kernel_environment(home, scripted_llm.base_url, Path("/tmp"))
    env.pop("IACCODE_A2A_ALLOWED_CWDS")  # the bridge passes its own allowed roots on
    bearer = "managed-bearer-" + os.urandom(8).hex()
    env["IAC_CODE_AGUI_AUTH_TOKEN"] = bearer
    server = BridgeServer(
        None,
        None,
        kernel_root / "state-managed",
        Path("/tmp"),  # the README's cwd is /tmp/agui-demo/session-1
        managed_a2a="iac-code",
        iac_code_bin=str(iac_code_bin),
        env=env,
    )
    server.start()
    try:
        child = kernel_child(server)
        assert child is not None, "no iac-code a2a child of the bridge"
        child_env = process_environment(child)
        assert bearer not in "\0".join(child_env.values())
        assert not [name for name in child_env if name.startswith("IAC_CODE_AGUI_")]
        assert child_env["IAC_CODE_BASE_URL"] == scripted_llm.base_url
        with server.post(readme_example_body(), headers={"Authorization": f"Bearer {bearer}"}) as response:
            assert response.status_code == 200, response.text
            raw = b"".join(response.iter_content(chunk_size=None))
        events = assert_valid_agui_stream(raw, expect_terminal="success")
        assert events[0]["type"] == "RUN_STARTED"
        assert custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
        assert text_of(events) == fake_llm.PLAIN_TEXT
    finally:
        server.stop(signal.SIGTERM, group=False)  # the master alone must stop its kernel
    assert gone(child, 15), "the managed kernel outlived the server"


def test_managed_iac_code_dies_with_a_killed_master(
    iac_code_bin: Path, kernel_root: Path, scripted_llm: fake_llm.ScriptedLLM
) -> None:
    env = kernel_environment(kernel_root / "managed-home-2", scripted_llm.base_url, kernel_root)
    server = BridgeServer(
        None, None, kernel_root / "state-managed-2", kernel_root, managed_a2a="iac-code",
        iac_code_bin=str(iac_code_bin), env=env,
    ).start()  # fmt: skip
    try:
        child = kernel_child(server)
        assert child is not None
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)
        started = time.monotonic()
        assert gone(child, 20), "the managed kernel outlived its SIGKILLed master"
        assert time.monotonic() - started < 20
    finally:
        server.stop(signal.SIGKILL)
