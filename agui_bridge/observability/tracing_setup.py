"""Tracing set-up (docs/design.md#modules): which exporters the `OTEL_*` environment asks for, and the
OpenTelemetry provider that sends spans to them. `tracing` installs the provider and owns the span helpers;
nothing from OpenTelemetry is imported here until a provider is actually built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, cast

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

#: The tracing log (operators filter on this name; the span helpers and the set-up share it).
log = logging.getLogger("agui_bridge.observability.tracing")

#: Console spans go to this file (one JSON object per line, appended) instead of stdout when set.
TRACES_FILE_ENV = "IAC_CODE_AGUI_TRACES_FILE"
SERVICE_NAME = "agui-bridge"
_KNOWN_EXPORTERS = ("console", "otlp")


def requested_exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the environment asks for; empty when tracing is off (pure, used by `doctor` too)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    return tuple(n for n in dict.fromkeys(names) if n and n != "none")


def build_provider(environ: Mapping[str, str], exporter: SpanExporter | None = None) -> TracerProvider | None:
    """The provider for what `environ` asks for, or None when tracing stays off.

    `exporter` (tests) replaces what the environment names and is exported synchronously.
    """
    names = requested_exporters(environ)
    if exporter is None and not names:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    # Resource.create reads OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES; the sampler comes from
    # OTEL_TRACES_SAMPLER (default: parent-based, always on).
    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        exporters = [built for name in names if (built := _exporter(name, environ)) is not None]
        if not exporters:
            log.warning("tracing stays off: no usable exporter in OTEL_TRACES_EXPORTER")
            return None
        for built in exporters:
            provider.add_span_processor(BatchSpanProcessor(built))
    return provider


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter | None:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        path = environ.get(TRACES_FILE_ENV)
        if path:
            out = cast("IO[str]", _AppendFile(path))
            return ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n")
        return ConsoleSpanExporter()
    if name == "otlp":
        protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        if protocol and protocol != "http/protobuf":
            log.warning("OTLP protocol %r is not supported; using http/protobuf", protocol)
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.error("OTEL_TRACES_EXPORTER=otlp needs the 'otlp' extra: pip install 'agui-bridge[otlp]'")
            return None
        return OTLPSpanExporter()  # endpoint, headers, timeout: the OTEL_EXPORTER_OTLP_* variables
    log.warning("unknown OTEL_TRACES_EXPORTER entry %r ignored (known: %s)", name, ", ".join(_KNOWN_EXPORTERS))
    return None


class _AppendFile:
    """A private (0600) file opened O_APPEND: each span is one write(2), so workers never interleave."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, text: str) -> int:
        return os.write(self._fd, text.encode("utf-8"))

    def flush(self) -> None:
        pass
