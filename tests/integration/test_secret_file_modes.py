"""Secrets readable by others stop the start; a state directory open to others is one warning line
(docs/design.md#state-location). `serve`, wsgi.py and the Apache entry point use doctor's own checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import REPO_ROOT, bridge_server

TOKEN = "mode-test-token-5d1e"
#: Every entry point needs an A2A URL to start (nothing listens there: these tests send no run).
A2A_URL = "http://127.0.0.1:9/"


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("IAC_CODE_AGUI_", "AGUI_BRIDGE_"))}
    environ["PYTHONPATH"] = str(REPO_ROOT)
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=environ, capture_output=True, text=True, timeout=60, check=False
    )


def config_with_token(tmp_path: Path, mode: int) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    config = tmp_path / "bridge.yaml"
    config.write_text(f"state_dir: {state}\nauth_token: {TOKEN}\n")
    config.chmod(mode)
    return config


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_serve_refuses_a_config_file_holding_a_token_that_others_can_read(tmp_path: Path, mode: int) -> None:
    config = config_with_token(tmp_path, mode)
    result = run(["-m", "agui_bridge.cli", "serve", "--config", str(config), "--port", "1"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert "refusing to start" in result.stderr and f"chmod 600 {config}" in result.stderr
    assert f"mode {mode:04o}" in result.stderr and TOKEN not in result.stderr


def test_doctor_fails_the_same_config_file(tmp_path: Path) -> None:
    config = config_with_token(tmp_path, 0o644)
    result = run(["-m", "agui_bridge.cli", "doctor", "--config", str(config)])
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert any(line.split()[1] == "secret-file" and f"chmod 600 {config}" in line for line in failed), result.stdout
    config.chmod(0o600)
    passed = run(["-m", "agui_bridge.cli", "doctor", "--config", str(config)]).stdout
    assert "FAIL  secret-file" not in passed and "secret-file" in passed


def test_serve_warns_in_one_line_on_a_state_directory_open_to_others(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    with bridge_server(demo_url, demo_token, state, tmp_path, workers=1) as server:
        log_path = server.log_path
    warnings = [line for line in log_path.read_text().splitlines() if "state directory is open to others" in line]
    assert len(warnings) == 1 and "chmod 700" in warnings[0] and "mode 0755" in warnings[0], warnings


def test_wsgi_py_warns_on_a_state_directory_open_to_others(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o750)
    result = run(["-c", "import wsgi"], env={"IAC_CODE_AGUI_STATE_DIR": str(state), "IAC_CODE_AGUI_A2A_URL": A2A_URL})
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("state directory is open to others") == 1 and "mode 0750" in result.stderr


APACHE_ENTRY = "import runpy; runpy.run_path('deploy/apache/agui-bridge.wsgi')"


@pytest.mark.parametrize(("mode", "status"), [(0o640, 3), (0o644, 3), (0o600, 0)])
def test_the_apache_entry_point_refuses_an_env_file_with_a_token_others_can_read(
    tmp_path: Path, mode: int, status: int
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env_file = tmp_path / "agui-bridge.env"
    env_file.write_text(
        f"IAC_CODE_AGUI_AUTH_TOKEN={TOKEN}\nIAC_CODE_AGUI_STATE_DIR={state}\nIAC_CODE_AGUI_A2A_URL={A2A_URL}\n"
    )
    env_file.chmod(mode)
    result = run(["-c", APACHE_ENTRY], env={"AGUI_BRIDGE_ENV_FILE": str(env_file)})
    assert result.returncode == status, result.stderr
    assert TOKEN not in result.stderr
    if status:
        assert result.stderr.count("\n") == 1 and f"chmod 600 {env_file}" in result.stderr, result.stderr
    else:
        assert result.stderr == ""
