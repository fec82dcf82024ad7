"""Without the `demo` extra, the commands that need the demo agent say in one line what to install."""

from __future__ import annotations

import importlib.util
import os
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

from agui_bridge.cli import command as cli
from agui_bridge.cli import main
from agui_bridge.cli.command import DEMO_EXTRA_HINT


def _without(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    """Make `find_spec` report `missing` as not installed, as in an install without the extra."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == missing else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in [key for key in os.environ if key.startswith("IAC_CODE_AGUI_")]:
        monkeypatch.delenv(key)
    # `serve` points prometheus_client at a directory through the environment: keep it local.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))


@pytest.mark.parametrize("missing", ["a2a", "uvicorn"])
def test_serve_without_a2a_url_and_without_the_extra_exits_2_with_one_line(
    missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _clean_environment(monkeypatch, tmp_path)
    _without(monkeypatch, missing)
    started: list[object] = []
    monkeypatch.setattr(cli, "run_gunicorn", started.append)
    assert main(["serve", "--state-dir", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert err == f"agui-bridge: {DEMO_EXTRA_HINT}\n"
    assert "pip install 'agui-bridge[demo]'" in err
    assert started == []


def test_demo_agent_without_the_extra_exits_2_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without(monkeypatch, "a2a")
    assert main(["demo-agent", "--port", "1"]) == 2
    assert capsys.readouterr().err == f"agui-bridge: {DEMO_EXTRA_HINT}\n"


def test_serve_with_an_a2a_url_does_not_need_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _clean_environment(monkeypatch, tmp_path)
    _without(monkeypatch, "a2a")
    started: list[object] = []
    monkeypatch.setattr(cli, "run_gunicorn", started.append)
    args = ["serve", "--state-dir", str(tmp_path / "state"), "--a2a-url", "http://127.0.0.1:9/"]
    assert main(args) == 0
    assert len(started) == 1
    assert DEMO_EXTRA_HINT not in capsys.readouterr().err


def test_the_installed_extra_passes_the_check() -> None:
    cli.require_demo_extra()  # the test environment installs `-e .[demo]`
