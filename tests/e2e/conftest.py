"""Fixtures of the e2e tier shared by several of its modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import headless_chromium
from tests.support.chat import chat_bridge_server
from tests.support.harness import BridgeServer


@pytest.fixture
def driver() -> Iterator[Any]:
    """Headless Chromium for the console's browser tests (skipped without a browser unless CI is set)."""
    with headless_chromium() as browser:
        yield browser


@pytest.fixture
def chat_bridge(demo_url: str, demo_token: str, state_dir: Path, tmp_path: Path) -> Iterator[BridgeServer]:
    """The bridge the `agui-bridge chat` tests talk to (a pseudo-terminal's and tmux's)."""
    with chat_bridge_server(demo_url, demo_token, state_dir, tmp_path) as server:
        yield server
