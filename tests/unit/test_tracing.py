"""`agui_bridge.observability.tracing`: off by default at no cost, console and OTLP exporters from OTEL_*, W3C
propagation in and out, errors recorded without their message, and the execution's stored traceparent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agui_bridge.errors import ThreadBusy
from agui_bridge.observability import tracing, tracing_setup
from agui_bridge.store import document, model

INCOMING = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(autouse=True)
def fresh_tracing() -> Iterator[None]:
    tracing.reset()
    yield
    tracing.reset()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    assert tracing.configure({}, exporter=memory)
    return memory


def finished(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "none"}, ()),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": " OTLP , console,otlp"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, ()),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "false"}, ("console",)),
    ],
)
def test_requested_exporters(environ: dict[str, str], expected: tuple[str, ...]) -> None:
    assert tracing_setup.requested_exporters(environ) == expected


def test_off_by_default_and_every_helper_is_a_pass_through() -> None:
    assert tracing.configure({}) is False
    assert not tracing.enabled()
    assert tracing.configure({"OTEL_TRACES_EXPORTER": "console"}) is False  # read once per process
    body = iter([b"a"])
    assert tracing.traced_iterator(body, "agui.run") is body  # no wrapper, no per-chunk cost

    def generator() -> Iterator[bytes]:
        yield b"x"

    gen = generator()
    assert tracing.traced_generator(gen, "x") is gen  # type: ignore[arg-type]
    assert tracing.headers() == {}
    assert tracing.current_traceparent() is None
    assert tracing.capture() is None
    assert tracing.begin_request("POST", "/", {"traceparent": INCOMING}) is None
    with tracing.span("nothing") as inside:
        assert inside is None

    @tracing.traced("agui.test")
    def double(value: int) -> int:
        return value * 2

    assert double(21) == 42


def test_sdk_disabled_wins_over_the_exporter() -> None:
    assert tracing.configure({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}) is False


def test_traced_call_is_a_child_with_ids_and_propagates_traceparent(exporter: InMemorySpanExporter) -> None:
    seen: dict[str, str] = {}

    @tracing.traced(lambda method: f"a2a.{method}", lambda method: {"rpc.method": method}, client=True)
    def call(method: str) -> None:
        seen.update(tracing.headers())

    handle = tracing.begin_request("POST", "/", {"traceparent": INCOMING, "tracestate": "vendor=" + "x" * 200})
    assert handle is not None
    call("GetTask")
    tracing.end_request(handle, 200)
    spans = finished(exporter)
    server, client = spans["POST /"], spans["a2a.GetTask"]
    assert server.context is not None and client.context is not None and server.parent is not None
    assert format(server.context.trace_id, "032x") == INCOMING.split("-")[1]
    assert format(server.parent.span_id, "016x") == INCOMING.split("-")[2]
    assert client.parent is not None and client.parent.span_id == server.context.span_id
    assert client.attributes == {"rpc.method": "GetTask"}
    assert server.attributes is not None and server.attributes["http.response.status_code"] == 200
    assert server.attributes["http.route"] == "/" and server.attributes["agui.request_id"] == ""
    # The kernel receives the A2A call span itself as the parent.
    assert seen["traceparent"] == f"00-{client.context.trace_id:032x}-{client.context.span_id:016x}-01"
    assert "tracestate" not in seen  # the caller's vendor data is not passed on


def test_errors_are_recorded_by_type_and_code_never_by_message(exporter: InMemorySpanExporter) -> None:
    @tracing.traced("agui.admission")
    def admit() -> None:
        raise ThreadBusy()

    @tracing.traced("a2a.SendMessage")
    def send() -> None:
        raise ValueError("the user's secret prompt text")

    with pytest.raises(ThreadBusy):
        admit()
    with pytest.raises(ValueError):
        send()
    spans = finished(exporter)
    busy = spans["agui.admission"]
    assert busy.status.status_code.name == "ERROR"
    assert busy.attributes is not None and busy.attributes["agui.error_code"] == "THREAD_BUSY"
    failed = spans["a2a.SendMessage"]
    assert failed.attributes == {"error.type": "ValueError"}
    assert [dict(e.attributes or {}) for e in failed.events] == [{"exception.type": "ValueError"}]
    assert "secret" not in failed.to_json()


def test_generator_span_stays_current_across_yields_and_takes_the_outcome(exporter: InMemorySpanExporter) -> None:
    outcome = {"value": "disconnected"}

    @tracing.traced("agui.state.commit")
    def commit() -> None:
        pass

    def body() -> Iterator[bytes]:
        commit()
        yield b"one"
        commit()
        outcome["value"] = "success"
        yield b"two"

    linked = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    wrapped = tracing.traced_iterator(body(), "agui.run", {"agui.run_id": "r1"}, outcome=lambda: outcome["value"],
                                      link=linked)  # fmt: skip
    assert list(wrapped) == [b"one", b"two"]
    spans = exporter.get_finished_spans()
    run = next(s for s in spans if s.name == "agui.run")
    commits = [s for s in spans if s.name == "agui.state.commit"]
    assert run.context is not None and len(commits) == 2
    assert all(c.parent is not None and c.parent.span_id == run.context.span_id for c in commits)
    assert run.attributes == {"agui.run_id": "r1", "agui.outcome": "success"}
    assert [format(link.context.trace_id, "032x") for link in run.links] == ["0af7651916cd43dd8448eb211c80319c"]


def test_an_invalid_stored_traceparent_gives_no_link(exporter: InMemorySpanExporter) -> None:
    assert list(tracing.traced_iterator(iter([b"x"]), "agui.run", link="00-zz-yy-01")) == [b"x"]
    assert exporter.get_finished_spans()[0].links == ()


def test_closed_generator_ends_its_span_without_an_error(exporter: InMemorySpanExporter) -> None:
    def body() -> Iterator[bytes]:
        yield b"one"
        yield b"two"

    wrapped = tracing.traced_iterator(body(), "agui.run")
    assert next(wrapped) == b"one"
    wrapped.close()  # type: ignore[attr-defined]
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code.name == "UNSET"


def test_current_traceparent_names_the_current_span(exporter: InMemorySpanExporter) -> None:
    with tracing.span("agui.admission") as current:
        value = tracing.current_traceparent()
    context = current.get_span_context()
    assert value is not None and value.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


def test_console_exporter_writes_json_lines_to_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    assert tracing.configure({"OTEL_TRACES_EXPORTER": "console", tracing_setup.TRACES_FILE_ENV: str(path)})
    with tracing.span("agui.admission", {"agui.thread_id": "t1"}):
        pass
    tracing.force_flush()
    (line,) = path.read_text().splitlines()
    assert json.loads(line)["attributes"] == {"agui.thread_id": "t1"}
    assert path.stat().st_mode & 0o777 == 0o600


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, int]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self.received.append((self.path, self.headers.get("Content-Type", ""), length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


def test_otlp_exporter_posts_protobuf_to_the_configured_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporter reads OTEL_EXPORTER_OTLP_* itself (from the process environment)."""
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        assert tracing.configure({"OTEL_TRACES_EXPORTER": "otlp"})
        with tracing.span("agui.admission"):
            pass
        tracing.force_flush()
    finally:
        server.shutdown()
        server.server_close()
    assert _Collector.received and _Collector.received[0][:2] == ("/v1/traces", "application/x-protobuf")
    assert _Collector.received[0][2] > 0


def test_an_unknown_exporter_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    assert not tracing.configure({"OTEL_TRACES_EXPORTER": "zipkin"})  # nothing would export: stays off
    assert "zipkin" in caplog.text and not tracing.enabled()
    tracing.reset()
    path = tmp_path / "spans.jsonl"
    assert tracing.configure({"OTEL_TRACES_EXPORTER": "zipkin,console", tracing_setup.TRACES_FILE_ENV: str(path)})


def test_otlp_without_the_extra_stays_off_and_says_how_to_install_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_otlp(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry.exporter.otlp"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otlp)
    assert not tracing.configure({"OTEL_TRACES_EXPORTER": "otlp"})
    assert "agui-bridge[otlp]" in caplog.text


def test_execution_traceparent_round_trips_and_an_invalid_one_is_dropped() -> None:
    state = model.new_thread("thread-1", "/work", None, "ros-1", "exec-1")
    state.execution.traceparent = INCOMING
    stored = model.to_document(state)
    assert stored["execution"]["traceparent"] == INCOMING  # type: ignore[index]
    assert document.load_document(stored, "thread-1").execution.traceparent == INCOMING
    stored["execution"]["traceparent"] = "00-not-a-traceparent-01"  # type: ignore[index]
    assert document.load_document(stored, "thread-1").execution.traceparent is None
    state.execution.traceparent = None
    assert "traceparent" not in model.to_document(state)["execution"]  # type: ignore[operator]
