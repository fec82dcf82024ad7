"""OpenTelemetry tracing (docs/design.md#observability): off unless the standard `OTEL_*` variables ask for it.

`configure()` runs once per worker (from `worker.process.configure_process`, before the app) and reads
`OTEL_SDK_DISABLED` and `OTEL_TRACES_EXPORTER` (`console`, `otlp`, or both, comma-separated; unset or
`none` = off). When off, nothing from OpenTelemetry is imported and every helper here is a global check and a
return: the call sites in the client, the store, admission and the stream cost one function call.

Spans: `POST /` and the extension routes (continuing an incoming W3C `traceparent`), `agui.admission`,
`agui.state.commit` (each atomic write), `a2a.<method>` (each A2A HTTP call, with `traceparent` sent to
the kernel), `agui.resume_preflight` and `agui.run` (the stream as a whole, with the outcome). A
resume's `agui.run` span *links* to the trace of the run that announced its interrupt: admission
stores that run's `traceparent` in the execution record (the only tracing datum ever written to a
thread file) and hands it to the resume (docs/operations.md#tracing-opentelemetry).

Attributes carry ids and outcomes only. Errors are recorded as the exception type and, for a
`BridgeError`, its code: never the exception message, which may quote kernel or user text.

Context follows the work under gevent because `runtime.spawn` copies the contextvars context into
each greenlet/thread, and OpenTelemetry keeps the current span in a contextvar. Choosing the exporters and
building the provider is `tracing_setup`'s job; this module holds the one provider and the span helpers.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

from agui_bridge.observability.tracing_setup import build_provider

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

TRACEPARENT = "traceparent"

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Y = TypeVar("_Y")
_S = TypeVar("_S")

_tracer: Tracer | None = None
_provider: TracerProvider | None = None
_configured = False
_NULL: AbstractContextManager[None] = nullcontext()

Attributes = Mapping[str, str | bool | int | float]


def enabled() -> bool:
    return _tracer is not None


def configure(environ: Mapping[str, str] | None = None, *, exporter: SpanExporter | None = None) -> bool:
    """Set tracing up once per process; later calls change nothing. Returns whether tracing is on.

    `exporter` (tests) replaces what the environment names and is exported synchronously.
    """
    global _configured
    if _configured:
        return _tracer is not None
    _configured = True
    provider = build_provider(os.environ if environ is None else environ, exporter)
    if provider is None:
        return False
    _install(provider)
    return True


def _install(provider: TracerProvider) -> None:
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer("agui_bridge")


def reset() -> None:
    """Tests: flush, shut down and forget the provider so `configure` reads the environment again."""
    global _tracer, _provider, _configured
    if _provider is not None:
        _provider.shutdown()
    _tracer, _provider, _configured = None, None, False


def force_flush() -> None:
    if _provider is not None:
        _provider.force_flush()


# ------------------------------------------------------------------------------------------- spans


def _record_error(span: Span, exc: BaseException) -> None:
    """The exception type and the bridge error code; never the message (it may quote user text)."""
    from opentelemetry.trace import Status, StatusCode

    kind = type(exc).__name__
    span.set_attribute("error.type", kind)
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        span.set_attribute("agui.error_code", code)
    span.add_event("exception", {"exception.type": kind})
    span.set_status(Status(StatusCode.ERROR, kind))


@contextmanager
def _span(name: str, attributes: Attributes | None, client: bool) -> Iterator[Span]:
    from opentelemetry.trace import SpanKind

    assert _tracer is not None
    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    with _tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                _record_error(span, exc)
            raise


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[Any]:
    """A child span of the current one around a block (a shared no-op when tracing is off)."""
    if _tracer is None:
        return _NULL
    return _span(name, attributes, False)


def traced(
    name: str | Callable[..., str], attributes: Callable[..., Attributes] | None = None, *, client: bool = False
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator: the call runs in a span named `name` (or `name(*args)`); `attributes(*args)` adds ids."""

    def decorate(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if _tracer is None:
                return fn(*args, **kwargs)
            span_name = name(*args, **kwargs) if callable(name) else name
            with _span(span_name, attributes(*args, **kwargs) if attributes else None, client):
                return fn(*args, **kwargs)

        return wrapper

    return decorate


def traced_generator(
    generator: Generator[_Y, _S, _R],
    name: str,
    attributes: Attributes | None = None,
    *,
    outcome: Callable[[], str] | None = None,
    link: str | None = None,
) -> Generator[_Y, _S, _R]:
    """`generator` inside a span that stays current while it runs, across its yields.

    The parent is the context current *now* (the request), not when the first item is pulled. When
    tracing is off the generator itself is returned: no wrapper, no per-item cost.
    """
    if _tracer is None:
        return generator
    from opentelemetry import context as otel_context

    return _spanned(generator, name, dict(attributes or {}), outcome, link, otel_context.get_current())


def capture() -> Context | None:
    """The current context, to parent work that runs after the request's context is gone; None when off."""
    if _tracer is None:
        return None
    from opentelemetry import context as otel_context

    return otel_context.get_current()


def traced_iterator(
    iterator: Iterator[_Y],
    name: str,
    attributes: Attributes | None = None,
    *,
    parent: Context | None = None,
    outcome: Callable[[], str] | None = None,
    error_code: Callable[[], str | None] | None = None,
    link: str | None = None,
) -> Iterator[_Y]:
    """`iterator` inside a span whose parent is `parent` (from `capture()`; the WSGI server iterates a
    streamed body after the request's context was detached)."""
    if _tracer is None:
        return iterator
    from opentelemetry import context as otel_context

    context = parent if parent is not None else otel_context.get_current()
    return _spanned(iterator, name, dict(attributes or {}), outcome, link, context, error_code)


def _spanned(
    generator: Iterator[Any],
    name: str,
    attributes: dict[str, str | bool | int | float],
    outcome: Callable[[], str] | None,
    link: str | None,
    parent: Context,
    error_code: Callable[[], str | None] | None = None,
) -> Generator[Any, Any, Any]:
    """The span of a streamed body: an outcome of `error` (a RUN_ERROR the bridge did not choose, such
    as a kernel failure) marks it failed, with the AG-UI error code; the events themselves are not
    exceptions, so nothing else would."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    assert _tracer is not None
    links = [trace.Link(linked)] if link and (linked := _span_context(link)) is not None else None
    current = _tracer.start_span(name, context=parent, attributes=attributes, links=links)
    token = otel_context.attach(trace.set_span_in_context(current, parent))
    try:
        result = yield from cast("Generator[Any, Any, Any]", generator)
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):
            _record_error(current, exc)
        raise
    finally:
        _finish(current, outcome() if outcome is not None else None, error_code() if error_code is not None else None)
        otel_context.detach(token)
        current.end()
    return result


def _finish(span: Span, outcome: str | None, code: str | None) -> None:
    if outcome is not None:
        span.set_attribute("agui.outcome", outcome)
    if code is not None:
        span.set_attribute("agui.error_code", code)
    if outcome == "error":
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, code or "error"))


# ------------------------------------------------------------------------------------- propagation


def headers() -> dict[str, str]:
    """The W3C `traceparent` of the current span for an outgoing request; {} when off."""
    if _tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def current_traceparent() -> str | None:
    """The current span as a W3C `traceparent` (stored for a later resume's link); None when off."""
    if _tracer is None:
        return None
    return headers().get(TRACEPARENT)


def _span_context(traceparent: str) -> Any:
    """The span context of a stored `traceparent`, or None when it is not a valid one."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    extracted = TraceContextTextMapPropagator().extract({TRACEPARENT: traceparent})
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None


class _Headers(Protocol):
    def get(self, key: str) -> str | None: ...


class RequestTrace:
    """The server span of one HTTP request, current until the view returns."""

    def __init__(self, span: Span, token: object) -> None:
        self.span = span
        self.token = token


def begin_request(method: str, route: str, incoming: _Headers, request_id: str = "") -> RequestTrace | None:
    """Start `<METHOD> <route>` as a server span, continuing an incoming W3C `traceparent`."""
    if _tracer is None:
        return None
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    # Only the fixed-size traceparent is taken: a caller's `tracestate` (vendor data, up to ~8 KiB) is
    # not forwarded to the kernel.
    value = incoming.get(TRACEPARENT)
    parent = TraceContextTextMapPropagator().extract({TRACEPARENT: value} if value else {})
    current = _tracer.start_span(
        f"{method} {route}",
        context=parent,
        kind=trace.SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": route, "agui.request_id": request_id},
    )
    return RequestTrace(current, otel_context.attach(trace.set_span_in_context(current, parent)))


def end_request(handle: RequestTrace | None, status: int | None, error: BaseException | None = None) -> None:
    if handle is None:
        return
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Status, StatusCode

    if status is not None:
        handle.span.set_attribute("http.response.status_code", status)
        if status >= 500:
            handle.span.set_status(Status(StatusCode.ERROR))
    if error is not None:
        _record_error(handle.span, error)
    otel_context.detach(handle.token)  # type: ignore[arg-type]
    handle.span.end()


__all__ = [
    "begin_request",
    "capture",
    "configure",
    "current_traceparent",
    "enabled",
    "end_request",
    "force_flush",
    "headers",
    "reset",
    "span",
    "traced",
    "traced_generator",
    "traced_iterator",
]
