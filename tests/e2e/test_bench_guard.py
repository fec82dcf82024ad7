"""The CI bench guard (`bench/guard.py`, run by `.ci/run`) against real processes: it fails on a build made slower
per event, comparing with the committed `bench/guard-baseline.json`. Whether the real build passes is not asked
here: that is a speed assertion, and the suite runs in parallel; `.ci/run` runs the guard itself after the suite,
and `tests/unit/test_bench_guard_rules.py` covers the pass verdict.

Shorter runs than CI's (two repetitions, a 10,000-delta long turn, 60 short turns) through the same comparison; the
guard compares CPU-time ratios to the reference adapter measured in the same run, so nothing here is timed. The
reference is the real-kernel tier's `iac-code agui`: without it the guard skips locally, and these tests with it;
under `CI` the guard fails instead (bench/README.md#the-ci-guard).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.ci import skip_or_fail_in_ci

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
SHORT_RUN = ["--reps", "2", "--deltas", "10000", "--turns", "60"]
#: CPU burned per projected A2A event in the slowed build: about four times what the bridge spends per event in
#: all, so ratio (a) lands far past its margin however loaded the machine is.
BURN_PER_EVENT_S = 40e-6
SLOWED_PROJECTION = f"""

# ---- injected by tests/e2e/test_bench_guard.py: a build that burns CPU on every projected event ----
import time as _guard_time

_guard_original_project = RunProjector.project


def _guard_slowed_project(self, event, **options):
    deadline = _guard_time.thread_time() + {BURN_PER_EVENT_S!r}
    while _guard_time.thread_time() < deadline:
        pass
    return _guard_original_project(self, event, **options)


RunProjector.project = _guard_slowed_project
"""


def slowed_build(root: Path) -> Path:
    """A copy of the checkout's `agui_bridge` (and what a worker imports beside it) whose per-event projection
    burns CPU: `RunProjector.project` runs for every A2A event of a turn."""
    tree = root / "slowed"
    shutil.copytree(
        REPO_ROOT / "agui_bridge",
        tree / "agui_bridge",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules"),
    )
    for name in ("setup.cfg", "wsgi.py"):
        shutil.copy2(REPO_ROOT / name, tree / name)
    projector = tree / "agui_bridge" / "projection" / "projector.py"
    source = projector.read_text()
    assert "class RunProjector" in source and "    def project(self, event" in source, (
        "RunProjector.project moved: point the slowed build at the per-event projection again"
    )
    projector.write_text(source + SLOWED_PROJECTION)
    return tree


def run_guard(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`bench/guard.py` with the short options, the committed baseline, the caller's environment (CI and
    AGUI_KERNEL_VENV as scripts/test exports them); skips like the guard does when there is no reference."""
    out = tmp_path / "guard.json"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "guard.py"), *SHORT_RUN, "--out", str(out), *options],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    report: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    if report.get("reference_unavailable"):
        skip_or_fail_in_ci(f"the bench guard has no reference adapter: {report['reason']}")
    return done, report


def test_guard_fails_on_a_build_slowed_per_event_naming_the_long_turn_ratio(tmp_path: Path) -> None:
    done, report = run_guard(tmp_path, "--repo-root", str(slowed_build(tmp_path)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bench guard: FAIL: REGRESSED: (a) CPU per event of a long turn, bridge / reference" in done.stdout
    verdicts = {verdict["ratio"]: verdict for verdict in report["verdicts"]}
    assert verdicts["long_turn_cpu_per_event"]["ok"] is False
    assert report["status"] == "fail"
