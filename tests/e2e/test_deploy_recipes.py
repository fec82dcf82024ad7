"""The recipes of deploy/README.md "From a checkout", run exactly as written, each streaming a turn.

Every block marked `<!-- recipe: NAME -->` is run by `bash -e` as it stands in the README, with only the
documented path variables (`AGUI_HOME`, `AGUI_ENV_FILE`) pointing at a copy of this checkout in a temporary
directory (and `AGUI_DEMO_PORT` at a free port), started from an unrelated directory. After the install block
the README's demo agent block runs, and the env file is filled in as the README's step 2 says (the demo agent's
URL and token, a client token; a temporary port, state directory and workspace root). One scratch virtualenv
serves every host, as the recipes share their install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sysconfig
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import requests

from agui_bridge.demo.testing import free_port
from tests.support.agui_checks import assert_valid_agui_stream, event_types
from tests.support.harness import REPO_ROOT, new_thread_id, run_body
from tests.support.hub_guard import ENV_NAME as HUB_WATCHDOG_ENV
from tests.support.hub_guard import GUARD, THRESHOLD_MS
from tests.support.recipes import DEMO_RECIPE, DEMO_TOKEN, HOST_RECIPES, deploy_recipes

#: A scratch virtualenv and pip installs from the (warm) cache: minutes, not the default 120 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CLIENT_TOKEN = "recipe-client-token"
#: Recipes whose server runs gevent workers: the suite's hub watchdog reads their logs.
GEVENT_RECIPES = frozenset({"gunicorn"})
#: Bounded waits: a host block may pip-install its server first.
READY_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 90.0
#: Not copied with the checkout: what a fresh clone does not have either.
NOT_IN_A_CHECKOUT = shutil.ignore_patterns(
    ".venv", ".git", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.egg-info",
    "build", "artifacts",
)  # fmt: skip


@dataclass(frozen=True)
class Scratch:
    """The copy of the checkout, its env file as installed from the example, and the recipes' environment."""

    home: Path
    env_file: Path
    example_as_installed: str
    state_dir: Path
    workspace: Path
    logs: Path
    elsewhere: Path
    environment: Mapping[str, str]
    demo_url: str


def recipe_environment(home: Path, env_file: Path, demo_port: int) -> dict[str, str]:
    """The caller's environment without the bridge's settings or this checkout's venv: only what the README sets."""
    own_venv = str(REPO_ROOT / ".venv")
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "AGUI_HOME", "AGUI_ENV_FILE")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_") and k not in drop}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(own_venv))
    env.update(AGUI_HOME=str(home), AGUI_ENV_FILE=str(env_file), AGUI_DEMO_PORT=str(demo_port))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_recipe(scratch: Scratch, *names: str, log_name: str) -> subprocess.CompletedProcess[str]:
    """The `variables` block and then the named blocks, in one `bash -e`, from an unrelated directory."""
    recipes = deploy_recipes()
    script = "".join(recipes[name] for name in ("variables", *names))
    with (scratch.logs / log_name).open("w", encoding="utf-8") as log:
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=scratch.elsewhere,
            env=dict(scratch.environment),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            timeout=READY_TIMEOUT_S,
        )


def fill_in_env_file(scratch: Scratch, port: int) -> None:
    """Step 2 of the README, as an operator does it: the installed example plus the values of this host."""
    filled = {
        "IAC_CODE_AGUI_A2A_URL": scratch.demo_url,
        "IAC_CODE_AGUI_A2A_TOKEN": DEMO_TOKEN,
        "IAC_CODE_AGUI_AUTH_TOKEN": CLIENT_TOKEN,
        "IAC_CODE_AGUI_PORT": str(port),
        "IAC_CODE_AGUI_STATE_DIR": str(scratch.state_dir),
        "IAC_CODE_AGUI_ALLOWED_CWDS": str(scratch.workspace),
        "IAC_CODE_AGUI_WORKERS": "1",
        HUB_WATCHDOG_ENV: str(THRESHOLD_MS),
    }
    lines = "".join(f"{key}={value}\n" for key, value in filled.items())
    scratch.env_file.write_text(scratch.example_as_installed + "\n# filled in\n" + lines, encoding="utf-8")


def log_tail(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-4000:] if path.exists() else "(no log)"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    """A copy of the checkout installed by the README's `install` block, its demo agent started by its own block,
    the env file filled in, then the `state` block."""
    root = tmp_path_factory.mktemp("recipes")
    home = root / "checkout"
    shutil.copytree(REPO_ROOT, home, ignore=NOT_IN_A_CHECKOUT)
    env_file = root / "etc" / "agui-bridge.env"
    logs = root / "logs"
    elsewhere = root / "elsewhere"
    for directory in (logs, elsewhere):
        directory.mkdir()
    demo_port = free_port()
    scratch = Scratch(
        home, env_file, "", root / "state", root / "workspaces", logs, elsewhere,
        recipe_environment(home, env_file, demo_port), f"http://127.0.0.1:{demo_port}/",
    )  # fmt: skip
    installed = run_recipe(scratch, "install", log_name="install.log")
    assert installed.returncode == 0, log_tail(logs / "install.log")
    scratch = replace(scratch, example_as_installed=env_file.read_text(encoding="utf-8"))
    demo = start_blocks(scratch, ("variables", DEMO_RECIPE), logs / "demo-agent.log")
    try:
        wait_until_healthy(scratch.demo_url, demo)
        fill_in_env_file(scratch, free_port())
        prepared = run_recipe(scratch, "state", log_name="state.log")
        assert prepared.returncode == 0, log_tail(logs / "state.log")
        yield scratch
    finally:
        stop_group(demo.process)


def test_the_install_block_copies_the_env_example_private(scratch: Scratch) -> None:
    example = (REPO_ROOT / "deploy" / "agui-bridge.env.example").read_text(encoding="utf-8")
    assert scratch.example_as_installed == example
    assert stat.S_IMODE(scratch.env_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(scratch.env_file.parent.stat().st_mode) == 0o700


def test_the_state_block_leaves_a_private_state_directory_that_doctor_accepts(scratch: Scratch) -> None:
    assert stat.S_IMODE(scratch.state_dir.stat().st_mode) == 0o700
    assert scratch.workspace.is_dir()
    doctor = log_tail(scratch.logs / "state.log")
    assert "FAIL" not in doctor and "ok    state-private" in doctor and "ok    upstream-a2a" in doctor, doctor


def uwsgi_unbuildable() -> str | None:
    """Why `pip install uwsgi` cannot build here (None: it can): it compiles against Python's headers."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        return "no C compiler: pip builds uWSGI from source (apt-get install gcc python3-dev)"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers: pip builds uWSGI from source (apt-get install python3-dev)"
    return None


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Running:
    process: subprocess.Popen[bytes]
    log_path: Path


def start_blocks(scratch: Scratch, names: Sequence[str], log_path: Path) -> Running:
    """Blocks ending in a server, in `bash -e` in a session of their own (stopped by `stop_group`)."""
    script = "".join(deploy_recipes()[name] for name in names)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", script], cwd=scratch.elsewhere, env=dict(scratch.environment),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return Running(process, log_path)


@contextlib.contextmanager
def running(scratch: Scratch, name: str, port: int) -> Iterator[Running]:
    """The host's block after the variables, its env file on `port`; SIGTERM to the whole group at the end."""
    fill_in_env_file(scratch, port)
    log_path = scratch.logs / f"{name}.log"
    if name in GEVENT_RECIPES:
        GUARD.watch(log_path)
    server = start_blocks(scratch, ("variables", name), log_path)
    try:
        yield server
    finally:
        stop_group(server.process)
        if name in GEVENT_RECIPES:
            GUARD.stopped(log_path)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the recipe's process group, then wait (bounded) until every process of it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        process.poll()
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


def wait_until_healthy(url: str, server: Running) -> None:
    """Until /health answers; the recipe ending first (a failed step under `bash -e`) fails at once."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            if requests.get(url + "health", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    ended = server.process.poll()
    what = f"ended with status {ended}" if ended is not None else "never answered /health"
    pytest.fail(f"the recipe {what}:\n{log_tail(server.log_path)}")


@pytest.mark.parametrize("name", HOST_RECIPES)
def test_each_host_recipe_streams_a_turn(scratch: Scratch, name: str) -> None:
    if name == "uwsgi" and (reason := uwsgi_unbuildable()):
        if running_in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with running(scratch, name, port) as server:
        wait_until_healthy(url, server)
        body = run_body(new_thread_id(), "say hi", scratch.workspace)
        headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
        with requests.post(url, json=body, headers=headers, stream=True, timeout=60) as response:
            assert response.status_code == 200, response.text
            raw = b"".join(response.iter_content(chunk_size=None))
    events = assert_valid_agui_stream(raw, expect_terminal="success")
    assert "TEXT_MESSAGE_CONTENT" in event_types(events)
