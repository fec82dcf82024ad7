"""deploy/waitress_serve.py stops within its graceful time whatever signal dispositions it inherited."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import REPO_ROOT, StreamReader, WsgiHost, custom, new_thread_id, run_body

pytestmark = pytest.mark.e2e

GRACEFUL_S = 12


def ignore_sigint() -> None:
    """What a shell does for a command started in the background (`cmd &` without job control)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_the_waitress_launcher_stops_within_its_graceful_time_with_sigint_ignored(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    host = WsgiHost(
        "waitress-drain", demo_url, demo_token, tmp_path / "state", tmp_path,
        IAC_CODE_AGUI_GRACEFUL_TIMEOUT=str(GRACEFUL_S),
    )  # fmt: skip
    with host.log_path.open("ab") as log:
        host.process = subprocess.Popen(
            host.command(), cwd=REPO_ROOT, env=host.environment(), stdout=log, stderr=log,
            start_new_session=True, preexec_fn=ignore_sigint,
        )  # fmt: skip
    try:
        host.wait_ready()
        response = host.post(run_body(new_thread_id(), "slow [SLOW 30]", tmp_path))
        reader = StreamReader(response)
        reader.until(lambda events: bool(custom(events, "iac-code.session.v1")))
        host.process.send_signal(signal.SIGTERM)
        # The drain's wait, the stop of the stream, then waitress's own close: all inside graceful_timeout.
        assert host.process.wait(GRACEFUL_S) == 0, host.log_path.read_text()[-3000:]
        events = assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_ERROR")
        assert events[-1]["code"] == "CANCELLED"
    finally:
        host.stop()
