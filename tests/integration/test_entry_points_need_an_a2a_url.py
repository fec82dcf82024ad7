"""Every entry point refuses to start without an A2A URL, in the same one line: there is no default URL,
and only `agui-bridge serve` starts a managed A2A child of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agui_bridge.app import create_app
from agui_bridge.config import ConfigError
from agui_bridge.config.settings import NO_A2A_URL, Settings
from agui_bridge.demo.testing import free_port
from tests.support.harness import REPO_ROOT

ONE_LINE = f"agui-bridge: {NO_A2A_URL}\n"
BIN = Path(sys.executable).parent


def environment_without_a2a_url(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without any bridge setting, but for a state directory and a free port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IAC_CODE_AGUI_", "AGUI_BRIDGE_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["AGUI_BRIDGE_ENV_FILE"] = os.devnull  # the Apache entry point: only this environment
    env["IAC_CODE_AGUI_STATE_DIR"] = str(tmp_path / "state")
    env["IAC_CODE_AGUI_PORT"] = str(free_port())
    return env


def start(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=REPO_ROOT, env=environment_without_a2a_url(tmp_path),
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("config", ["deploy/gunicorn.conf.py", "deploy/gunicorn-gthread.conf.py"])
def test_gunicorn_with_the_shipped_config_and_no_a2a_url_exits_2_with_one_line(config: str, tmp_path: Path) -> None:
    done = start([str(BIN / "gunicorn"), "-c", config, "wsgi:app"], tmp_path)
    assert (done.returncode, done.stderr) == (2, ONE_LINE)


def test_the_waitress_launcher_without_an_a2a_url_exits_2_with_one_line(tmp_path: Path) -> None:
    done = start([sys.executable, "deploy/waitress_serve.py", "--threads", "4"], tmp_path)
    assert (done.returncode, done.stderr) == (2, ONE_LINE)


@pytest.mark.parametrize(
    "entry", ["import wsgi", "import runpy; runpy.run_path('deploy/apache/agui-bridge.wsgi')"], ids=["wsgi", "apache"]
)
def test_importing_a_wsgi_entry_point_without_an_a2a_url_stops_with_one_line(entry: str, tmp_path: Path) -> None:
    """Status 3: gunicorn's "worker failed to boot", which stops the master instead of forking again."""
    done = start([sys.executable, "-c", entry], tmp_path)
    assert (done.returncode, done.stderr) == (3, ONE_LINE)


def test_uwsgi_with_the_shipped_ini_and_no_a2a_url_stops_instead_of_respawning(tmp_path: Path) -> None:
    """uWSGI starts a worker again after any other exit: wsgi.py leaves with its "failed loading app" status,
    which need-app turns into the end of the instance, after the one line."""
    done = start([str(BIN / "uwsgi"), "--ini", "deploy/uwsgi.ini", "--processes", "1", "--threads", "2"], tmp_path)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 22, lines[-10:]
    assert [line for line in lines if line.startswith("agui-bridge:")] == [ONE_LINE.rstrip("\n")]


def test_create_app_without_an_a2a_url_refuses_instead_of_a_default_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        create_app(Settings(state_dir=tmp_path / "state"))
    assert str(refused.value) == NO_A2A_URL
