"""Fixtures shared by every test layer.

The demo A2A agent runs once per session in a subprocess (real a2a-sdk server over real HTTP).
In-process tests use the thread back-end (the legacy-WSGI path); e2e tests run gunicorn with
gevent workers (the production path), so both back-ends are covered.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.demo.testing import running_demo_agent
from agui_bridge.settings import Settings

#: Fixtures and session hooks shared as plugins (instead of star imports).
pytest_plugins = ["tests.conftest_conformance", "tests.message_key_check"]


@pytest.fixture(scope="session")
def demo_token() -> str:
    return "demo-" + secrets.token_urlsafe(16)


@pytest.fixture(scope="session")
def demo_url(demo_token: str) -> Iterator[str]:
    with running_demo_agent(demo_token) as url:
        yield url


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def settings(tmp_path: Path, state_dir: Path, demo_url: str, demo_token: str) -> Settings:
    return Settings(
        state_dir=state_dir,
        a2a_url=demo_url,
        a2a_token=demo_token,
        allowed_cwds=(tmp_path,),
        runtime_backend="threads",
        heartbeat_interval_s=15.0,
    )


@pytest.fixture
def app(settings: Settings) -> Flask:
    return create_app(settings)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
