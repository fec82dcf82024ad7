"""`--hub-watchdog-ms` in a gunicorn gevent worker: a greenlet that holds the hub is logged once, at
WARNING with its stack, and counted in `agui_hub_blocked_total` (docs/design.md#hub-watchdog).

The stall comes from tests/support/hub_block_app.py, a test-only app that adds one blocking route to the
bridge's own app; no route of the package can block the hub on a client's request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.eventually import eventually
from tests.support.harness import WsgiHost
from tests.support.hub_block import BLOCK_PATH
from tests.support.hub_guard import GUARD, HubReport
from tests.support.prometheus import sample

pytestmark = pytest.mark.e2e


@pytest.fixture
def blocking_server(tmp_path: Path, demo_url: str, demo_token: str) -> Iterator[WsgiHost]:
    host = WsgiHost(
        "gevent-hub-block", demo_url, demo_token, tmp_path / "state", tmp_path,
        IAC_CODE_AGUI_HUB_WATCHDOG_MS="100", IAC_CODE_AGUI_LOG_FORMAT="json",
    )  # fmt: skip
    (tmp_path / "state").mkdir(mode=0o700)
    host.start()
    try:
        yield host
    finally:
        host.stop()


def claim_reports(host: WsgiHost, timeout_s: float = 10.0) -> list[HubReport]:
    """The deliberate stall's reports, taken from the guard so they fail nothing (bounded wait)."""
    claimed: list[HubReport] = []

    def reported() -> list[HubReport]:
        claimed.extend(GUARD.claim(host.log_path))
        assert claimed, "the watchdog has not reported the stall yet"
        return claimed

    return eventually(reported, timeout_s=timeout_s, interval_s=0.05)


def test_a_blocked_hub_is_logged_once_with_its_stack_and_counted(blocking_server: WsgiHost) -> None:
    metrics = requests.get(blocking_server.url + "metrics", timeout=5).text
    assert "agui_hub_blocked_total 0.0" in metrics  # exported before any stall

    assert requests.get(blocking_server.url + BLOCK_PATH.lstrip("/"), timeout=10).text == "blocked\n"

    reports = claim_reports(blocking_server)
    assert len(reports) == 1, reports
    report = reports[0]
    assert report.blocked_ms >= 100
    assert "block_the_hub_on_purpose" in report.stack and "hub_block_app.py" in report.stack
    record = json.loads(report.line)
    assert record["level"] == "warning" and record["logger"] == "agui_bridge.worker.hub_watchdog"
    assert record["message"].startswith("hub blocked for ")
    metrics = requests.get(blocking_server.url + "metrics", timeout=5).text
    assert sample(metrics, "agui_hub_blocked_total") == 1.0
