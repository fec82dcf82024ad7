"""Restarts that refuse no one (docs/operations.md#restarts).

Clients keep starting runs while the server is stopped and started again: with the listening socket held
across the restart (systemd socket activation, gunicorn's USR2 re-exec), every run is served, none is refused
and none gets 503; a draining worker leaves new connections in the backlog for the next instance. Without a
held socket (gunicorn started directly, then stopped), new connections are refused while active runs finish.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from agui_bridge.demo.testing import free_port
from tests.support.agui_checks import TERMINAL_EVENT_TYPES, assert_valid_agui_stream
from tests.support.eventually import eventually
from tests.support.harness import REPO_ROOT, BridgeServer, StreamReader, new_thread_id, run_body
from tests.support.hub_guard import ENV_NAME as HUB_WATCHDOG_ENV
from tests.support.hub_guard import GUARD, THRESHOLD_MS
from tests.support.nginx import private_nginx, require_nginx
from tests.support.processes import gone, running

pytestmark = pytest.mark.e2e

#: How long a started run may wait in the backlog while one instance stops and the next boots.
RUN_TIMEOUT_S = 90.0
#: Every client loop ends by itself after this long, whatever the test does.
CLIENT_LOOP_LIMIT_S = 150.0


@dataclass
class RunClients:
    """A few clients that start short runs one after the other until told to stop (bounded in time)."""

    url: str
    workspace: Path
    count: int = 3
    outcomes: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> RunClients:
        for _ in range(self.count):
            thread = threading.Thread(target=self._loop, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _loop(self) -> None:
        ends = time.monotonic() + CLIENT_LOOP_LIMIT_S
        while not self._stop.is_set() and time.monotonic() < ends:
            outcome = self.one_run()
            with self._lock:
                self.outcomes.append(outcome)

    def one_run(self) -> str:
        """ "served" for a whole AG-UI stream ending in RUN_FINISHED, else what the client saw."""
        body = run_body(new_thread_id(), "hello", self.workspace)
        try:
            with requests.post(self.url, json=body, stream=True, timeout=RUN_TIMEOUT_S) as response:
                raw = b"".join(response.iter_content(chunk_size=None))
                if response.status_code != 200:
                    return f"{response.status_code} {raw[:200]!r}"
        except requests.RequestException as exc:
            return f"{type(exc).__name__}: {exc}"
        events = assert_valid_agui_stream(raw)
        return "served" if events[-1]["type"] == "RUN_FINISHED" else json.dumps(events[-1])[:300]

    def served(self) -> int:
        with self._lock:
            return self.outcomes.count("served")

    def stop(self) -> list[str]:
        self._stop.set()
        for thread in self._threads:
            thread.join(RUN_TIMEOUT_S + 5)
        with self._lock:
            return list(self.outcomes)


def wait_for_more_runs(clients: RunClients, more: int, timeout_s: float = 60.0) -> None:
    """Let the clients get `more` runs served after this point (the new instance is serving)."""
    target = clients.served() + more

    def enough() -> None:
        assert clients.served() >= target, clients.outcomes[-5:]

    eventually(enough, timeout_s=timeout_s, interval_s=0.1)


@contextlib.contextmanager
def held_listening_socket() -> Iterator[socket.socket]:
    """The socket systemd's .socket unit would hold: bound and listening before any server starts."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    try:
        yield listener
    finally:
        listener.close()


@pytest.mark.parametrize("through", ["direct", "nginx"])
def test_socket_activated_restart_serves_every_run_started_meanwhile(
    tmp_path: Path, demo_url: str, demo_token: str, through: str
) -> None:
    """Directly, and through the shipped nginx site (whose pooled upstream connections the drain closes)."""
    if through == "nginx":
        require_nginx()
    state = tmp_path / "state"
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(held_listening_socket())
        first = BridgeServer(demo_url, demo_token, state, tmp_path, listen_socket=listener).start()
        stack.callback(first.stop, signal.SIGKILL)
        url = first.url
        if through == "nginx":
            url = stack.enter_context(private_nginx(first.port, tmp_path / "nginx")) + "/"
        clients = RunClients(url, tmp_path).start()
        try:
            wait_for_more_runs(clients, 6)
            first.stop(signal.SIGTERM, group=False)  # the service stops; the socket stays with "systemd"
            second = BridgeServer(demo_url, demo_token, state, tmp_path, listen_socket=listener).start()
            stack.callback(second.stop)
            wait_for_more_runs(clients, 6)
        finally:
            outcomes = clients.stop()
    assert outcomes and all(outcome == "served" for outcome in outcomes), [o for o in outcomes if o != "served"]


def test_hup_serves_every_run_started_meanwhile(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """`systemctl reload` (HUP): new workers in the same master, the old ones drain, the socket stays open."""
    server = BridgeServer(demo_url, demo_token, tmp_path / "state", tmp_path).start()
    clients = RunClients(server.url, tmp_path).start()
    try:
        wait_for_more_runs(clients, 6)
        old_workers = set(server.child_pids())
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGHUP)

        def replaced() -> None:
            workers = set(server.child_pids())
            assert len(workers) == 2 and not workers & old_workers, workers

        eventually(replaced, timeout_s=60, interval_s=0.1)
        wait_for_more_runs(clients, 6)
    finally:
        outcomes = clients.stop()
        server.stop()
    assert outcomes and all(outcome == "served" for outcome in outcomes), [o for o in outcomes if o != "served"]


# ------------------------------------------------------------------------------------------ plain gunicorn


class PlainGunicorn:
    """`gunicorn -c deploy/gunicorn.conf.py wsgi:app` with a pidfile, as docs/operations.md runs it."""

    def __init__(self, demo_url: str, demo_token: str, tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.pidfile = tmp_path / "gunicorn.pid"
        self.log_path = tmp_path / f"gunicorn-{self.port}.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_")}
        self.env.update(
            PYTHONPATH=str(REPO_ROOT),
            IAC_CODE_AGUI_HOST="127.0.0.1",
            IAC_CODE_AGUI_PORT=str(self.port),
            IAC_CODE_AGUI_WORKERS="2",
            IAC_CODE_AGUI_A2A_URL=demo_url,
            IAC_CODE_AGUI_A2A_TOKEN=demo_token,
            IAC_CODE_AGUI_STATE_DIR=str(tmp_path / "state"),
            IAC_CODE_AGUI_ALLOWED_CWDS=str(tmp_path),
            IAC_CODE_AGUI_REATTACH_WINDOW="0",
        )
        self.env[HUB_WATCHDOG_ENV] = str(THRESHOLD_MS)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PlainGunicorn:
        # The console script, not `python -m gunicorn`: USR2 re-executes the master's own argv.
        command = [str(Path(sys.executable).parent / "gunicorn"), "-c", "deploy/gunicorn.conf.py",
                   "--pid", str(self.pidfile), "wsgi:app"]  # fmt: skip
        GUARD.watch(self.log_path)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=log, start_new_session=True
            )
        eventually(self.answers_health, timeout_s=60, interval_s=0.1)
        return self

    def answers_health(self) -> None:
        assert self.process is not None and self.process.poll() is None, self.log_path.read_text()[-3000:]
        try:
            assert requests.get(self.url + "health", timeout=1).status_code == 200
        except requests.RequestException as exc:
            raise AssertionError(str(exc)) from None

    def master_pid(self) -> int:
        return int(self.pidfile.read_text().strip())

    def kill_everything(self) -> None:
        """End what is left: the process group holds the old master, the re-executed one and every worker."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        GUARD.stopped(self.log_path)


def test_usr2_then_term_of_the_old_master_serves_every_run_started_meanwhile(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    server = PlainGunicorn(demo_url, demo_token, tmp_path).start()
    clients = RunClients(server.url, tmp_path).start()
    try:
        wait_for_more_runs(clients, 6)
        old_master = server.master_pid()
        os.kill(old_master, signal.SIGUSR2)  # a new master, same socket, new code
        new_pidfile = Path(f"{server.pidfile}.2")
        eventually(lambda: assert_exists(new_pidfile), timeout_s=30, interval_s=0.1)
        os.kill(old_master, signal.SIGTERM)  # the old workers drain; the new ones take every new connection
        assert gone(old_master, timeout_s=30)
        wait_for_more_runs(clients, 6)
        # Promoted: the new master renames its pidfile once it notices the old master gone (its loop wakes
        # about once a second), so the pidfile names it a moment after the old master's exit.
        eventually(lambda: assert_exists(server.pidfile), timeout_s=30, interval_s=0.1)
        new_master = server.master_pid()
        assert new_master != old_master
    finally:
        outcomes = clients.stop()
        server.kill_everything()
    assert outcomes and all(outcome == "served" for outcome in outcomes), [o for o in outcomes if o != "served"]


def assert_exists(path: Path) -> None:
    assert path.exists(), path


# ------------------------------------------------------------------------------- what a client sees while stopping


#: Long enough that a worker which kept accepting (or kept an idle connection) until its run ended is caught:
#: every check below has a deadline well inside it.
LONG_RUN = "slow [SLOW 20]"
#: Longer than LONG_RUN, so the drain never cuts the run short.
GRACEFUL_TIMEOUT = {"IAC_CODE_AGUI_GRACEFUL_TIMEOUT": "60"}


class StreamInBackground:
    """A run's stream read on a thread, so a test can ask whether the run has ended at a given moment."""

    def __init__(self, response: requests.Response) -> None:
        self.reader = StreamReader(response)
        self.streaming = threading.Event()
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _seen(self, events: list[dict[str, Any]]) -> bool:
        if any(event["type"] == "TEXT_MESSAGE_CONTENT" for event in events):
            self.streaming.set()
        if any(event["type"] in TERMINAL_EVENT_TYPES for event in events):
            self.ended.set()
        return self.ended.is_set()

    def _read(self) -> None:
        self.reader.until(self._seen, timeout_s=RUN_TIMEOUT_S)
        self.reader.rest()
        self.ended.set()

    def wait_streaming(self) -> None:
        assert self.streaming.wait(30), self.reader.raw[-2000:]
        assert not self.ended.is_set(), self.reader.raw[-2000:]

    def whole(self) -> bytes:
        self._thread.join(RUN_TIMEOUT_S)
        assert not self._thread.is_alive(), "the run's stream did not end"
        return self.reader.raw


def only_worker(server: BridgeServer) -> int:
    (worker,) = [pid for pid in server.child_pids() if pid != server.managed_child_pid()]
    return worker


def assert_still_streaming(stream: StreamInBackground, worker: int) -> None:
    """The run has sent no terminal event and its worker has not exited: what was just seen came from the drain,
    not from the end of the run."""
    assert not stream.ended.is_set(), "the run had already ended"
    assert running(worker), "the draining worker had already exited"


def test_gunicorn_without_a_held_socket_refuses_new_connections_while_active_runs_finish(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    server = BridgeServer(demo_url, demo_token, tmp_path / "state", tmp_path, workers=1, env=GRACEFUL_TIMEOUT).start()
    try:
        worker = only_worker(server)
        active = StreamInBackground(server.post(run_body(new_thread_id(), LONG_RUN, tmp_path)))
        active.wait_streaming()
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGTERM)

        def refused() -> None:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
            except ConnectionRefusedError:
                return
            raise AssertionError("a new connection was still accepted")

        eventually(refused, timeout_s=10)
        assert_still_streaming(active, worker)
        assert_valid_agui_stream(active.whole(), expect_terminal="RUN_FINISHED")
    finally:
        server.stop()


def test_a_draining_worker_closes_idle_keep_alive_connections_at_once(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    """Their next request goes out on a new connection, which the next instance takes, instead of reaching a
    worker that would refuse it (a proxy's pooled upstream connections are such connections)."""
    with held_listening_socket() as listener:
        server = BridgeServer(
            demo_url, demo_token, tmp_path / "state", tmp_path, workers=1, listen_socket=listener, env=GRACEFUL_TIMEOUT
        ).start()
        try:
            worker = only_worker(server)
            active = StreamInBackground(server.post(run_body(new_thread_id(), LONG_RUN, tmp_path)))
            active.wait_streaming()
            kept = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            kept.request("GET", "/health")
            response = kept.getresponse()
            assert response.status == 200 and response.read() and not response.will_close
            assert server.process is not None and kept.sock is not None
            os.kill(server.process.pid, signal.SIGTERM)  # the worker drains while its run is still active
            kept.sock.settimeout(10)  # well inside the run: a close at the worker's exit would come too late
            try:
                closed = kept.sock.recv(1) == b""
            except TimeoutError:
                closed = False
            assert closed, "the idle connection was not closed while the run was active"
            assert_still_streaming(active, worker)
            assert_valid_agui_stream(active.whole(), expect_terminal="RUN_FINISHED")
        finally:
            server.stop()


# ------------------------------------------------------------------------------------------ a crashed worker


def test_a_sigkilled_worker_is_replaced_and_answers_again(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """Readiness only (the time it takes is measured by bench/worker_respawn.py)."""
    server = BridgeServer(demo_url, demo_token, tmp_path / "state", tmp_path, workers=1).start()
    try:
        worker = only_worker(server)
        os.kill(worker, signal.SIGKILL)
        assert gone(worker)

        def answers() -> None:
            children = server.child_pids()
            assert len(children) == 1, children  # none yet, between the kill and the master's fork
            assert children[0] != worker
            try:
                assert requests.get(server.url + "health", timeout=2).status_code == 200
            except requests.RequestException as exc:
                raise AssertionError(str(exc)) from None

        eventually(answers, timeout_s=60, interval_s=0.05)
        server.run(run_body(new_thread_id(), "hello", tmp_path), expect="success")
    finally:
        server.stop()
