"""Tracing in-process (Flask test client, the thread runtime) with an in-memory exporter.

The gunicorn/gevent path is proven in tests/e2e/test_tracing_gunicorn.py; here the same span tree must
come out of the thread back-end (contextvars copied into threads), pre-stream errors must end the request
span with their status, a guidance stream gets its own span, and with tracing off no hook is installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.observability import tracing
from agui_bridge.runs.guidance import GuidanceStream
from agui_bridge.runs.stream import StreamDeps
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.fakes import ScriptedA2A
from tests.support.harness import new_thread_id, run_body
from tests.support.scripted_runs import admit, guidance_body, status, thread

INCOMING = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    tracing.reset()
    memory = InMemorySpanExporter()
    tracing.configure({}, exporter=memory)
    yield memory
    tracing.reset()


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def parent_name(spans: tuple[ReadableSpan, ...], span: ReadableSpan) -> str | None:
    if span.parent is None:
        return None
    for candidate in spans:
        if candidate.context is not None and candidate.context.span_id == span.parent.span_id:
            return candidate.name
    return None


def test_a_run_makes_one_trace_under_the_thread_runtime(
    exporter: InMemorySpanExporter, settings: Settings, tmp_path: Path
) -> None:
    client = create_app(settings).test_client()
    headers = {"traceparent": INCOMING, "X-Request-Id": "req-42"}
    response = client.post("/", json=run_body(new_thread_id(), "hello", tmp_path), headers=headers)
    assert response.status_code == 200
    assert_valid_agui_stream(response.get_data(), expect_terminal="success", capture=False)
    spans = exporter.get_finished_spans()
    assert {format(s.context.trace_id, "032x") for s in spans if s.context} == {INCOMING.split("-")[1]}
    (run,) = named(spans, "agui.run")
    assert run.attributes is not None and run.attributes["agui.outcome"] == "success"
    assert parent_name(spans, run) == "POST /"
    (request_span,) = named(spans, "POST /")
    assert request_span.attributes is not None and request_span.attributes["agui.request_id"] == "req-42"
    assert parent_name(spans, named(spans, "agui.admission")[0]) == "POST /"
    (call,) = named(spans, "a2a.SendStreamingMessage")
    assert parent_name(spans, call) == "agui.run"  # the pump thread carried the context
    assert {parent_name(spans, c) for c in named(spans, "agui.state.commit")} == {"agui.admission", "agui.run"}


def test_a_pre_stream_error_ends_the_request_span_with_its_status(
    exporter: InMemorySpanExporter, settings: Settings
) -> None:
    body = run_body(new_thread_id(), "hello", "relative/path")
    response = create_app(settings).test_client().post("/", json=body)
    assert response.status_code == 400
    spans = exporter.get_finished_spans()
    (request_span,) = named(spans, "POST /")
    assert request_span.attributes is not None and request_span.attributes["http.response.status_code"] == 400
    assert not named(spans, "agui.run") and not named(spans, "agui.admission")  # refused before admission


def test_a_refused_admission_is_recorded_with_its_code(
    exporter: InMemorySpanExporter, settings: Settings, tmp_path: Path
) -> None:
    client = create_app(settings).test_client()
    body = run_body(new_thread_id(), "hello", tmp_path)
    with client.post("/", json=body) as run:
        assert run.status_code == 200
    assert client.post("/", json=body).status_code == 409  # the same runId again
    admissions = named(exporter.get_finished_spans(), "agui.admission")
    assert [s.status.status_code.name for s in admissions] == ["UNSET", "ERROR"]
    assert admissions[1].attributes is not None and admissions[1].attributes["agui.error_code"] == "DUPLICATE_RUN_ID"


def test_guidance_streams_get_their_own_span(exporter: InMemorySpanExporter, tmp_path: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    context_id = thread(store, tmp_path)
    body = guidance_body(tmp_path)
    ticket = admit(store, body, tmp_path)
    scripted = ScriptedA2A()
    scripted.streams["SendStreamingMessage"] = [[[status(context_id)]]]
    deps = StreamDeps(Settings(state_dir=tmp_path / "state"), store, scripted, ThreadRuntime())
    with tracing.span("POST /"):
        stream = GuidanceStream(deps, ticket, parse_run_input(body), "en")
    raw = b"".join(stream)
    stream.close()
    assert_valid_agui_stream(raw, expect_terminal="success", capture=False)
    spans = exporter.get_finished_spans()
    (guidance,) = named(spans, "agui.guidance")
    assert parent_name(spans, guidance) == "POST /"
    assert guidance.attributes is not None and guidance.attributes["agui.outcome"] == "success"


def test_with_tracing_off_no_hook_is_installed(settings: Settings) -> None:
    tracing.reset()
    try:
        app = create_app(settings)
        hooks = [f.__name__ for f in app.before_request_funcs[None]] + [
            f.__name__ for f in app.teardown_request_funcs.get(None, [])
        ]
        assert hooks == ["_bind_request_id", "_guard_request"]  # the request-id and auth hooks, no tracing hook
    finally:
        tracing.reset()


def test_a_kernel_failure_marks_the_run_span_failed_with_its_code(
    exporter: InMemorySpanExporter, settings: Settings, tmp_path: Path
) -> None:
    client = create_app(settings).test_client()
    response = client.post("/", json=run_body(new_thread_id(), "please fail", tmp_path))
    assert_valid_agui_stream(response.get_data(), expect_terminal="RUN_ERROR", capture=False)
    (run,) = named(exporter.get_finished_spans(), "agui.run")
    assert run.status.status_code.name == "ERROR"
    assert run.attributes is not None
    assert run.attributes["agui.outcome"] == "error" and run.attributes["agui.error_code"] == "A2A_EXECUTION_FAILED"


def test_the_cancel_extension_traces_its_a2a_call(
    exporter: InMemorySpanExporter, settings: Settings, tmp_path: Path
) -> None:
    client = create_app(settings).test_client()
    thread_id = new_thread_id()
    events = assert_valid_agui_stream(
        client.post("/", json=run_body(thread_id, "please write file", tmp_path)).get_data(),
        expect_terminal="interrupt",
        capture=False,
    )
    execution_id = next(e for e in events if e.get("name") == "iac-code.session.v1")["value"]["executionId"]
    exporter.clear()
    answer = client.post(
        f"/extensions/iac-code/v1/executions/{execution_id}/cancel",
        json={"threadId": thread_id, "rosInvocationId": "invocation-1"},
    )
    assert answer.get_json()["status"] == "cancelled"
    spans = exporter.get_finished_spans()
    (request_span,) = named(spans, "POST /extensions/iac-code/v1/executions/<execution_id>/cancel")
    (cancel_call,) = named(spans, "a2a.CancelTask")
    assert parent_name(spans, cancel_call) == request_span.name
    assert execution_id not in request_span.name  # the route template, not the id
