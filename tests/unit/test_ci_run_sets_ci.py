"""`.ci/run` runs the README's test command with `CI` set, so the "fatal in CI" guards are fatal there, and then
the bench guard, whose failure fails CI as the suite's does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def scratch_checkout(tmp_path: Path, *, suite_status: int = 0, guard_status: int = 0) -> Path:
    """.ci/run copied into a scratch checkout whose scripts/test only reports the CI it was given and exits with
    `suite_status`, and whose bench/guard notes that it ran (in a file) and exits with `guard_status`."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO_ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test").write_text(f'printf "%s" "${{CI-unset}}"\nexit {suite_status}\n')
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "guard").write_text(f'echo ran > "$(dirname "$0")/guard-ran"\nexit {guard_status}\n')
    return tmp_path


def run_ci_entry(checkout: Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(checkout / ".ci" / "run")], env=environment, capture_output=True, text=True, timeout=30
    )


def run_ci_entry_with_a_recording_test_script(tmp_path: Path, environment: dict[str, str]) -> str:
    done = run_ci_entry(scratch_checkout(tmp_path), environment)
    assert done.returncode == 0, done.stderr
    return done.stdout


def environment_without_ci() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "CI"}


def test_ci_run_exports_ci_when_the_caller_did_not(tmp_path: Path) -> None:
    assert run_ci_entry_with_a_recording_test_script(tmp_path, environment_without_ci()) == "1"


@pytest.mark.parametrize("given", ["true", "1"])
def test_ci_run_keeps_the_ci_value_its_caller_gave(tmp_path: Path, given: str) -> None:
    environment = environment_without_ci() | {"CI": given}
    assert run_ci_entry_with_a_recording_test_script(tmp_path, environment) == given


def test_ci_run_calls_exactly_the_readmes_test_command_then_the_bench_guard() -> None:
    assert "bash scripts/test\n```" in (REPO_ROOT / "README.md").read_text()
    commands = [
        line.split("#", 1)[0].strip()
        for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-2:] == ["bash scripts/test", "exec bash bench/guard"]


def test_a_failing_suite_fails_ci_with_its_status_and_the_guard_does_not_run(tmp_path: Path) -> None:
    checkout = scratch_checkout(tmp_path, suite_status=3)
    assert run_ci_entry(checkout, environment_without_ci()).returncode == 3
    assert not (checkout / "bench" / "guard-ran").exists()


@pytest.mark.parametrize("guard_status", [0, 1, 2])
def test_ci_run_ends_with_the_bench_guards_status_after_a_passing_suite(tmp_path: Path, guard_status: int) -> None:
    checkout = scratch_checkout(tmp_path, guard_status=guard_status)
    assert run_ci_entry(checkout, environment_without_ci()).returncode == guard_status
    assert (checkout / "bench" / "guard-ran").read_text() == "ran\n"
