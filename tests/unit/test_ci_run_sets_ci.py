"""`.ci/run` runs the README's test command with `CI` set, so the "fatal in CI" guards are fatal there."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_ci_entry_with_a_recording_test_script(tmp_path: Path, environment: dict[str, str]) -> str:
    """.ci/run copied into a scratch checkout whose scripts/test only reports the CI it was given."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO_ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test").write_text('printf "%s" "${CI-unset}"\n')
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], env=environment, capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout


def environment_without_ci() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "CI"}


def test_ci_run_exports_ci_when_the_caller_did_not(tmp_path: Path) -> None:
    assert run_ci_entry_with_a_recording_test_script(tmp_path, environment_without_ci()) == "1"


@pytest.mark.parametrize("given", ["true", "1"])
def test_ci_run_keeps_the_ci_value_its_caller_gave(tmp_path: Path, given: str) -> None:
    environment = environment_without_ci() | {"CI": given}
    assert run_ci_entry_with_a_recording_test_script(tmp_path, environment) == given


def test_ci_run_calls_exactly_the_readmes_test_command() -> None:
    assert "bash scripts/test\n```" in (REPO_ROOT / "README.md").read_text()
    assert (REPO_ROOT / ".ci" / "run").read_text().rstrip().endswith("exec bash scripts/test")
