"""End to end: `agui-bridge serve --agent-check-port` answers HAProxy's agent check with the host's free capacity.

Two gevent workers with two stream places each (a host limit of four): 100% idle, a lower share while demo-agent
runs are held open, 0% at the limit, 0% from the moment the master is told to stop while the runs it holds still
finish on their own; a garbage or huge `agent-send` gets one line and a close, and no worker notices; after a USR2
upgrade the old master, draining, leaves every check to the new one (docs/design.md#agent-check).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from agui_bridge.demo.testing import free_port
from tests.support.agent_check import ask_agent
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.eventually import eventually
from tests.support.harness import REPO_ROOT, BridgeServer, StreamReader, new_thread_id, run_body
from tests.support.hub_guard import ENV_NAME as HUB_WATCHDOG_ENV
from tests.support.hub_guard import GUARD, THRESHOLD_MS
from tests.support.processes import running

pytestmark = pytest.mark.e2e

#: Two workers of two places: every held run is a quarter of the host.
PLACES_PER_WORKER = 2
WORKERS = 2


@contextlib.contextmanager
def agent_server(tmp_path: Path, demo_url: str, demo_token: str, **options: object) -> Iterator[BridgeServer]:
    server = BridgeServer(
        demo_url, demo_token, tmp_path / "state", tmp_path, workers=WORKERS, max_active_runs=PLACES_PER_WORKER,
        agent_check_port=free_port(), heartbeat_interval=0.5, **options,
    ).start()  # fmt: skip
    try:
        yield server
    finally:
        server.stop(signal.SIGKILL)


def agent_port(server: BridgeServer) -> int:
    return int(str(server.options["agent_check_port"]))


def answers(server: BridgeServer, expected: bytes) -> None:
    assert ask_agent(agent_port(server), b"bridge/host\n") == expected


def answers_soon(server: BridgeServer, expected: bytes) -> None:
    """Within a few of the workers' report intervals."""
    eventually(lambda: answers(server, expected))


def hold_a_run(server: BridgeServer, tmp_path: Path, text: str) -> StreamReader | None:
    """A run held open past RUN_STARTED, or None when the worker that took it was full (503)."""
    response = server.post(run_body(new_thread_id(), text, tmp_path))
    if response.status_code == 503:
        response.close()
        return None
    assert response.status_code == 200, response.text
    reader = StreamReader(response)
    reader.until(lambda events: any(e["type"] == "RUN_STARTED" for e in events))
    return reader


def hold_a_run_somewhere(server: BridgeServer, tmp_path: Path, text: str) -> StreamReader:
    """A held run on whichever worker has a place (a run landing on a full one is refused: tried again, bounded)."""
    for _ in range(20):
        reader = hold_a_run(server, tmp_path, text)
        if reader is not None:
            return reader
    raise AssertionError("no worker took the run in 20 tries")


def test_the_agent_answers_the_free_share_and_zero_when_full_or_draining(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    # The drain waits up to 50 s for runs to end on their own: the held runs (20 s) finish within it.
    with agent_server(tmp_path, demo_url, demo_token, graceful_timeout=60) as server:
        eventually(lambda: answers(server, b"100%\n"))
        held: list[StreamReader] = []
        expected = iter([b"75%\n", b"50%\n", b"25%\n", b"0%\n"])
        for _ in range(40):  # a run landing on a full worker is refused: try again (bounded)
            reader = hold_a_run(server, tmp_path, "slow [SLOW 20]")
            if reader is None:
                continue
            held.append(reader)
            answers_soon(server, next(expected))
            if len(held) == WORKERS * PLACES_PER_WORKER:
                break
        assert len(held) == WORKERS * PLACES_PER_WORKER
        answers(server, b"0%\n")  # full

        held.pop().response.close()  # a client leaves: its run is cancelled and its place is free again
        eventually(lambda: answers(server, b"25%\n"))

        assert server.process is not None
        os.kill(server.process.pid, signal.SIGTERM)  # the master drains (as systemd stops it)
        eventually(lambda: answers(server, b"0%\n"))
        for reader in held:  # the runs the host holds go on to their own end
            events = assert_valid_agui_stream(reader.rest(), expect_terminal="success")
            assert events[-1]["type"] == "RUN_FINISHED"
            answers(server, b"0%\n")


def test_garbage_agent_send_gets_one_line_and_a_killed_worker_stops_counting(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    with agent_server(tmp_path, demo_url, demo_token) as server:
        eventually(lambda: answers(server, b"100%\n"))
        garbage = bytes(range(256)).replace(b"\n", b"").replace(b"\r", b"") * 8  # no line end
        assert ask_agent(agent_port(server), garbage) == b"100%\n"
        chunk = b"\xff" * 65536
        connection = socket.create_connection(("127.0.0.1", agent_port(server)), timeout=5)
        with connection, pytest.raises(OSError):  # past the read cap the responder closes
            for _ in range(1024):  # 64 MiB at most, far beyond any socket buffer
                connection.sendall(chunk)
        answers(server, b"100%\n")
        assert requests.get(server.url + "health", timeout=5).status_code == 200  # no worker stalled

        reader = hold_a_run_somewhere(server, tmp_path, "slow [SLOW 60]")
        eventually(lambda: answers(server, b"75%\n"))
        for pid in server.child_pids():  # SIGKILL both workers: the master reaps them and forgets their runs
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(requests.RequestException, AssertionError):
            reader.rest()
        eventually(lambda: answers(server, b"100%\n"), timeout_s=30)  # respawned, idle, reported


def test_a_reload_keeps_counting_the_new_workers(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    with agent_server(tmp_path, demo_url, demo_token) as server:
        eventually(lambda: answers(server, b"100%\n"))
        old_workers = set(server.child_pids())
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGHUP)  # `systemctl reload`: new workers, the old ones drain

        def replaced() -> None:
            assert len(server.child_pids()) == WORKERS and not old_workers & set(server.child_pids())

        eventually(replaced, timeout_s=30)
        eventually(lambda: answers(server, b"100%\n"))
        reader = hold_a_run_somewhere(server, tmp_path, "slow [SLOW 60]")
        answers_soon(server, b"75%\n")  # the new workers report through the same answer
        reader.response.close()
        answers_soon(server, b"100%\n")


def test_after_a_usr2_upgrade_the_old_master_leaves_every_check_to_the_new_one(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    """The old master drains a held run for far longer than the wait below; its 0% would take half the checks."""
    port, agent = free_port(), free_port()
    pidfile, log_path = tmp_path / "gunicorn.pid", tmp_path / "gunicorn.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAC_CODE_AGUI_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT), IAC_CODE_AGUI_PORT=str(port), IAC_CODE_AGUI_AGENT_CHECK_PORT=str(agent),
        IAC_CODE_AGUI_A2A_URL=demo_url, IAC_CODE_AGUI_A2A_TOKEN=demo_token, IAC_CODE_AGUI_WORKERS="1",
        IAC_CODE_AGUI_MAX_ACTIVE_RUNS="1",
        IAC_CODE_AGUI_STATE_DIR=str(tmp_path / "state"), IAC_CODE_AGUI_ALLOWED_CWDS=str(tmp_path),
        IAC_CODE_AGUI_GRACEFUL_TIMEOUT="60", **{HUB_WATCHDOG_ENV: str(THRESHOLD_MS)},
    )  # fmt: skip
    # The console script: USR2 re-executes the master's own argv.
    command = [str(Path(sys.executable).parent / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "--pid", str(pidfile),
               "wsgi:app"]  # fmt: skip
    GUARD.watch(log_path)
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        eventually(lambda: assert_answer(agent, b"100%\n"), timeout_s=60)
        response = requests.post(
            f"http://127.0.0.1:{port}/", json=run_body(new_thread_id(), "slow [SLOW 30]", tmp_path), stream=True,
            timeout=60,
        )  # fmt: skip
        assert response.status_code == 200, response.text
        reader = StreamReader(response)  # held open: the client stays, so the drain waits for the run's end
        reader.until(lambda events: any(e["type"] == "RUN_STARTED" for e in events))
        eventually(lambda: assert_answer(agent, b"0%\n"))  # the host's one place is held
        old_master = int(pidfile.read_text())
        os.kill(old_master, signal.SIGUSR2)  # a new master beside the old one, on the same agent port
        eventually(lambda: assert_answer(agent, b"100%\n"), timeout_s=60)  # a check reached the new master (idle)
        os.kill(old_master, signal.SIGTERM)  # the old master drains its run (30 s)

        def every_check_reaches_the_new_master() -> None:
            for _ in range(20):
                assert_answer(agent, b"100%\n")

        eventually(every_check_reaches_the_new_master)
        assert running(old_master)  # still draining its run: it is no longer asked
        reader.response.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        GUARD.stopped(log_path)


def assert_answer(port: int, expected: bytes) -> None:
    try:
        line = ask_agent(port)
    except OSError as exc:  # refused before the start, or queued on the listener the old master closed
        raise AssertionError(f"no answer: {exc}") from exc
    assert line == expected
