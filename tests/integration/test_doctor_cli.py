"""`agui-bridge doctor` as operators run it: the real command line, configuration as `serve` resolves it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.harness import REPO_ROOT


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_")}
    environ["PYTHONPATH"] = str(REPO_ROOT)
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agui_bridge.cli", "doctor", *args],
        env=environ, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_doctor_passes_and_exits_0(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    result = doctor(
        "--state-dir", str(state), "--a2a-url", demo_url, "--json", env={"IAC_CODE_AGUI_A2A_TOKEN": demo_token}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and {c["name"] for c in report["checks"]} >= {"upstream-a2a", "clock", "auth-token"}
    assert demo_token not in result.stdout


def test_doctor_fails_beyond_loopback_without_token(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    result = doctor(
        "--host", "0.0.0.0", "--state-dir", str(state), "--a2a-url", demo_url,
        env={"IAC_CODE_AGUI_A2A_TOKEN": demo_token},
    )  # fmt: skip
    assert result.returncode == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 2, result.stdout
    assert failed[0].split()[1] == "state-private" and "chmod 700" in failed[0]
    assert failed[1].split()[1] == "auth-token" and "fix: set IAC_CODE_AGUI_AUTH_TOKEN" in failed[1]


def test_doctor_reads_the_yaml_config_like_serve(tmp_path: Path) -> None:
    state = tmp_path / "from-yaml"
    config = tmp_path / "bridge.yaml"
    config.write_text(f"state_dir: {state}\n")
    result = doctor("--config", str(config))
    assert result.returncode == 1
    assert f"FAIL  state-dir        {state} does not exist" in result.stdout


def test_invalid_configuration_exits_2(tmp_path: Path) -> None:
    result = doctor("--port", "0")
    assert result.returncode == 2 and "--port" in result.stderr
