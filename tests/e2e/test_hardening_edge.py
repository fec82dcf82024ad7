"""The edge, end to end through gunicorn with several gevent workers.

Secure by default (docs/design.md#decision-secure-by-default): a public bind without a token is refused at
start; without a token only loopback Host names are served (DNS rebinding); with a token every route but
/health needs it.
One validated configuration: `gunicorn -c deploy/gunicorn.conf.py wsgi:app` validates exactly
like `agui-bridge serve` and hands the result to its workers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import url_for
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.demo.testing import free_port
from agui_bridge.i18n.language import translate
from tests.support.eventually import eventually
from tests.support.harness import REPO_ROOT, bridge_server, new_thread_id, run_body

pytestmark = pytest.mark.e2e

TOKEN = "edge-" + "x" * 24
EMPTY_TOKEN = "auth_token (IAC_CODE_AGUI_AUTH_TOKEN) is set but empty"
CANCEL = "/extensions/iac-code/v1/executions/exec-1/cancel"
STATUS = "/extensions/iac-code/v1/threads/thread-1/status"


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IAC_CODE_AGUI_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited {process.returncode}: {log.read_text()[-3000:]}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(url + "health", timeout=0.5).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError("server did not become ready")


@contextlib.contextmanager
def running(args: list[str], env: dict[str, str], log: Path, url: str) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        process = subprocess.Popen(args, env=env, cwd=REPO_ROOT, stdout=out, stderr=out, start_new_session=True)
    try:
        wait_healthy(url, process, log)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def assert_error(response: requests.Response, status: int, code: str, language: str = "en") -> None:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"] == translate(code.lower(), language)


# ------------------------------------------------------------------ refused start


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--host", "0.0.0.0"], {}, "refusing to listen on 0.0.0.0 without a token"),
        (["--host", "::"], {}, "refusing to listen on :: without a token"),
        (["--host", "0.0.0.0"], {"IAC_CODE_AGUI_AUTH_TOKEN": ""}, EMPTY_TOKEN),
        (["--host", "127.0.0.1"], {"IAC_CODE_AGUI_AUTH_TOKEN": "   "}, EMPTY_TOKEN),
    ],
)
def test_public_bind_without_a_token_exits_2_with_one_line(
    tmp_path: Path, argv: list[str], env: dict[str, str], message: str
) -> None:
    port = free_port()
    args = [sys.executable, "-m", "agui_bridge.cli", "serve", *argv, "--port", str(port), "--workers", "2"]
    args += ["--state-dir", str(tmp_path / "state")]
    done = subprocess.run(args, env=clean_env(**env), capture_output=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    stderr = done.stderr.decode()
    assert stderr.count("\n") == 1 and stderr.startswith("agui-bridge: ") and message in stderr
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/health", timeout=1)
    assert not (tmp_path / "state").exists(), "nothing may start before the configuration is valid"


def test_allow_unauthenticated_starts_with_a_warning_and_keeps_the_host_rule(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    args = [sys.executable, "-m", "agui_bridge.cli", "serve", "--host", "0.0.0.0", "--port", str(port)]
    args += ["--workers", "2", "--a2a-url", demo_url, "--state-dir", str(tmp_path / "state"), "--allow-unauthenticated"]
    log = tmp_path / "bridge.log"
    env = clean_env(IAC_CODE_AGUI_A2A_TOKEN=demo_token)
    with running(args, env, log, url):
        response = requests.post(url, json={}, timeout=10)  # loopback Host: reaches the body checks
        assert response.status_code == 400 and response.json()["error"]["code"] == "INVALID_INPUT"
        refused = requests.post(url, json={}, headers={"Host": f"attacker.example:{port}"}, timeout=10)
        assert_error(refused, 403, "HOST_NOT_ALLOWED")
    text = log.read_text()
    warnings = [line for line in text.splitlines() if "WITHOUT a token" in line]
    assert len(warnings) == 1 and "[WARNING]" in warnings[0], text[-2000:]


# ------------------------------------------------------------------ Host rule without a token


def test_without_a_token_only_loopback_hosts_are_served(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """A DNS-rebinding page reaches 127.0.0.1 but sends its own name as Host: refused on every worker."""
    workspace = tmp_path / "workspace"
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=3) as server:
        port = server.port
        for _ in range(6):  # several connections, so more than one worker answers
            for path, method in (("", "post"), (CANCEL[1:], "post"), (STATUS[1:], "post"), ("metrics", "get")):
                response = requests.request(
                    method, server.url + path, json={}, timeout=10,
                    headers={"Host": f"rebound.attacker.example:{port}", "Accept-Language": "de"},
                )  # fmt: skip
                assert_error(response, 403, "HOST_NOT_ALLOWED", "de")
        for host in (f"evil.example:{port}", "127.0.0.1.nip.io", f"0.0.0.0:{port}", "localhost.evil"):
            assert_error(
                requests.get(server.url + "metrics", headers={"Host": host}, timeout=10), 403, "HOST_NOT_ALLOWED"
            )
        # /health stays open, whatever the Host
        health = requests.get(server.url + "health", headers={"Host": "evil.example"}, timeout=10)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        # loopback names with any port are served
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.2", f"[::1]:{port}", "LOCALHOST"):
            assert requests.get(server.url + "metrics", headers={"Host": host}, timeout=10).status_code == 200
        events = server.run(run_body(new_thread_id(), "hello", workspace), expect="success")
        assert events[-1]["type"] == "RUN_FINISHED"


# ------------------------------------------------------------------ token on every route but /health


def test_token_required_on_every_route_but_health(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    workspace = tmp_path / "workspace"
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": TOKEN}
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=3, env=env) as server:
        for _ in range(4):
            for path, method in (("", "post"), (CANCEL[1:], "post"), (STATUS[1:], "post"), ("metrics", "get")):
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                    response = requests.request(method, server.url + path, json={}, headers=headers, timeout=10)
                    assert_error(response, 401, "UNAUTHORIZED")
        # with a token the Host rule is off (a proxy may forward any name); the token is what protects
        good = {"Authorization": f"Bearer {TOKEN}", "Host": "bridge.example.org"}
        assert requests.get(server.url + "metrics", headers=good, timeout=10).status_code == 200
        assert requests.get(server.url + "health", timeout=10).status_code == 200
        with server.post(run_body(new_thread_id(), "hello", workspace), headers=good) as response:
            assert response.status_code == 200
            assert b"RUN_FINISHED" in b"".join(response.iter_content(chunk_size=None))


def test_every_registered_route_but_health_and_console_files_needs_the_token(settings: Settings) -> None:
    """Walks the app's URL map, so a route added later is covered without editing this test."""
    app = create_app(settings.replace(auth_token=TOKEN, console_enabled=True, metrics_enabled=True))
    client: FlaskClient = app.test_client()
    open_endpoints = {
        "health.health",
        "console.console_page",
        "console.console_static",
        "console.console_vendor",
        "static",
    }
    checked = 0
    for rule in app.url_map.iter_rules():
        if rule.endpoint in open_endpoints:
            continue
        with app.test_request_context():
            arguments: dict[str, Any] = {name: "x" for name in rule.arguments}
            path = url_for(rule.endpoint, **arguments)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            response = client.open(path, method=method, json={})
            assert response.status_code == 401, (method, path, response.data)
            assert response.get_json()["error"]["code"] == "UNAUTHORIZED"
            checked += 1
    assert checked >= 4
    assert client.get("/health").status_code == 200
    page = client.get("/console")
    assert page.status_code == 200 and TOKEN.encode() not in page.data  # a static page; it asks for the token
    assert client.get("/console/static/vendor/purify.es.mjs").status_code == 200  # the libraries it loads


# ------------------------------------------------------------------ the gunicorn config path


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"IAC_CODE_AGUI_METRICS": "flase"}, "IAC_CODE_AGUI_METRICS must be true or false."),
        ({"IAC_CODE_AGUI_INTERRUPT_TTL": "-5"}, "IAC_CODE_AGUI_INTERRUPT_TTL must be a positive number of seconds."),
        ({"IAC_CODE_AGUI_A2A_URL": "http://10.0.0.5:41242/"}, "may connect only to a loopback A2A HTTP(S) URL"),
        ({"IAC_CODE_AGUI_A2A_URL": "http://evil.example\\@127.0.0.1/"}, "backslashes"),
        ({"IAC_CODE_AGUI_HOST": "0.0.0.0"}, "refusing to listen on 0.0.0.0 without a token"),
    ],
)
def test_gunicorn_config_path_refuses_invalid_values(tmp_path: Path, env: dict[str, str], message: str) -> None:
    gunicorn = Path(sys.executable).parent / "gunicorn"
    port = free_port()
    extra = {"IAC_CODE_AGUI_PORT": str(port), "IAC_CODE_AGUI_STATE_DIR": str(tmp_path / "state"), **env}
    done = subprocess.run(
        [str(gunicorn), "-c", "deploy/gunicorn.conf.py", "wsgi:app"],
        env=clean_env(**extra), cwd=REPO_ROOT, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    stderr = done.stderr.decode()
    assert stderr.count("\n") == 1 and stderr.startswith("agui-bridge: ") and message in stderr, stderr


def test_gunicorn_config_path_serves_validated_settings(tmp_path: Path) -> None:
    """Settings reach the workers of `gunicorn -c deploy/gunicorn.conf.py wsgi:app`: token, metrics off."""
    gunicorn = Path(sys.executable).parent / "gunicorn"
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = clean_env(
        IAC_CODE_AGUI_PORT=str(port),
        IAC_CODE_AGUI_WORKERS="2",
        IAC_CODE_AGUI_STATE_DIR=str(tmp_path / "state"),
        IAC_CODE_AGUI_AUTH_TOKEN=TOKEN,
        IAC_CODE_AGUI_METRICS="off",
        IAC_CODE_AGUI_A2A_URL="http://127.0.0.1:9/",  # required to start; these requests never reach it
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    (tmp_path / "metrics").mkdir()
    with running([str(gunicorn), "-c", "deploy/gunicorn.conf.py", "wsgi:app"], env, tmp_path / "g.log", url):
        for _ in range(4):
            assert_error(requests.post(url, json={}, timeout=10), 401, "UNAUTHORIZED")
            metrics = requests.get(url + "metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
            assert metrics.status_code == 404  # METRICS=off reached every worker


# ------------------------------------------------------------------ gunicorn's own log


def test_gunicorn_log_keeps_what_a_client_sent_inert(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """gunicorn quotes bad request lines and header names in its own log (it repr()s them itself; its records
    pass through our formatter too, as every other record of the process does). A guard: what a
    client sent stays inert in the log, where our formatter handles gunicorn's records too."""
    import socket

    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=2) as server:
        for payload in (
            b"G\x1b[2JET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: localhost\r\nX\x1b]0;pwned\x07\xc2\x85Y: y\r\n\r\n",
        ):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(payload)
                assert sock.recv(64).startswith(b"HTTP/1.1 400")

        def both_logged() -> None:
            assert server.log_path.read_bytes().count(b"Invalid request") >= 2

        eventually(both_logged, timeout_s=10, interval_s=0.1)
    log = server.log_path.read_bytes()
    assert log.count(b"Invalid request from ip=127.0.0.1") == 2, log[-2000:]
    for raw in (b"\x1b", b"\x07", b"\xc2\x85"):
        assert raw not in log
    assert b"G\\x1b[2JET" in log and b"\\x07" in log
