"""Fixtures shared by every test layer, built on the project's own pytest plugin (`agui_bridge.testing`).

The plugin (loaded through its `pytest11` entry point, exactly as a user's project loads it) runs the
demo A2A agent once per session in a subprocess (real a2a-sdk server over real HTTP) with a random
token, and builds the in-process app on the thread back-end (the legacy-WSGI path); the names below are
the project's historical aliases. e2e tests run gunicorn with gevent workers (the production path) and
the other WSGI hosts (tests/e2e/test_hosts_*.py), so both back-ends are covered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from agui_bridge.config.settings import Settings
from agui_bridge.runs.registry import PROCESS_RUNS
from agui_bridge.testing import AguiClient, Upstream
from tests.support.eventually import eventually
from tests.support.hub_guard import GUARD

#: Fixtures and session hooks shared as plugins (instead of star imports).
pytest_plugins = ["tests.support.conformance", "tests.support.message_key_check"]


@pytest.fixture(scope="session")
def demo_token(agui_a2a: Upstream) -> str:
    assert agui_a2a.token, "the project's tests run the demo agent with bearer auth on"
    return agui_a2a.token


@pytest.fixture(scope="session")
def demo_url(agui_a2a: Upstream) -> str:
    return agui_a2a.url


@pytest.fixture
def workspace(agui_workspace: Path) -> Path:
    return agui_workspace


@pytest.fixture
def state_dir(agui_state_dir: Path) -> Path:
    return agui_state_dir


@pytest.fixture
def settings(agui_settings: Settings) -> Settings:
    return agui_settings


@pytest.fixture
def app(agui_app: Flask) -> Flask:
    return agui_app


@pytest.fixture
def client(agui_client: AguiClient) -> FlaskClient:
    return agui_client.flask


def _fail_on_hub_reports() -> None:
    reports = GUARD.collect()
    if reports:
        described = "\n\n".join(report.describe(GUARD.running_at(report.blocked_since)) for report in reports)
        pytest.fail(f"the hub watchdog reported {len(reports)} stall(s):\n{described}", pytrace=False)


@pytest.fixture(autouse=True)
def hub_watchdog_reports(request: pytest.FixtureRequest) -> Iterator[None]:
    """A gevent server's hub stall fails the test that ran when it was reported (tests/support/hub_guard.py)."""
    GUARD.test_started(request.node.nodeid)
    yield
    _fail_on_hub_reports()


@pytest.fixture(autouse=True, scope="module")
def hub_watchdog_reports_of_module_servers() -> Iterator[None]:
    """Torn down after the module's own servers stopped: what they logged last fails the module's last test."""
    yield
    _fail_on_hub_reports()


def _streams_held() -> tuple[int, int, int, int]:
    return (PROCESS_RUNS.active, PROCESS_RUNS.admitting, PROCESS_RUNS.followers, len(PROCESS_RUNS.snapshot()))


@pytest.fixture(autouse=True)
def streams_give_their_place_back() -> Iterator[None]:
    """Every stream a test opens in this process is closed by its end: the worker's one registry is shared by
    every app of the process (docs/design.md#run-built-once), so a body left open would hold a place in the
    stream cap of the tests after it. WSGI servers close every body; a test-client test must do the same."""
    before = _streams_held()
    yield

    def returned() -> None:
        assert _streams_held() == before, "a stream of this test is still open (active, admitting, followers, leased)"

    eventually(returned, timeout_s=5)


@pytest.fixture(autouse=True)
def package_logger_restored() -> Iterator[None]:
    """A test that sets the process up (`configure_process`, `configure_logging`) changes the package logger for
    the whole process: its level, handlers and propagation are put back afterwards, so the tests after it see
    the bare app factory's logging (docs/design.md#process-setup) whatever ran before them."""
    logger = logging.getLogger("agui_bridge")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    yield
    logger.setLevel(saved[0])
    logger.propagate = saved[1]
    logger.handlers[:] = saved[2]
