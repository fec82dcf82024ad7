"""The thread back-end's stream limit: a thread per open stream, capped, and a clean 503 beyond the cap."""

from __future__ import annotations

import argparse
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agui_bridge.config import load_settings
from agui_bridge.config.options import add_arguments, resolve, worker_environment
from agui_bridge.config.settings import Settings
from agui_bridge.testing import AguiClient, EventStream, run_input
from agui_bridge.worker.runtime import GeventRuntime, ThreadRuntime
from tests.support.harness import new_thread_id


def test_the_thread_cap_applies_only_to_the_thread_back_end() -> None:
    assert ThreadRuntime().stream_limit(800, 16) == 16
    assert ThreadRuntime().stream_limit(4, 16) == 4
    assert GeventRuntime().stream_limit(800, 16) == 800


def test_the_setting_travels_from_flag_and_env_to_the_workers() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    default = resolve(parser.parse_args([]), {})
    assert default["max_thread_streams"] == 16 and default.sources["max_thread_streams"] == "default"
    resolved = resolve(parser.parse_args(["--max-thread-streams", "3"]), {"IAC_CODE_AGUI_MAX_THREAD_STREAMS": "9"})
    assert resolved["max_thread_streams"] == 3 and resolved.sources["max_thread_streams"] == "flag"
    env = worker_environment(resolved, {})
    assert env["IAC_CODE_AGUI_MAX_THREAD_STREAMS"] == "3"
    assert load_settings(env).max_thread_streams_per_worker == 3
    assert Settings().max_thread_streams_per_worker == 16


def test_a_stream_beyond_the_cap_gets_503_with_retry_after(agui_settings: Settings, agui_workspace: Path) -> None:
    from agui_bridge.app import create_app

    client = AguiClient(create_app(agui_settings.replace(max_thread_streams_per_worker=1)))
    running = client.run(run_input(new_thread_id(), "slow [SLOW 20]", agui_workspace))
    running.until("iac-code.session.v1")
    refused = client.run(run_input(new_thread_id(), "hi", agui_workspace), headers={"Accept-Language": "en"})
    assert refused.status_code == 503
    assert refused.response.headers["Retry-After"] == "5"
    assert refused.error is not None and refused.error["code"] == "SERVICE_UNAVAILABLE" and refused.error["message"]
    running.close()
    # The slot is free again once the stream has ended.
    again = client.run(run_input(new_thread_id(), "hi", agui_workspace))
    assert again.status_code == 200 and again.outcome == "success"


def test_a_burst_cannot_overshoot_the_cap(agui_settings: Settings, agui_workspace: Path) -> None:
    """Eight runs at once against a cap of 2: exactly two streams, six clean 503s (the check and the
    reservation are one step, so admissions waiting on their file locks cannot all slip through)."""
    from agui_bridge.app import create_app

    app = create_app(agui_settings.replace(max_thread_streams_per_worker=2))
    barrier = threading.Barrier(8)

    def attempt(_: int) -> EventStream:
        client = AguiClient(app)  # one test client per thread, one app: one process
        barrier.wait()
        return client.run(run_input(new_thread_id(), "slow [SLOW 4]", agui_workspace))

    with ThreadPoolExecutor(8) as pool:
        streams = list(pool.map(attempt, range(8)))
    try:
        assert sorted(s.status_code for s in streams) == [200, 200] + [503] * 6
        assert {s.error["code"] for s in streams if s.error} == {"SERVICE_UNAVAILABLE"}
    finally:
        for stream in streams:
            stream.close()
