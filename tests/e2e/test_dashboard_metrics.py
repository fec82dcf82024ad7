"""The Grafana dashboard against a live bridge, and the capabilities document against the running config.

`agui-bridge serve` (gunicorn, 2 gevent workers, metrics in multiprocess mode) runs a plain run, a
failing run and an interrupt + resume; then every metric the dashboard queries must exist in the live
`/metrics`, with every label the dashboard groups by. The capabilities document of the same server
must state the interrupt TTL it was started with, and the interrupt it announced must expire then.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import REPO_ROOT, bridge_server, new_thread_id, run_body

pytestmark = pytest.mark.e2e

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "agui-bridge.json"
TOKEN = "dashboard-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
TTL_S = 77


def exposition(text: str) -> dict[str, set[str]]:
    """Sample name -> the label names it carries, from Prometheus text format."""
    samples: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        assert match, line
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', match.group(3) or ""))
        samples.setdefault(match.group(1), set()).update(labels)
    return samples


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def post(url: str, body: dict[str, Any], expect: str) -> list[dict[str, Any]]:
    with requests.post(url, json=body, headers=HEADERS, stream=True, timeout=60) as response:
        assert response.status_code == 200, response.text
        raw = b"".join(response.iter_content(chunk_size=None))
    return assert_valid_agui_stream(raw, expect_terminal=expect)


def test_every_dashboard_metric_exists_in_a_live_bridge(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": TOKEN}
    with bridge_server(
        demo_url, demo_token, tmp_path / "state", tmp_path, interrupt_ttl=TTL_S, heartbeat_interval=0.2, env=env
    ) as server:
        post(server.url, run_body(new_thread_id(), "hello", tmp_path), "success")
        post(server.url, run_body(new_thread_id(), "please fail", tmp_path), "RUN_ERROR")
        thread_id = new_thread_id()
        announced_at = time.time()
        interrupted = post(server.url, run_body(thread_id, "please write file", tmp_path), "interrupt")
        interrupt = interrupted[-1]["outcome"]["interrupts"][0]
        resume = run_body(thread_id, "", tmp_path)
        resume["messages"] = []
        resume["resume"] = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "deny"}}]
        post(server.url, resume, "success")

        capabilities = requests.get(server.url + "extensions/iac-code/v1/capabilities", headers=HEADERS, timeout=5)
        metrics = requests.get(server.url + "metrics", headers=HEADERS, timeout=5).text

    # The dashboard: every metric it queries is live, with the labels it groups by.
    samples = exposition(metrics)
    queries = dashboard_queries()
    assert len(queries) >= 16
    queried: set[str] = set()
    for expr in queries:
        names = re.findall(r"\bagui_[a-z0-9_]+", expr)
        assert names, expr
        for name in names:
            assert name in samples, f"{name} (queried by {expr!r}) is not in /metrics"
            queried.add(name)
            for group in re.findall(r"by \(([^)]*)\)", expr):
                for label in (part.strip() for part in group.split(",")):
                    assert label in samples[name], f"{name} has no label {label!r} ({expr!r})"
    for wanted in (
        "agui_runs_total", "agui_active_runs", "agui_time_to_run_started_seconds_bucket",
        "agui_run_duration_seconds_bucket", "agui_sse_events_total", "agui_heartbeats_total",
        "agui_upstream_errors_total", "agui_interrupts_pending", "agui_state_write_seconds_bucket",
        "agui_time_to_first_upstream_event_seconds_bucket", "agui_resume_preflight_seconds_bucket",
    ):  # fmt: skip
        assert wanted in queried, f"the dashboard does not show {wanted}"
    # The new histograms counted what happened: 4 runs started, 4 streams read A2A, 1 preflight.
    counts = dict(re.findall(r"^(agui_[a-z_]+_count) ([0-9.e+]+)$", metrics, re.M))
    assert float(counts["agui_time_to_run_started_seconds_count"]) == 4
    assert float(counts["agui_time_to_first_upstream_event_seconds_count"]) == 4
    assert float(counts["agui_resume_preflight_seconds_count"]) == 1

    # The capabilities document states the running configuration, and the interrupt followed it.
    assert capabilities.status_code == 200
    iac = capabilities.json()["custom"]["iacCode"]
    assert iac["interrupts"]["ttlSeconds"] == TTL_S
    assert iac["limits"]["heartbeatIntervalSeconds"] == 0.2
    expires = datetime.fromisoformat(interrupt["expiresAt"].replace("Z", "+00:00")).timestamp()
    assert announced_at + TTL_S - 5 <= expires <= time.time() + TTL_S + 1
