"""End to end through gunicorn: the `Agui-Execution-Id` header of `POST /` is what the cancel route takes.

A load balancer learns the executionId from the run's response headers, which gunicorn sends before the
first event (docs/http-api.md#execution-id-header); the header must already name the execution the status
route shows while the run streams, and the cancel route must cancel the run by it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from agui_bridge.protocol.headers import EXECUTION_ID_HEADER
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import BridgeServer, StreamReader, bridge_server, new_thread_id, run_body

pytestmark = pytest.mark.e2e

ROS = "invocation-1"


@pytest.fixture
def server(tmp_path: Path, demo_url: str, demo_token: str) -> Iterator[BridgeServer]:
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, heartbeat_interval=0.5) as running:
        yield running


def test_the_header_names_the_live_execution_and_cancels_it(server: BridgeServer, tmp_path: Path) -> None:
    thread_id = new_thread_id()
    with server.post(run_body(thread_id, "slow [SLOW 30]", tmp_path, ros_invocation_id=ROS)) as response:
        assert response.status_code == 200
        execution_id = response.headers[EXECUTION_ID_HEADER]
        reader = StreamReader(response)
        started = reader.until(lambda events: any(e["type"] == "RUN_STARTED" for e in events))
        assert started and started[0]["type"] == "RUN_STARTED"

        status = requests.post(
            f"{server.url}extensions/iac-code/v1/threads/{thread_id}/status", json={"rosInvocationId": ROS}, timeout=10
        )
        assert status.status_code == 200 and status.json()["executionId"] == execution_id
        assert status.json()["active"] is True

        cancel = requests.post(
            f"{server.url}extensions/iac-code/v1/executions/{execution_id}/cancel",
            json={"threadId": thread_id, "rosInvocationId": ROS},
            timeout=10,
        )
        assert cancel.status_code == 200 and cancel.json() == {"executionId": execution_id, "status": "cancelled"}
        events = assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
