"""`/metrics` under gunicorn (multiprocess mode, 2 workers): counters move for every outcome, and a labelled
counter shows every known label value at 0 before its first use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from agui_bridge.observability.labels import UPSTREAM_ERROR_KINDS, InterruptsClosed
from tests.support.harness import bridge_server, new_thread_id, run_body
from tests.support.prometheus import sample

pytestmark = pytest.mark.e2e


def test_metrics_count_runs_of_each_outcome(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": "metrics-token"}
    headers = {"Authorization": "Bearer metrics-token"}
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, heartbeat_interval=0.2, env=env) as server:
        assert requests.get(server.url + "metrics", timeout=5).status_code == 401

        def post(body: dict[str, Any], expect: str) -> list[dict[str, Any]]:
            with server.post(body, headers=headers) as response:
                raw = b"".join(response.iter_content(chunk_size=None))
            from tests.support.agui_checks import assert_valid_agui_stream

            return assert_valid_agui_stream(raw, expect_terminal=expect)

        post(run_body(new_thread_id(), "hello", tmp_path), "success")
        post(run_body(new_thread_id(), "slow [SLOW 3]", tmp_path), "success")  # 0.5 s gaps: heartbeats
        post(run_body(new_thread_id(), "please fail", tmp_path), "RUN_ERROR")
        thread_id = new_thread_id()
        interrupted = post(run_body(thread_id, "please write file", tmp_path), "interrupt")
        resume = run_body(thread_id, "", tmp_path)
        interrupt_id = interrupted[-1]["outcome"]["interrupts"][0]["id"]
        resume["resume"] = [{"interruptId": interrupt_id, "status": "resolved", "payload": {"decision": "deny"}}]
        post(resume, "success")
        text = requests.get(server.url + "metrics", headers=headers, timeout=5).text
    assert sample(text, "agui_runs_total", outcome="success") == 3
    assert sample(text, "agui_runs_total", outcome="error") == 1
    assert sample(text, "agui_runs_total", outcome="interrupt") == 1
    assert sample(text, "agui_run_duration_seconds_count") == 5
    assert sample(text, "agui_sse_events_total", type="RUN_STARTED") == 5
    assert sample(text, "agui_sse_events_total", type="RUN_ERROR") == 1
    assert sample(text, "agui_heartbeats_total") >= 1
    assert sample(text, "agui_upstream_errors_total", kind="A2A_EXECUTION_FAILED") == 1
    assert sample(text, "agui_interrupts_announced_total") == 1
    assert sample(text, "agui_interrupts_closed_total", how="answered") == 1
    assert sample(text, "agui_interrupts_pending") == 0
    assert sample(text, "agui_active_runs") == 0
    assert sample(text, "agui_state_write_seconds_count") > 0 and sample(text, "agui_lock_wait_seconds_count") > 0
    assert "thread_id" not in text and thread_id not in text


def test_labelled_counters_show_every_known_label_at_zero_before_their_first_use(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    """A dashboard grouping by `kind` or `how` shows 0, not "No data", on a bridge that has had no failure yet."""
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=1) as server:
        text = requests.get(server.url + "metrics", timeout=5).text
    expected = [f'agui_upstream_errors_total{{kind="{kind}"}} 0.0' for kind in sorted(UPSTREAM_ERROR_KINDS)]
    expected += [f'agui_interrupts_closed_total{{how="{how}"}} 0.0' for how in InterruptsClosed]
    lines = set(text.splitlines())
    assert [line for line in expected if line not in lines] == [], text
