"""The run life cycle's guarantees end to end: `agui-bridge serve` (gunicorn, 2 gevent workers) against the
demo agent. Run identity, lease liveness, dropping a client that stops reading, honest outcomes and cancel
markers that do not outlive their runs."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.agui_checks import assert_valid_agui_stream, parse_sse
from tests.support.harness import (
    BridgeServer,
    StreamReader,
    bridge_server,
    custom,
    new_thread_id,
    run_body,
    wait_for_task_state,
)
from tests.support.prometheus import sample

pytestmark = pytest.mark.e2e

CANCEL = "extensions/iac-code/v1/executions/{}/cancel"
STATUS = "extensions/iac-code/v1/threads/{}/status"


class Running:
    """One streaming run read in the background once its session event is in."""

    def __init__(self, server: BridgeServer, thread_id: str, text: str, cwd: Path, **body: Any) -> None:
        self.thread_id = thread_id
        self.reader = StreamReader(server.post(run_body(thread_id, text, cwd, **body)))
        events = self.reader.until(lambda evs: bool(custom(evs, "iac-code.session.v1")), timeout_s=20)
        self.session: dict[str, Any] = custom(events, "iac-code.session.v1")[0]["value"]
        self._thread = threading.Thread(target=self.reader.rest, daemon=True)
        self._thread.start()

    def finish(self, timeout_s: float = 30) -> list[dict[str, Any]]:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the stream did not end"
        self.reader.response.close()
        return assert_valid_agui_stream(self.reader.raw)

    @property
    def ended(self) -> bool:
        return not self._thread.is_alive()


def cancel(server: BridgeServer, running: Running) -> requests.Response:
    body = {"threadId": running.thread_id, "rosInvocationId": "invocation-1"}
    return requests.post(server.url + CANCEL.format(running.session["executionId"]), json=body, timeout=15)


def status(server: BridgeServer, thread_id: str) -> dict[str, Any]:
    answer = requests.post(server.url + STATUS.format(thread_id), json={"rosInvocationId": "invocation-1"}, timeout=10)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def busy_codes(server: BridgeServer, thread_id: str, cwd: Path, attempts: int = 6) -> set[tuple[int, str]]:
    """New runs on fresh connections (gunicorn spreads them over the workers)."""
    codes = set()
    for _ in range(attempts):
        answer = requests.post(server.url, json=run_body(thread_id, "hi", cwd), timeout=10)
        codes.add((answer.status_code, answer.json()["error"]["code"] if answer.status_code != 200 else ""))
    return codes


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def thread_file(state_dir: Path, thread_id: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((state_dir / "threads" / f"{thread_id}.json").read_text())
    return result


def test_threads_sharing_a_run_id_keep_their_own_leases_and_cancels(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    """Several threads all use runId `run-1`: one ends early, one is cancelled, the others stream on."""
    with bridge_server(
        demo_url, demo_token, tmp_path / "state", tmp_path, workers=2, lease_ttl=1, heartbeat_interval=0.5
    ) as server:
        short = [Running(server, new_thread_id(), "slow [SLOW 1]", tmp_path, run_id="run-1") for _ in range(3)]
        long = [Running(server, new_thread_id(), "slow [SLOW 12]", tmp_path, run_id="run-1") for _ in range(3)]
        victim = Running(server, new_thread_id(), "slow [SLOW 12]", tmp_path, run_id="run-1")
        for running in short:
            assert running.finish()[-1]["type"] == "RUN_FINISHED"
        answer = cancel(server, victim)
        assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
        assert victim.finish()[-1]["code"] == "CANCELLED"
        time.sleep(3)  # well past the 1 s grace period: only the owners' beacons keep the leases
        for running in long:
            assert not running.ended, "a cancel or the end of another thread's run-1 stopped this run"
            assert busy_codes(server, running.thread_id, tmp_path, attempts=4) == {(409, "THREAD_BUSY")}
            assert status(server, running.thread_id)["active"] is True
        for running in long:
            assert running.finish()[-1]["type"] == "RUN_FINISHED"
        assert status(server, long[0].thread_id)["active"] is False
        server.run(run_body(long[0].thread_id, "next turn", tmp_path), expect="success")


def test_status_stays_active_past_the_lease_ttl(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=2, lease_ttl=1) as server:
        running = Running(server, new_thread_id(), "slow [SLOW 6]", tmp_path)
        time.sleep(2.5)
        answers = [status(server, running.thread_id)["active"] for _ in range(4)]  # asked of both workers
        assert answers == [True] * 4
        assert thread_file(server.state_dir, running.thread_id)["activeRun"]["leaseUntil"] < time.time() * 1000
        assert running.finish()[-1]["type"] == "RUN_FINISHED"
        assert status(server, running.thread_id)["active"] is False


def test_an_idle_worker_does_not_stop_the_server_under_a_live_run(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    with bridge_server(
        demo_url, demo_token, tmp_path / "state", tmp_path, workers=2, lease_ttl=1, idle_shutdown=2,
        graceful_timeout=11,  # a drain would stop the run after 1 s instead of letting it finish
    ) as server:  # fmt: skip
        running = Running(server, new_thread_id(), "slow [SLOW 8]", tmp_path)
        time.sleep(5)  # past the grace period and the idle time of the worker that holds no run
        assert server.process is not None and server.process.poll() is None
        server.run(run_body(new_thread_id(), "hello", tmp_path), expect="success")  # not draining
        events = running.finish()
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]  # not RUN_ERROR CANCELLED (server_shutdown)
        assert server.process is not None and server.process.poll() is None
        # Once nothing is live, idle shutdown still works.
        assert wait_until(lambda: server.process is not None and server.process.poll() is not None, 20)


def test_a_client_that_stops_reading_is_dropped(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    state = tmp_path / "state"
    with bridge_server(
        demo_url, demo_token, state, tmp_path, workers=2, heartbeat_interval=0.5, client_write_timeout=2
    ) as server:
        thread_id = new_thread_id()
        body = json.dumps(run_body(thread_id, "[LONG 100000]", tmp_path)).encode()
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        try:
            client.connect(("127.0.0.1", server.port))
            client.sendall(
                b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            raw = b""
            while b'"taskId":"' not in raw:
                chunk = client.recv(4096)
                assert chunk, raw[-500:]
                raw += chunk
            while True:  # the whole session event
                match = re.search(rb'"taskId":"([^"]+)"', raw)
                if match:
                    break
                raw += client.recv(4096)
            task_id = match.group(1).decode()
            # Stop reading. The bridge's writes block, then its write deadline drops the client.
            assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED", 30) == (
                "TASK_STATE_CANCELED"
            )
            assert wait_until(lambda: thread_file(state, thread_id).get("activeRun") is None, 10)
            # The thread is free again at once (no THREAD_BUSY until some lease expiry).
            server.run(run_body(thread_id, "next turn", tmp_path), expect="success")
        finally:
            client.close()


def test_metrics_count_each_outcome_once(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": "metrics-token"}
    headers = {"Authorization": "Bearer metrics-token"}
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, heartbeat_interval=0.5, env=env) as server:

        def run(text: str, expect: str) -> None:
            with server.post(run_body(new_thread_id(), text, tmp_path), headers=headers) as response:
                raw = b"".join(response.iter_content(chunk_size=None))
            assert_valid_agui_stream(raw, expect_terminal=expect)

        run("hello", "success")
        run("please write file", "interrupt")
        run("please fail", "RUN_ERROR")
        thread_id = new_thread_id()
        reader = StreamReader(server.post(run_body(thread_id, "slow [SLOW 20]", tmp_path), headers=headers))
        events = reader.until(lambda evs: bool(custom(evs, "iac-code.session.v1")))
        execution_id = custom(events, "iac-code.session.v1")[0]["value"]["executionId"]
        answer = requests.post(
            server.url + CANCEL.format(execution_id),
            json={"threadId": thread_id, "rosInvocationId": "invocation-1"},
            headers=headers,
            timeout=15,
        )
        assert answer.json()["status"] == "cancelled"
        assert parse_sse(reader.rest())[-1]["code"] == "CANCELLED"
        reader.response.close()
        time.sleep(0.5)  # the stream's clean-up counts the run after its last write
        text = requests.get(server.url + "metrics", headers=headers, timeout=5).text
    assert sample(text, "agui_runs_total", outcome="success") == 1
    assert sample(text, "agui_runs_total", outcome="interrupt") == 1
    assert sample(text, "agui_runs_total", outcome="error") == 1
    assert sample(text, "agui_runs_total", outcome="cancelled") == 1
    assert sample(text, "agui_run_duration_seconds_count") == 4


def test_cancels_of_running_streams_leave_no_markers(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    state = tmp_path / "state"
    with bridge_server(demo_url, demo_token, state, tmp_path, workers=2, heartbeat_interval=0.5) as server:
        runs = [Running(server, new_thread_id(), "slow [SLOW 30]", tmp_path) for _ in range(22)]
        for running in runs:  # each cancel reaches either worker: many go to the other one
            answer = cancel(server, running)
            assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
        for running in runs:
            assert running.finish()[-1]["code"] == "CANCELLED"
        markers = state / "cancel-requests"
        assert wait_until(lambda: not markers.exists() or not any(markers.iterdir()), 5), list(markers.iterdir())
        time.sleep(2)  # nothing shows up late either
        assert not markers.exists() or list(markers.iterdir()) == []
