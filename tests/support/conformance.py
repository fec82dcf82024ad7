"""Session-level AG-UI conformance: replay every accepted stream through ``@ag-ui/client`` 1.0.

Wiring: ``tests/conftest.py`` lists this module in ``pytest_plugins``, which registers the fixture
and the session hooks below.

How it works:

* ``pytest_sessionstart`` picks the capture directory -- ``$AGUI_CAPTURE_DIR`` if set, else
  ``tests/artifacts/streams/`` (git-ignored; upload it as a CI artifact) -- deletes the ``*.sse``
  files a previous session left there, and hands it to :mod:`tests.support.agui_checks`.
* Every stream that passes ``tests.support.agui_checks.assert_valid_agui_stream`` is written there
  (exact bytes; gunicorn e2e tests pass ``resp.raw.read()`` / ``resp.content``).
* ``pytest_sessionfinish`` runs ``node tests/conformance/verify_streams.mjs --quiet <dir>`` once
  for all captured streams. Any rejected stream fails the session (exit status 1) and its file,
  stage and error are printed. If ``node`` or ``tests/conformance/node_modules`` is missing the
  session fails when ``CI`` is truthy and only warns locally. Install with
  ``npm ci --prefix tests/conformance``.
* ``AGUI_NODE_VERIFY=0`` skips the Node replay (a notice is printed). Under pytest-xdist only the
  controller replays; all workers must then share ``AGUI_CAPTURE_DIR``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support import agui_checks

__all__ = [
    "CONFORMANCE_DIR",
    "NodeVerifyResult",
    "agui_capture_dir",
    "conformance_sessionfinish",
    "conformance_sessionstart",
    "node_verifier_available",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "run_node_verifier",
]

TESTS_DIR = Path(__file__).resolve().parents[1]
CONFORMANCE_DIR = TESTS_DIR / "conformance"
VERIFY_SCRIPT = CONFORMANCE_DIR / "verify_streams.mjs"
NODE_MODULES = CONFORMANCE_DIR / "node_modules"
DEFAULT_CAPTURE_DIR = TESTS_DIR / "artifacts" / "streams"
NODE_TIMEOUT_S = 600
_TRUTHY = {"1", "true", "yes", "on"}


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


def in_ci() -> bool:
    return _env_true("CI")


def _capture_dir_from_env() -> Path:
    env = os.environ.get(agui_checks.CAPTURE_ENV)
    return Path(env).resolve() if env else DEFAULT_CAPTURE_DIR


def node_verifier_available() -> str | None:
    """None if ``node`` and the installed ``@ag-ui/client`` are present, else the reason."""
    if shutil.which("node") is None:
        return "`node` is not on PATH"
    if not (NODE_MODULES / "@ag-ui" / "client" / "package.json").is_file():
        return f"{NODE_MODULES} is missing (run `npm ci --prefix tests/conformance`)"
    return None


@dataclass
class NodeVerifyResult:
    returncode: int
    results: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if not r.get("ok")]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.failures


def run_node_verifier(
    paths: list[Path] | list[str], *, official_only: bool = False, quiet: bool = False
) -> NodeVerifyResult:
    """Run verify_streams.mjs over files/directories; one parsed JSON result per reported file."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("`node` is not on PATH")
    cmd = [node, str(VERIFY_SCRIPT)]
    if official_only:
        cmd.append("--official-only")
    if quiet:
        cmd.append("--quiet")
    cmd.extend(str(p) for p in paths)
    proc = subprocess.run(cmd, cwd=CONFORMANCE_DIR, capture_output=True, text=True, timeout=NODE_TIMEOUT_S, check=False)
    results: list[dict[str, Any]] = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            results.append(json.loads(line))
    return NodeVerifyResult(returncode=proc.returncode, results=results, stderr=proc.stderr)


def _write(session: pytest.Session, lines: list[str], *, red: bool = False) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        for line in lines:
            print(line, file=sys.stderr)
        return
    reporter.write("\n")
    reporter.write_sep("-", "AG-UI conformance", red=red, bold=red)
    for line in lines:
        reporter.write_line(line, red=red, bold=red)


def conformance_sessionstart(session: pytest.Session) -> Path:
    directory = _capture_dir_from_env()
    if not hasattr(session.config, "workerinput"):  # xdist workers must not wipe the controller's
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.sse"):
            stale.unlink()
    agui_checks.set_capture_dir(directory)
    return directory


def conformance_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    directory = agui_checks.get_capture_dir() or _capture_dir_from_env()
    captured = sorted(directory.glob("*.sse")) if directory.is_dir() else []
    if not captured:
        return
    header = f"AG-UI conformance (@ag-ui/client 1.0 verifier): {len(captured)} streams in {directory}"
    if os.environ.get("AGUI_NODE_VERIFY", "").strip().lower() in {"0", "off", "false", "no"}:
        _write(session, [f"{header}: SKIPPED (AGUI_NODE_VERIFY=0)"])
        return
    missing = node_verifier_available()
    if missing is not None:
        if in_ci():
            _write(session, [f"{header}: CANNOT RUN in CI: {missing}"], red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        else:
            _write(session, [f"{header}: not run locally: {missing}"])
        return
    try:
        outcome = run_node_verifier([directory], quiet=True)
    except (OSError, subprocess.SubprocessError) as exc:
        _write(session, [f"{header}: verifier did not run: {exc}"], red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    if outcome.ok:
        _write(session, [f"{header}: all accepted"])
        return
    lines = [f"{header}: {len(outcome.failures)} REJECTED"]
    for failure in outcome.failures:
        error = str(failure.get("error"))
        lines.append(f"  {Path(str(failure.get('file'))).name} [{failure.get('stage')}]: {error[:600]}")
    if not outcome.failures:
        lines.append(f"  verifier exited {outcome.returncode}: {outcome.stderr.strip()[:2000]}")
    _write(session, lines, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    conformance_sessionstart(session)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    conformance_sessionfinish(session)


@pytest.fixture(scope="session")
def agui_capture_dir() -> Path:
    """The directory accepted streams are captured into for the session-end Node replay."""
    directory = agui_checks.get_capture_dir()
    if directory is None:  # hooks not wired: fall back to the same default
        directory = _capture_dir_from_env()
        directory.mkdir(parents=True, exist_ok=True)
        agui_checks.set_capture_dir(directory)
    return directory
