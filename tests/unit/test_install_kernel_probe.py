"""scripts/install-kernel repairs a cached kernel venv that lacks what the CI bench guard needs: its probe must be
the guard's own (`bench/guard.py` REFERENCE_IMPORTS), or a venv the script calls complete still fails the guard
(`iac-code agui` serves through `iac_code.agui.server`, not only `iac_code.agui.app`). Read as text: tests import
nothing from bench/ but its pure comparison (bench/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def guard_reference_imports() -> str:
    found = re.search(r'^REFERENCE_IMPORTS = "([^"]+)"$', (ROOT / "bench" / "guard.py").read_text(), re.MULTILINE)
    assert found, "bench/guard.py no longer names its probe REFERENCE_IMPORTS"
    return found.group(1)


def test_install_kernel_probes_a_cached_venv_for_what_the_bench_guard_imports() -> None:
    script = (ROOT / "scripts" / "install-kernel").read_text()
    probes = re.findall(r"\"\$VENV/bin/python\" -c '([^']+)'", script)
    assert probes == [guard_reference_imports()]
    assert "iac_code.agui.server" in probes[0]
