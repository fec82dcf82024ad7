"""Tracing end to end: `agui-bridge serve` (gunicorn + 2 gevent workers) with the console
exporter writing to a file, against a demo agent that records the `traceparent` headers it receives.

One run that ends on an interrupt, then its resume. The run continues the caller's W3C traceparent;
the resume (sent without one) starts its own trace whose `agui.run` span links to the run's trace
through the traceparent admission stored in the execution record. Every traceparent the demo agent
received names the trace of its run and the span id of one of our `a2a.*` spans.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.demo.server import TRACEPARENT_LOG_ENV
from agui_bridge.demo.testing import running_demo_agent
from agui_bridge.protocol.sse_parser import parse_body
from agui_bridge.store.store import ThreadStore
from tests.support.harness import bridge_server, new_thread_id, run_body

pytestmark = pytest.mark.e2e

INCOMING_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INCOMING_SPAN = "00f067aa0ba902b7"
SECRET_TEXT = "please write file for the customer vault"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def hex_id(value: str | None) -> str | None:
    return value[2:] if value and value.startswith("0x") else value


def wait_for_spans(path: Path, wanted: int, timeout_s: float = 15.0) -> list[dict[str, Any]]:
    """Spans are exported in batches (OTEL_BSP_SCHEDULE_DELAY): poll until two agui.run spans are in."""
    deadline = time.monotonic() + timeout_s
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        spans = read_jsonl(path)
        if sum(1 for s in spans if s["name"] == "agui.run") >= wanted:
            time.sleep(0.3)  # the rest of the batch
            return read_jsonl(path)
        time.sleep(0.1)
    return spans


def test_interrupt_and_resume_make_a_connected_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo_token = "demo-" + secrets.token_urlsafe(12)
    received_path = tmp_path / "traceparents.jsonl"
    spans_path = tmp_path / "spans.jsonl"
    monkeypatch.setenv(TRACEPARENT_LOG_ENV, str(received_path))
    env = {
        "OTEL_TRACES_EXPORTER": "console",
        "IAC_CODE_AGUI_TRACES_FILE": str(spans_path),
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "IAC_CODE_AGUI_AUTH_TOKEN": "bridge-secret-token",
    }
    headers = {"Authorization": "Bearer bridge-secret-token"}
    state_dir = tmp_path / "state"
    with (
        running_demo_agent(demo_token) as demo_url,
        bridge_server(demo_url, demo_token, state_dir, tmp_path, workers=2, env=env) as server,
    ):
        thread_id = new_thread_id()
        incoming = {**headers, "traceparent": f"00-{INCOMING_TRACE}-{INCOMING_SPAN}-01"}
        with server.post(run_body(thread_id, SECRET_TEXT, tmp_path), headers=incoming) as response:
            assert response.status_code == 200
            first = [json.loads(message.data) for message in parse_body(response.content)]
        assert first[-1]["type"] == "RUN_FINISHED" and first[-1]["outcome"]["type"] == "interrupt"
        stored = ThreadStore(state_dir).read(thread_id)
        assert stored is not None and stored.execution.traceparent is not None
        assert stored.execution.traceparent.split("-")[1] == INCOMING_TRACE

        interrupt_id = first[-1]["outcome"]["interrupts"][0]["id"]
        resume = run_body(thread_id, "", tmp_path)
        resume["messages"] = []
        resume["resume"] = [{"interruptId": interrupt_id, "status": "resolved", "payload": {"decision": "deny"}}]
        with server.post(resume, headers=headers) as response:  # no traceparent: a trace of its own
            assert response.status_code == 200
            second = [json.loads(message.data) for message in parse_body(response.content)]
        assert second[-1]["type"] == "RUN_FINISHED" and second[-1]["outcome"]["type"] == "success"
        spans = wait_for_spans(spans_path, 2)

    runs = {s["attributes"]["agui.run_id"]: s for s in spans if s["name"] == "agui.run"}
    first_run = runs[first[0]["runId"]]
    resume_run = runs[second[0]["runId"]]
    first_trace = hex_id(first_run["context"]["trace_id"])
    resume_trace = hex_id(resume_run["context"]["trace_id"])

    # The run continued the caller's trace: POST / is a child of the incoming span, the run of POST /.
    assert first_trace == INCOMING_TRACE
    post = [s for s in spans if s["name"] == "POST /" and hex_id(s["context"]["trace_id"]) == INCOMING_TRACE]
    assert len(post) == 1 and hex_id(post[0]["parent_id"]) == INCOMING_SPAN
    assert hex_id(first_run["parent_id"]) == hex_id(post[0]["context"]["span_id"])
    assert first_run["attributes"]["agui.outcome"] == "interrupt"
    assert first_run["attributes"]["agui.thread_id"] == thread_id
    assert first_run["attributes"]["agui.execution_id"]

    # The resume is its own trace, linked to the run's trace through the stored traceparent.
    assert resume_trace != first_trace
    assert resume_run["attributes"]["agui.outcome"] == "success" and resume_run["attributes"]["agui.resume"]
    linked = {hex_id(link["context"]["trace_id"]) for link in resume_run["links"]}
    assert linked == {first_trace}

    by_id = {hex_id(s["context"]["span_id"]): s for s in spans}

    def in_trace(trace: str | None, name: str) -> list[dict[str, Any]]:
        return [s for s in spans if s["name"] == name and hex_id(s["context"]["trace_id"]) == trace]

    def ancestors(span: dict[str, Any]) -> list[str]:
        names = []
        while (parent := by_id.get(hex_id(span["parent_id"]) or "")) is not None:
            names.append(parent["name"])
            span = parent
        return names

    for trace in (first_trace, resume_trace):
        assert in_trace(trace, "agui.admission") and in_trace(trace, "agui.state.commit")
        assert in_trace(trace, "a2a.SendStreamingMessage")
    preflight = in_trace(resume_trace, "agui.resume_preflight")
    assert len(preflight) == 1 and "agui.run" in ancestors(preflight[0])
    get_task = in_trace(resume_trace, "a2a.GetTask")
    assert get_task and "agui.resume_preflight" in ancestors(get_task[0])  # followed the call greenlet
    for stream_call in in_trace(first_trace, "a2a.SendStreamingMessage"):
        assert "agui.run" in ancestors(stream_call)  # followed the pump greenlet
    for commit in in_trace(first_trace, "agui.state.commit"):
        assert {"agui.admission", "agui.run"} & set(ancestors(commit))

    # What the kernel received: our trace ids, and the span id of one of our A2A-call spans.
    received = read_jsonl(received_path)
    assert received
    a2a_spans = {hex_id(s["context"]["span_id"]): s for s in spans if s["name"].startswith("a2a.")}
    seen_traces = set()
    for entry in received:
        _version, trace_id, span_id, _flags = entry["traceparent"].split("-")
        assert span_id in a2a_spans, entry
        assert hex_id(a2a_spans[span_id]["context"]["trace_id"]) == trace_id
        seen_traces.add(trace_id)
    assert seen_traces == {first_trace, resume_trace}

    # Never a secret or message text in a span.
    text = spans_path.read_text()
    for secret in (demo_token, "bridge-secret-token", SECRET_TEXT):
        assert secret not in text
    assert spans_path.stat().st_mode & 0o777 == 0o600
