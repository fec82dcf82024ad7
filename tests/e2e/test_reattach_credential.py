"""The per-run reattach credential never reaches a log line, and travels in a header (docs/design.md#reattach).

Through `agui-bridge serve` (gunicorn, whose access log is on through `logconfig_dict`): a run, then
reattaches in the query form (`?rosInvocationId=`) and the header form (`Ros-Invocation-Id`); the
server's whole log (gunicorn's access and error logs and ours, at DEBUG) must not hold the credential,
while the access log still shows the reattach request with the value redacted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.agui_checks import parse_sse
from tests.support.harness import BridgeServer, bridge_server, new_thread_id, run_body

pytestmark = pytest.mark.e2e

EVENTS = "extensions/iac-code/v1/threads/{}/runs/{}/events"
#: Distinctive, so any occurrence in a log is this credential and nothing else.
ROS = f"ros-credential-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, demo_url: str, demo_token: str) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("credential")
    with bridge_server(
        demo_url, demo_token, root / "state", root, workers=1, log_level="debug", reattach_window=10
    ) as server:
        body = run_body(new_thread_id(), "hello", root, ros_invocation_id=ROS)
        events = server.run(body)
        assert events[-1]["type"] == "RUN_FINISHED"
        yield {"server": server, "body": body, "events": events}


def reattach(server: BridgeServer, body: dict[str, Any], **options: Any) -> requests.Response:
    url = server.url + EVENTS.format(body["threadId"], body["runId"])
    headers = {"Connection": "close", **options.pop("headers", {})}
    return requests.get(url, headers=headers, timeout=30, **options)


def replayed_types(response: requests.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [event["type"] for event in parse_sse(response.content)]


def test_the_header_form_reattaches(finished_run: dict[str, Any]) -> None:
    server, body = finished_run["server"], finished_run["body"]
    with reattach(server, body, headers={"Ros-Invocation-Id": ROS}) as response:
        assert replayed_types(response) == [event["type"] for event in finished_run["events"]]


def test_the_header_wins_over_the_query(finished_run: dict[str, Any]) -> None:
    server, body = finished_run["server"], finished_run["body"]
    right_header = {"headers": {"Ros-Invocation-Id": ROS}, "params": {"rosInvocationId": "someone-else"}}
    with reattach(server, body, **right_header) as response:
        assert replayed_types(response)[-1] == "RUN_FINISHED"
    wrong_header = {"headers": {"Ros-Invocation-Id": "someone-else"}, "params": {"rosInvocationId": ROS}}
    with reattach(server, body, **wrong_header) as response:
        assert response.status_code == 404 and response.json()["error"]["code"] == "RUN_NOT_FOUND"


def test_the_query_form_credential_appears_in_no_log_line(finished_run: dict[str, Any]) -> None:
    server, body = finished_run["server"], finished_run["body"]
    with reattach(server, body, params={"rosInvocationId": ROS, "after": "1"}) as response:
        assert replayed_types(response)[-1] == "RUN_FINISHED"
    with reattach(server, body, params={"rosInvocationId": ROS, "after": "999"}) as response:
        assert response.status_code == 416  # a refusal is logged too
    server.stop()  # every worker has flushed its log
    log = Path(server.log_path).read_text(encoding="utf-8", errors="replace")
    leaked = [line for line in log.splitlines() if ROS in line]
    assert not leaked, leaked
    requests_logged = [line for line in log.splitlines() if "/runs/" in line and "rosInvocationId=" in line]
    assert requests_logged, "the access log shows no reattach request: nothing was checked"
    assert all("rosInvocationId=[REDACTED]" in line for line in requests_logged), requests_logged
