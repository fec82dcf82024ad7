"""agui-bridge installed as a user installs it, without the `demo` extra, into a venv of its own.

The venv is plain (no system site-packages, so the demo agent's a2a-sdk and uvicorn cannot leak in): the
runtime pins of requirements.txt, pytest, and the package itself with `--no-deps`, built from a copy of the
sources. pip's cache makes this a matter of seconds on a warm machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agui_bridge.testing import NO_UPSTREAM
from tests.support.harness import REPO_ROOT

pytestmark = pytest.mark.e2e

#: What the package build reads: setup.cfg takes the long description from the README.
SOURCES = ("agui_bridge", "setup.cfg", "pyproject.toml", "README.md")
#: The `demo` extra's distributions (requirements-demo.txt): never in this venv.
DEMO_ONLY = ("a2a-sdk", "uvicorn")
PIP = ("-m", "pip", "--disable-pip-version-check", "install", "--root-user-action=ignore")
SECTION = "## Testing your integration in-process"


@dataclass(frozen=True)
class ScratchInstall:
    python: Path
    install_output: str  # `pip install -v` of the package: its build backend's output included


def runtime_requirements() -> list[str]:
    """requirements.txt's pins, without anything of the demo extra."""
    lines = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    pins = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return [pin for pin in pins if not pin.lower().startswith(DEMO_ONLY)]


def pytest_pin() -> str:
    dev = (REPO_ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    match = re.search(r"^pytest==\S+$", dev, re.M)
    assert match, "requirements-dev.txt pins pytest"
    return match.group(0)


def clean_environment() -> dict[str, str]:
    """No PYTHONPATH (it would reach this checkout) and no test upstream of the outer run."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV"} and not key.startswith(("PYTEST_", "IAC_CODE_AGUI_"))
    }


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=clean_environment(), capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> ScratchInstall:
    root = tmp_path_factory.mktemp("scratch-install")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        origin = REPO_ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    made = run([sys.executable, "-m", "venv", str(root / "venv")], root)
    assert made.returncode == 0, made.stderr
    python = root / "venv" / "bin" / "python"
    dependencies = run([str(python), *PIP, "-q", *runtime_requirements(), pytest_pin()], root)
    assert dependencies.returncode == 0, dependencies.stdout[-3000:] + dependencies.stderr[-3000:]
    package = run([str(python), *PIP, "-v", "--no-deps", str(source)], root)
    assert package.returncode == 0, package.stdout[-3000:] + package.stderr[-3000:]
    for module in ("a2a", "uvicorn"):  # the premise: nothing of the demo extra is importable
        probe = run([str(python), "-c", f"import {module}"], root)
        assert probe.returncode != 0, f"{module} leaked into the scratch venv"
    return ScratchInstall(python, package.stdout + package.stderr)


def test_installing_the_package_prints_no_setuptools_warning(scratch: ScratchInstall) -> None:
    """A data directory missing from the packages configuration was a setuptools warning on every install."""
    warnings = [line.strip() for line in scratch.install_output.splitlines() if "Warning:" in line]
    assert warnings == []


def test_the_readme_plugin_example_without_the_demo_extra_fails_naming_what_to_install(
    scratch: ScratchInstall, tmp_path: Path
) -> None:
    """Never `1 skipped` and a green CI: an error that says `pip install 'agui-bridge[demo]'` or `--agui-a2a-url`."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8").split(SECTION, 1)[1]
    example = re.search(r"```python\n(.*?)```", readme, re.S)
    assert example, "the README's plugin section shows a python example"
    assert NO_UPSTREAM in " ".join(readme.split()), "the README's plugin section quotes the failure"
    (tmp_path / "test_user_example.py").write_text(example.group(1), encoding="utf-8")
    done = run([str(scratch.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user_example.py"], tmp_path)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert NO_UPSTREAM in done.stdout, done.stdout[-3000:]
    assert "pip install 'agui-bridge[demo]'" in NO_UPSTREAM and "--agui-a2a-url" in NO_UPSTREAM
    assert re.search(r"\b1 error\b", done.stdout) and "skipped" not in done.stdout, done.stdout[-2000:]
