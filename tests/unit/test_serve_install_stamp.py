"""`scripts/serve` runs pip only when what decides the install changed (scripts/lib/install-stamp.sh).

Runs the script's own install step in a copy of the files it hashes, with a fake pip that records its calls.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_INPUTS = ("requirements.txt", "requirements-demo.txt", "setup.cfg", "pyproject.toml")
FAKE_PIP = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/pip-calls"
"""


def make_checkout(root: Path) -> Path:
    """The files the install step reads, and a virtualenv whose python is this interpreter."""
    (root / "scripts" / "lib").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "scripts" / "lib" / "install-stamp.sh", root / "scripts" / "lib")
    for name in INSTALL_INPUTS:
        shutil.copy2(REPO_ROOT / name, root / name)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    pip = root / "fake-pip"
    pip.write_text(FAKE_PIP)
    pip.chmod(0o755)
    return root / "pip-calls"


def install_step(root: Path) -> None:
    env = {**os.environ, "AGUI_SERVE_PIP": str(root / "fake-pip")}
    script = ". scripts/lib/install-stamp.sh && install_if_changed"
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=root, env=env, check=True, timeout=60)


def pip_calls(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


def test_a_second_start_with_nothing_changed_skips_pip(tmp_path: Path) -> None:
    calls = make_checkout(tmp_path)
    install_step(tmp_path)
    first = pip_calls(calls)
    assert first[-1].endswith("install -q --disable-pip-version-check -r requirements-demo.txt -e .[demo]")
    install_step(tmp_path)
    assert pip_calls(calls) == first


def test_a_changed_dependency_file_installs_again(tmp_path: Path) -> None:
    calls = make_checkout(tmp_path)
    install_step(tmp_path)
    installs = len(pip_calls(calls))
    with (tmp_path / "requirements.txt").open("a") as requirements:
        requirements.write("six==1.17.0\n")
    install_step(tmp_path)
    assert len(pip_calls(calls)) == 2 * installs
    install_step(tmp_path)
    assert len(pip_calls(calls)) == 2 * installs


def test_a_failed_install_leaves_no_stamp_so_the_next_start_tries_again(tmp_path: Path) -> None:
    calls = make_checkout(tmp_path)
    (tmp_path / "fake-pip").write_text(FAKE_PIP + "exit 1\n")
    env = {**os.environ, "AGUI_SERVE_PIP": str(tmp_path / "fake-pip")}
    script = ". scripts/lib/install-stamp.sh && install_if_changed"
    failed = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, check=False, timeout=60)
    assert failed.returncode != 0
    assert not (tmp_path / ".venv" / ".agui-install-stamp").exists()
    (tmp_path / "fake-pip").write_text(FAKE_PIP)
    install_step(tmp_path)
    assert len(pip_calls(calls)) == 1 + 2  # the failed call, then a full install


def test_serve_uses_the_install_step() -> None:
    script = (REPO_ROOT / "scripts" / "serve").read_text()
    assert ". scripts/lib/install-stamp.sh" in script
    assert "install_if_changed" in script
    assert "pip install" not in script
