"""In a fresh virtual environment `pip install .` pulls neither uvicorn nor a2a-sdk; `.[demo]` pulls both.

pip resolves the whole dependency tree with `--dry-run --report` (nothing is installed), from a copy of
the project so no build files land in the working tree.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_ONLY = {"a2a-sdk", "uvicorn"}


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@pytest.fixture(scope="module")
def fresh_pip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A new venv's python, and a copy of the project's sources and packaging files."""
    root = tmp_path_factory.mktemp("fresh")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=60)
    source = root / "src"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "agui_bridge", source / "agui_bridge", ignore=shutil.ignore_patterns("__pycache__"))
    return root / "venv" / "bin" / "python", source


def _resolved(python: Path, requirement: str, report: Path) -> set[str]:
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), requirement],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    installs = json.loads(report.read_text(encoding="utf-8"))["install"]
    return {_normalise(item["metadata"]["name"]) for item in installs}


def test_a_plain_install_pulls_no_demo_dependency(fresh_pip: tuple[Path, Path], tmp_path: Path) -> None:
    python, source = fresh_pip
    names = _resolved(python, str(source), tmp_path / "plain.json")
    assert "agui-bridge" in names
    assert {"flask", "gunicorn", "gevent", "requests", "marshmallow"} <= names
    assert names & DEMO_ONLY == set()


def test_the_demo_extra_pulls_the_demo_dependencies(fresh_pip: tuple[Path, Path], tmp_path: Path) -> None:
    python, source = fresh_pip
    names = _resolved(python, f"{source}[demo]", tmp_path / "demo.json")
    assert names >= DEMO_ONLY


def test_the_installed_package_ships_the_message_catalogues(fresh_pip: tuple[Path, Path]) -> None:
    """A real (non-editable) install carries `agui_bridge/i18n/catalog/*.json` as package data."""
    python, source = fresh_pip
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(source)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    code = "from agui_bridge.i18n.language import translate; print(translate('unauthorized', 'de'))"
    shown = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, cwd=python.parent)
    assert shown.stdout.strip() == "Ein gültiges Bearer-Token ist erforderlich.", shown.stderr[-2000:]
