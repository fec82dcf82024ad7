"""End to end (gunicorn + gevent): a departed client is noticed from its socket; a burst passes the start gate."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from agui_bridge.worker.start_gate import START_GATE_LIMIT
from tests.support.eventually import eventually
from tests.support.harness import bridge_server, custom, new_thread_id, read_sse_until, run_body, wait_for_task_state

pytestmark = pytest.mark.e2e


def test_a_departed_client_is_noticed_without_a_write(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """Heartbeats every 60 s and a delta every 20 s: before this change the bridge could only notice the
    departure at one of those writes. Watching the socket, it cancels the task at once."""
    thread_id = new_thread_id()
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=1, heartbeat_interval=60) as server:
        body = run_body(thread_id, "slow [SLOW 120]", tmp_path)
        response = server.post(body)
        _, events = read_sse_until(response, lambda evs: any(e.get("name") == "iac-code.session.v1" for e in evs))
        task_id = custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
        response.close()
        started = time.monotonic()
        assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED", 15) == "TASK_STATE_CANCELED"
        assert time.monotonic() - started < 15  # the next write was 20 s (a delta) or 60 s (a heartbeat) away
        # The worker is still healthy and the thread's lease is released (right after the kernel answered the
        # cancel: docs/design.md#cancellation), so a new run on it is admitted.
        assert requests.get(server.url + "health", timeout=5).status_code == 200
        ros = body["forwardedProps"]["iacCode"]["rosInvocationId"]
        status_url = f"{server.url}extensions/iac-code/v1/threads/{thread_id}/status"

        def released() -> None:
            status = requests.post(status_url, json={"rosInvocationId": ros}, timeout=5).json()
            assert not status.get("active"), "the lease of the departed run was not released"

        eventually(released, timeout_s=5, interval_s=0.05)
        server.run(run_body(thread_id, "say hi", tmp_path), expect="success")


def test_a_burst_larger_than_the_start_gate_is_served_whole(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """Three times the start gate's slots at once (docs/design.md#start-gate): every run is admitted and
    finishes (the gate delays, never refuses), and /health answers while the burst is admitted."""
    burst = 3 * START_GATE_LIMIT
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=1) as server:
        bodies = [run_body(new_thread_id(), "say hi", tmp_path) for _ in range(burst)]
        with ThreadPoolExecutor(max_workers=burst + 1) as pool:
            runs = [pool.submit(server.run, body, expect="success") for body in bodies]
            health = [requests.get(server.url + "health", timeout=10).status_code for _ in range(5)]
            streams = [run.result(timeout=120) for run in runs]
        assert health == [200] * 5
        assert all(stream[0]["type"] == "RUN_STARTED" and stream[-1]["type"] == "RUN_FINISHED" for stream in streams)
