"""Fixtures of the e2e tier shared by several of its modules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import headless_chromium


@pytest.fixture
def driver() -> Iterator[Any]:
    """Headless Chromium for the console's browser tests (skipped without a browser unless CI is set)."""
    with headless_chromium() as browser:
        yield browser
