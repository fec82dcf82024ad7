"""The managed child through `agui-bridge serve` (docs/design.md#managed-upstream).

Its environment is an allow-list (never the AG-UI auth token, no proxies), it dies with the master
even when the master is SIGKILLed (no systemd or Docker here to clean up), and a missing or broken
`iac-code` executable is one line on stderr and exit status 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agui_bridge.demo.testing import free_port
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import REPO_ROOT, BridgeServer, new_thread_id, run_body
from tests.support.processes import gone, process_environment

pytestmark = pytest.mark.e2e


def test_the_managed_child_gets_no_bridge_secret_and_dies_with_a_killed_master(tmp_path: Path) -> None:
    bearer = "child-test-bearer-" + os.urandom(8).hex()
    env = {
        "IAC_CODE_AGUI_AUTH_TOKEN": bearer,
        "IAC_CODE_AGUI_A2A_TOKEN": "child-test-a2a-" + os.urandom(8).hex(),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",  # the bridge's own loopback calls stay direct
        "IAC_CODE_MODEL": "model-for-the-child",
        "UNRELATED_SECRET": "child-test-unrelated",
    }
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = BridgeServer(None, None, tmp_path / "state", tmp_path, env=env).start()
    try:
        child = server.managed_child_pid()
        assert child is not None
        child_env = process_environment(child)
        assert bearer not in "\0".join(f"{k}={v}" for k, v in child_env.items())
        assert not [name for name in child_env if name.startswith("IAC_CODE_AGUI_")]
        assert not [name for name in child_env if "proxy" in name.lower()]
        assert "UNRELATED_SECRET" not in child_env
        assert child_env["IAC_CODE_MODEL"] == "model-for-the-child"
        assert child_env["IACCODE_A2A_HTTP_TOKEN"]  # its own random bearer, not ours
        assert child_env["IACCODE_A2A_ALLOWED_CWDS"] == str(tmp_path)
        # The bridge still works through that child (with our token, which the child never saw).
        with server.post(
            run_body(new_thread_id(), "hello", workspace), headers={"Authorization": f"Bearer {bearer}"}
        ) as response:
            assert response.status_code == 200
            assert_valid_agui_stream(response.content, expect_terminal="success")
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)  # the master only: nothing runs its clean-up
        assert gone(child), "the managed child outlived its killed master"
    finally:
        server.stop(signal.SIGKILL)


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agui_bridge.cli", "serve", "--port", "1", "--managed-a2a", "iac-code", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_missing_iac_code_binary_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = serve("--iac-code-bin", str(tmp_path / "no-such-iac-code"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"agui-bridge: --iac-code-bin '{tmp_path / 'no-such-iac-code'}' is not an executable file."
    ]
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = serve(env={"PATH": str(empty), "IAC_CODE_AGUI_IAC_CODE_BIN": ""})
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "iac-code was not found" in result.stderr


def test_a_broken_iac_code_binary_is_one_line_and_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "iac-code"
    broken.write_text("#!/bin/sh\necho 'ImportError: cannot import name' >&2\nexit 3\n")
    broken.chmod(0o755)
    result = serve(env={"IAC_CODE_AGUI_IAC_CODE_BIN": str(broken)})
    assert result.returncode == 2
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("agui-bridge:")]
    assert lines == ["agui-bridge: The local A2A process exited during startup (exit code 3)."]


@pytest.mark.parametrize("failure", ["port-in-use", "metrics-dir-is-a-file"])
def test_a_start_up_failure_after_the_spawn_stops_the_child(tmp_path: Path, failure: str) -> None:
    """The child is up, then the server cannot start: the child must not be left running."""
    marker = tmp_path / "pid"
    fake = tmp_path / "iac-code"
    fake.write_text(
        "#!/bin/sh\n"
        f"echo $$ > {marker}\n"
        'port=""; while [ $# -gt 0 ]; do [ "$1" = --port ] && port=$2; shift; done\n'
        f'exec {sys.executable} -c "import http.server as h, sys; '
        "h.HTTPServer(('127.0.0.1', int(sys.argv[1])), type('H', (h.BaseHTTPRequestHandler,), "
        "{'do_GET': lambda s: (s.send_response(200), s.end_headers())})).serve_forever()\" $port\n"
    )
    fake.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "IAC_CODE_AGUI_IAC_CODE_BIN": str(fake)}
    if failure == "metrics-dir-is-a-file":
        (tmp_path / "not-a-dir").write_text("")
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "not-a-dir")
    with socket_in_use() as busy:
        port = busy if failure == "port-in-use" else free_port()
        result = subprocess.run(
            [sys.executable, "-m", "agui_bridge.cli", "serve", "--port", str(port), "--managed-a2a", "iac-code"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    assert result.returncode != 0
    pid = int(marker.read_text())
    assert gone(pid), "the managed child was left running after a failed start"


class socket_in_use:
    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(1)
        return int(self._sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
