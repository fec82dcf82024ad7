"""Fixtures of the real-kernel tier: one scripted LLM and one `iac-code a2a` kernel per session.

The kernel is installed by `scripts/install-kernel` (called from `scripts/test`). Without it the tier is
skipped locally and fails in CI (`CI` set), like the browser tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel.fake_llm import ScriptedLLM
from tests.kernel.kernel_harness import Kernel, kernel_bin, kernel_venv, running_kernel


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.kernel)
            item.add_marker(pytest.mark.e2e)  # gunicorn too: `-m "not e2e"` skips the tier as well


@pytest.fixture(scope="session")
def iac_code_bin() -> Path:
    binary = kernel_bin()
    if binary is None:
        reason = f"iac-code is not installed in {kernel_venv()} (run scripts/install-kernel)"
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on"):
            pytest.fail(reason)
        pytest.skip(reason)
    return binary


@pytest.fixture(scope="session")
def kernel_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel")


@pytest.fixture(scope="session")
def scripted_llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="session")
def kernel(iac_code_bin: Path, kernel_root: Path, scripted_llm: ScriptedLLM) -> Iterator[Kernel]:
    with running_kernel(iac_code_bin, kernel_root / "home", scripted_llm.base_url, kernel_root) as running:
        yield running
