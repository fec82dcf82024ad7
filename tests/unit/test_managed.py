"""The managed child's environment allow-list and executable lookup (agui_bridge/worker/managed.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agui_bridge.worker.managed import ManagedUpstreamError, child_command, child_environment, find_iac_code

HOST_ENV = {
    "HOME": "/home/op",
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "IAC_CODE_PROVIDER": "openai_compatible",
    "IAC_CODE_API_KEY": "llm-key",
    "IAC_CODE_BASE_URL": "http://127.0.0.1:9/v1",
    "IAC_CODE_AGUI_AUTH_TOKEN": "agui-bearer",
    "IAC_CODE_AGUI_A2A_TOKEN": "a2a-bearer",
    "IAC_CODE_AGUI_ALLOWED_CWDS": "/srv/ws",
    "ALIBABA_CLOUD_ACCESS_KEY_ID": "akid",
    "HTTP_PROXY": "http://proxy.invalid:3128",
    "https_proxy": "http://proxy.invalid:3128",
    "NO_PROXY": "localhost",
    "AWS_SECRET_ACCESS_KEY": "unrelated",
    "PYTHONPATH": "/srv/src",
    "PROMETHEUS_MULTIPROC_DIR": "/tmp/metrics",
    "DASHSCOPE_API_KEY": "provider-key",
}


def test_the_child_gets_its_llm_configuration_and_nothing_of_the_bridge() -> None:
    env = child_environment("iac-code", HOST_ENV)
    assert env == {
        "HOME": "/home/op",
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "IAC_CODE_PROVIDER": "openai_compatible",
        "IAC_CODE_API_KEY": "llm-key",
        "IAC_CODE_BASE_URL": "http://127.0.0.1:9/v1",
        "ALIBABA_CLOUD_ACCESS_KEY_ID": "akid",
        "DASHSCOPE_API_KEY": "provider-key",
        "IACCODE_A2A_ALLOWED_CWDS": "/srv/ws",
    }


def test_the_demo_child_also_finds_our_sources() -> None:
    env = child_environment("demo", HOST_ENV)
    assert env["PYTHONPATH"] == "/srv/src"
    assert not [name for name in env if name.startswith("IAC_CODE_AGUI_") or "PROXY" in name.upper()]


def test_an_explicit_kernel_allow_list_wins() -> None:
    env = child_environment("iac-code", {**HOST_ENV, "IACCODE_A2A_ALLOWED_CWDS": "/only/here"})
    assert env["IACCODE_A2A_ALLOWED_CWDS"] == "/only/here"


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_iac_code_bin_is_used_when_it_is_an_executable(tmp_path: Path) -> None:
    binary = _executable(tmp_path / "iac-code")
    command = child_command("iac-code", 4242, {"IAC_CODE_AGUI_IAC_CODE_BIN": str(binary), "PATH": ""})
    assert command[:2] == [str(binary), "a2a"] and command[command.index("--port") + 1] == "4242"


@pytest.mark.parametrize("kind", ["missing", "directory", "not-executable"])
def test_a_bad_iac_code_bin_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "iac-code"
    if kind == "directory":
        path.mkdir()
    elif kind == "not-executable":
        path.write_text("#!/bin/sh\n")
    with pytest.raises(ManagedUpstreamError, match=r"--iac-code-bin .* is not an executable file\."):
        find_iac_code(str(path), {})


def test_iac_code_is_looked_up_on_path(tmp_path: Path) -> None:
    binary = _executable(tmp_path / "iac-code")
    assert find_iac_code(None, {"PATH": f"/nonexistent{os.pathsep}{tmp_path}"}) == str(binary)


def test_no_iac_code_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    with pytest.raises(ManagedUpstreamError, match="iac-code was not found on PATH"):
        find_iac_code(None, {"PATH": str(tmp_path)})
