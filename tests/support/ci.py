"""The repository's one rule for optional tools: a test tier whose tool is missing skips locally and fails
when the `CI` environment variable is set (scripts/test installs every tool there, so a skip would hide it)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def ci_is_set() -> bool:
    """True when `CI` is set to anything but an empty or false-looking value."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def skip_or_fail_in_ci(missing: str) -> NoReturn:
    """Skip the test because `missing` says what is absent; fail it instead when CI is set."""
    if ci_is_set():
        pytest.fail(f"{missing}; CI is set, so this test may not be skipped")
    pytest.skip(missing)
