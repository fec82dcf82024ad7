"""Shared helpers for integration and e2e tests: request bodies, stream reading, a gunicorn server."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from agui_bridge.demo.testing import free_port
from agui_bridge.protocol.sse_parser import SseMessage, SseParser
from agui_bridge.testing import run_input
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.hub_guard import ENV_NAME as HUB_WATCHDOG_ENV
from tests.support.hub_guard import GUARD, THRESHOLD_MS

REPO_ROOT = Path(__file__).resolve().parents[2]


#: A minimal RunAgentInput as the protocol reference shows it: the same builder users get.
run_body = run_input


def readme_example_body() -> dict[str, Any]:
    """The run input of the README's curl example, as a user copies it."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"curl -N http://127\.0\.0\.1:8000/.*?-d '(\{.*?\})'", readme, re.S)
    assert match, "the README must show a curl -N example"
    body: dict[str, Any] = json.loads(match.group(1))
    return body


def new_thread_id() -> str:
    return str(uuid.uuid4())


def custom(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "CUSTOM" and e["name"] == name]


def a2a_task_state(a2a_url: str, token: str | None, task_id: str) -> str:
    headers = {"A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = requests.post(
        a2a_url,
        json={"jsonrpc": "2.0", "id": "probe", "method": "GetTask", "params": {"id": task_id, "historyLength": 1}},
        headers=headers,
        timeout=5,
    )
    return str(response.json()["result"]["status"]["state"])


def wait_for_task_state(a2a_url: str, token: str | None, task_id: str, state: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    current = ""
    while time.monotonic() < deadline:
        current = a2a_task_state(a2a_url, token, task_id)
        if current == state:
            return current
        time.sleep(0.1)
    return current


class BridgeServer:
    """`agui-bridge serve` (gunicorn + gevent workers) on a free loopback port."""

    def __init__(
        self, a2a_url: str | None, a2a_token: str | None, state_dir: Path, allowed_root: Path | None, **options: Any
    ):
        #: A listening socket the test holds and hands over as systemd's socket activation does (`activated`).
        self.listen_socket: socket.socket | None = options.pop("listen_socket", None)
        #: The loopback address to listen on (a test of several hosts gives each its own: 127.0.0.2, ...).
        self.bind_host: str = options.pop("bind_host", "127.0.0.1")
        self.port = free_port() if self.listen_socket is None else int(self.listen_socket.getsockname()[1])
        self.url = f"http://{self.bind_host}:{self.port}/"
        self.a2a_url = a2a_url
        self.a2a_token = a2a_token
        self.state_dir = state_dir
        self.allowed_root = allowed_root
        # reattach_window 0: a disconnect cancels at once, as the tests written before reattach expect;
        # reattach tests pass their own window.
        self.options = {"workers": 2, "heartbeat_interval": 15, "reattach_window": 0, **options}
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = state_dir.parent / f"bridge-{self.port}.log"

    def start(self) -> BridgeServer:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        if self.allowed_root is not None:
            env["IAC_CODE_AGUI_ALLOWED_CWDS"] = str(self.allowed_root)
        else:
            env.pop("IAC_CODE_AGUI_ALLOWED_CWDS", None)
        if self.a2a_token:
            env["IAC_CODE_AGUI_A2A_TOKEN"] = self.a2a_token
        # Every gevent server of the suite runs the hub watchdog; a report fails the test (tests/support/hub_guard.py).
        env[HUB_WATCHDOG_ENV] = str(THRESHOLD_MS)
        for key, value in self.options.pop("env", {}).items():
            env[key] = value
        args = [sys.executable, "-m", "agui_bridge.cli", "serve", "--host", self.bind_host, "--port", str(self.port)]
        if self.a2a_url is not None:
            args += ["--a2a-url", self.a2a_url]
        args += ["--state-dir", str(self.state_dir)]
        for name, value in self.options.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        inherited: tuple[int, ...] = ()
        if self.listen_socket is not None:
            args, inherited = activated(args, self.listen_socket.fileno()), (self.listen_socket.fileno(),)
        GUARD.watch(self.log_path)
        # The child writes through its own copy of the descriptor: ours closes at once (no ResourceWarning).
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                args, env=env, stdout=log, stderr=log, start_new_session=True, pass_fds=inherited
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"bridge exited: {self.log_path.read_text()[-3000:]}")
            try:
                if requests.get(self.url + "health", timeout=0.5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("bridge did not become ready")

    def stop(self, sig: int = signal.SIGTERM, *, group: bool = True) -> None:
        """Signal the whole process group, or (group=False) only the CLI/gunicorn master."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.process.pid, sig)
            else:
                os.kill(self.process.pid, sig)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        self.process = None
        GUARD.stopped(self.log_path)

    def child_pids(self) -> list[int]:
        assert self.process is not None
        out = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True, check=False)
        return [int(p) for p in out.stdout.split()]

    def managed_child_pid(self) -> int | None:
        for pid in self.child_pids():
            with contextlib.suppress(OSError):
                if b"agui_bridge.demo" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
        return None

    def post(self, body: dict[str, Any], **kwargs: Any) -> requests.Response:
        return requests.post(self.url, json=body, stream=True, timeout=60, **kwargs)

    def run(self, body: dict[str, Any], *, expect: str | None = None) -> list[dict[str, Any]]:
        """POST and read the whole stream; validate it as AG-UI (captured for the Node verifier)."""
        with self.post(body) as response:
            assert response.status_code == 200, response.text
            raw = b"".join(response.iter_content(chunk_size=None))
        return assert_valid_agui_stream(raw, expect_terminal=expect)


def activated(args: list[str], fd: int) -> list[str]:
    """`args` started as systemd's socket activation starts a service: the socket as descriptor 3,
    LISTEN_FDS=1 and LISTEN_PID naming the process itself (the shell's pid, which `exec` keeps; bash, as dash takes no
    descriptor above 9)."""
    handover = "" if fd == 3 else f" 3<&{fd} {fd}<&-"
    return ["bash", "-c", f'export LISTEN_FDS=1 LISTEN_PID=$$; exec "$@"{handover}', "bash", *args]


@contextlib.contextmanager
def bridge_server(*args: Any, **kwargs: Any) -> Iterator[BridgeServer]:
    server = BridgeServer(*args, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()


class StreamReader:
    """Reads one streaming response incrementally with a single underlying iterator, each network read
    once, through the one SSE reader."""

    def __init__(self, response: requests.Response) -> None:
        self.response = response
        self.raw = b""
        self._chunks = response.iter_content(chunk_size=None)
        self._parser = SseParser()
        self._events: list[dict[str, Any]] = []
        #: The `id:` of the last record read (what a reattach sends as `Last-Event-ID`), as the server wrote it.
        self.last_event_id: str | None = None

    def _take(self, messages: list[SseMessage]) -> list[dict[str, Any]]:
        for message in messages:
            self._events.append(json.loads(message.data))
            if message.event_id is not None:
                self.last_event_id = message.event_id.decode()
        return list(self._events)

    def until(self, predicate: Any, timeout_s: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        for chunk in self._chunks:
            self.raw += chunk
            events = self._take(self._parser.feed(chunk))
            if predicate(events) or time.monotonic() > deadline:
                return events
        return self._take(self._parser.close())

    def rest(self) -> bytes:
        for chunk in self._chunks:
            self.raw += chunk
            self._take(self._parser.feed(chunk))
        return self.raw


def read_sse_until(
    response: requests.Response, predicate: Any, timeout_s: float = 20
) -> tuple[bytes, list[dict[str, Any]]]:
    reader = StreamReader(response)
    events = reader.until(predicate, timeout_s)
    return reader.raw, events


def dump(events: list[dict[str, Any]]) -> str:
    return json.dumps(events, indent=1)[:4000]


# --------------------------------------------------------------------------------------------- other WSGI hosts

#: The hosts `WsgiHost` can start, each with the app on the thread back-end.
WSGI_HOSTS = ("gthread", "waitress", "uwsgi", "apache")
HOST_THREADS = 8


class WsgiHost(BridgeServer):
    """`wsgi:app` on a WSGI host other than gunicorn+gevent: one process, HOST_THREADS threads.

    Settings reach the app through the documented IAC_CODE_AGUI_* environment (create_app reads it),
    as in the recipes of deploy/README.md; `env` adds or overrides variables.
    """

    def __init__(
        self, kind: str, a2a_url: str, a2a_token: str | None, state_dir: Path, allowed_root: Path, **env: str
    ) -> None:
        super().__init__(a2a_url, a2a_token, state_dir, allowed_root)
        self.kind = kind
        self.env = env
        self.log_path = state_dir.parent / f"{kind}-{self.port}.log"

    def post(self, body: dict[str, Any], **kwargs: Any) -> requests.Response:
        """Streaming POST with the client bearer token when the host has one (IAC_CODE_AGUI_AUTH_TOKEN)."""
        token = self.env.get("IAC_CODE_AGUI_AUTH_TOKEN")
        if token:
            kwargs["headers"] = {"Authorization": f"Bearer {token}", **kwargs.get("headers", {})}
        return super().post(body, **kwargs)

    def post_json(self, body: dict[str, Any]) -> requests.Response:
        """POST and read the whole (pre-stream error or short stream) response."""
        with self.post(body) as response:
            response.content  # noqa: B018 - read it all before the connection goes back
            return response

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_")}
        env["AGUI_BRIDGE_ENV_FILE"] = os.devnull  # deploy/apache/agui-bridge.wsgi: only this environment
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env.update(
            IAC_CODE_AGUI_HOST="127.0.0.1",
            IAC_CODE_AGUI_PORT=str(self.port),
            IAC_CODE_AGUI_WORKERS="1",
            IAC_CODE_AGUI_A2A_URL=str(self.a2a_url),
            IAC_CODE_AGUI_STATE_DIR=str(self.state_dir),
            IAC_CODE_AGUI_ALLOWED_CWDS=str(self.allowed_root),
            IAC_CODE_AGUI_REATTACH_WINDOW="0",  # a disconnect cancels at once (tests written before reattach)
        )
        if self.a2a_token:
            env["IAC_CODE_AGUI_A2A_TOKEN"] = self.a2a_token
        env.update(self.env)
        return env

    def command(self) -> list[str]:
        bin_dir = Path(sys.executable).parent
        if self.kind == "gthread":
            return [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn-gthread.conf.py",
                    "--threads", str(HOST_THREADS), "wsgi:app"]  # fmt: skip
        if self.kind == "gevent-hub-block":  # the gevent worker, serving tests/support/hub_block_app.py
            return [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "deploy/gunicorn.conf.py",
                "tests.support.hub_block_app:app",
            ]
        if self.kind == "waitress":
            return [sys.executable, "-m", "waitress", f"--listen=127.0.0.1:{self.port}",
                    f"--threads={HOST_THREADS}", "wsgi:app"]  # fmt: skip
        if self.kind == "waitress-drain":
            return [sys.executable, "deploy/waitress_serve.py", "--threads", str(HOST_THREADS)]
        if self.kind == "uwsgi":
            return [str(bin_dir / "uwsgi"), "--ini", "deploy/uwsgi.ini", "--processes", "1",
                    "--threads", str(HOST_THREADS)]  # fmt: skip
        if self.kind == "apache":
            return [apache_binary(), "-f", str(self.apache_config()), "-DFOREGROUND"]
        raise ValueError(self.kind)

    def apache_config(self) -> Path:
        """A minimal httpd.conf around the shipped site file, everything in a directory of this server's own."""
        run = self.state_dir.parent / f"apache-{self.port}"
        run.mkdir(mode=0o755, exist_ok=True)
        modules = Path(apache_module_dir())
        site_packages = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
        daemon = pwd.getpwnam(APACHE_USER) if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
        lines = [
            f"ServerRoot {run}", "ServerName localhost", f"PidFile {run}/httpd.pid", f"ErrorLog {run}/error.log",
            "LogLevel warn", f"DefaultRuntimeDir {run}", f"Mutex file:{run} default",
            *(f"LoadModule {name}_module {modules}/mod_{name}.so" for name in
              ("mpm_event", "authz_core", "authz_host", "env")),
            f"LoadModule wsgi_module {mod_wsgi_path()}",
            f"WSGISocketPrefix {run}/wsgi",
            f"Define AGUI_BRIDGE_HOME {REPO_ROOT}", f"Define AGUI_BRIDGE_SITE_PACKAGES {site_packages}",
            f"Define AGUI_BRIDGE_PORT {self.port}", "Define AGUI_BRIDGE_PROCESSES 1",
            f"Define AGUI_BRIDGE_THREADS {HOST_THREADS}",
            # The daemon's own account: nobody here (httpd's children too), the test's user when not root.
            f"Define AGUI_BRIDGE_USER {daemon.pw_name}", f"Define AGUI_BRIDGE_GROUP #{daemon.pw_gid}",
            f"Define AGUI_BRIDGE_ACCESS_LOG {run}/access.log",
            f"Include {REPO_ROOT}/deploy/apache/agui-bridge.conf",
        ]  # fmt: skip
        if os.geteuid() == 0:  # httpd refuses to serve as root: its children and the daemon become nobody
            lines[1:1] = [f"User {APACHE_USER}", f"Group #{pwd.getpwnam(APACHE_USER).pw_gid}"]
        config = run / "httpd.conf"
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return config

    def stop(self, sig: int = signal.SIGTERM, *, group: bool = True) -> None:
        if self.kind == "apache" and self.process is not None:
            error_log = self.state_dir.parent / f"apache-{self.port}" / "error.log"
            if error_log.exists():
                with self.log_path.open("ab") as log:
                    log.write(error_log.read_bytes())
        super().stop(sig, group=group)

    def start(self) -> WsgiHost:
        if self.kind.startswith("gevent"):
            GUARD.watch(self.log_path)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=REPO_ROOT, env=self.environment(), stdout=log, stderr=log, start_new_session=True
            )
        self.wait_ready()
        return self

    def wait_ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.log_path.read_text()[-3000:]}")
            try:
                if requests.get(self.url + "health", timeout=0.5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.kind} did not become ready: {self.log_path.read_text()[-3000:]}")


# --------------------------------------------------------------------------------------------- Apache httpd

APACHE_USER = "nobody"


def apache_binary() -> str:
    return os.environ.get("AGUI_APACHE2") or shutil.which("apache2") or "/usr/sbin/apache2"


def mod_wsgi_path() -> str:
    return os.environ.get("AGUI_MOD_WSGI") or "/usr/lib/apache2/modules/mod_wsgi.so"


def apache_module_dir() -> str:
    return str(Path(mod_wsgi_path()).parent)


def apache_unavailable() -> str | None:
    """Why the Apache tests cannot run here (None: they can). mod_wsgi embeds the python it was built
    for, so it can load our venv's packages only if that python has the same minor version."""
    if not Path(apache_binary()).exists() or not Path(mod_wsgi_path()).exists():
        return "Apache httpd or mod_wsgi is not installed (bash scripts/install-apache)"
    linked = subprocess.run(["ldd", mod_wsgi_path()], capture_output=True, text=True, check=False).stdout
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if f"libpython{version}.so" not in linked:
        return f"mod_wsgi is built for another python than this venv's {version}"
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam(APACHE_USER)
        except KeyError:
            return f"no user {APACHE_USER} for httpd's children"
        site_packages = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
        needed = [REPO_ROOT / "deploy/apache/agui-bridge.wsgi", REPO_ROOT / "agui_bridge/__init__.py",
                  site_packages / "flask/__init__.py"]  # fmt: skip
        as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "test", "-r"]
        for path in needed:
            if subprocess.run([*as_user, str(path)], check=False).returncode != 0:
                return f"{path} is not readable by {APACHE_USER}, whom httpd's children run as"
    return None
