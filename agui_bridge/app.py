"""The application factory: settings -> collaborators -> blueprints (flaskr, grown up)."""

from __future__ import annotations

import logging
import os
import re
import uuid
from typing import TYPE_CHECKING

from flask import Flask, Response, g, request

from agui_bridge.config.settings import Settings, load_settings, require_a2a_upstream
from agui_bridge.kernel.client import A2AClient
from agui_bridge.observability import tracing
from agui_bridge.observability.logs import reset_log_context, warn_once_if_logging_unconfigured
from agui_bridge.runs.observer import NULL_OBSERVER, NullObserver
from agui_bridge.runs.service import BridgeService
from agui_bridge.store.store import ThreadStore
from agui_bridge.web import capabilities_api, console_api, extension_api, health_api, reattach_api, run_api, status_api
from agui_bridge.web.auth import guard_request
from agui_bridge.web.context import EXTENSION_KEY
from agui_bridge.web.http_errors import register_error_handlers
from agui_bridge.worker.agent_check import answered_here
from agui_bridge.worker.host import WORKER_KEY, WorkerHost
from agui_bridge.worker.maintenance import WorkerLoops
from agui_bridge.worker.runtime import select_runtime

if TYPE_CHECKING:
    from agui_bridge.observability.metrics import PrometheusObserver

#: An incoming X-Request-Id is kept only if it cannot smuggle anything into a log line.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _bind_request_id() -> None:
    incoming = request.headers.get("X-Request-Id", "")
    request_id = incoming if _REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex
    g.agui_request_id = request_id
    reset_log_context(request_id=request_id)


def _echo_request_id(response: Response) -> Response:
    response.headers["X-Request-Id"] = g.get("agui_request_id", "")
    return response


def _begin_trace() -> None:
    """Runs and extension calls get a server span continuing the caller's `traceparent`, so one trace
    spans client, bridge and kernel."""
    path = request.path
    if path == "/" or path.startswith("/extensions/"):
        route = request.url_rule.rule if request.url_rule is not None else "unmatched"
        g.agui_trace = tracing.begin_request(request.method, route, request.headers, g.get("agui_request_id", ""))


def _trace_status(response: Response) -> Response:
    g.agui_trace_status = response.status_code
    return response


def _end_trace(error: BaseException | None) -> None:
    tracing.end_request(g.pop("agui_trace", None), g.pop("agui_trace_status", None), error)


def _observer(settings: Settings) -> NullObserver | PrometheusObserver:
    if not settings.metrics_enabled:
        return NULL_OBSERVER
    from agui_bridge.observability.metrics import PrometheusObserver

    return PrometheusObserver()


#: What an app says when the agent-check option is set where nobody answers it (docs/design.md#agent-check).
NO_AGENT_CHECK_HERE = (
    "agui-bridge: --agent-check-port (IAC_CODE_AGUI_AGENT_CHECK_PORT=%d) is answered only by gunicorn with the "
    "bridge's hooks (agui-bridge serve, deploy/gunicorn.conf.py, deploy/gunicorn-gthread.conf.py); this server "
    "does not answer HAProxy's agent check, which then keeps the weight it has"
)


def create_app(settings: Settings | None = None) -> Flask:
    """Build one app per worker process (after fork): no I/O happens here beyond object creation.

    Without `settings` the IAC_CODE_AGUI_* environment goes through the same validation as
    `agui-bridge serve`; an invalid value, or no A2A URL (there is no default), raises ConfigError. Nothing
    process-wide is set up here (logging, tracing, the switch interval): a process that serves calls
    `worker.process.configure_process` first, and only then does the app trace its requests
    (docs/design.md#process-setup). When nobody set logging up, it says so once, as a WARNING.
    """
    settings = settings or load_settings(os.environ)
    warn_once_if_logging_unconfigured()
    if settings.agent_check_port and not answered_here():
        logging.getLogger(__name__).warning(NO_AGENT_CHECK_HERE, settings.agent_check_port)
    require_a2a_upstream(settings)  # no default URL: the app is built for a kernel someone named
    assert settings.a2a_url is not None
    app = Flask("agui_bridge")
    # A path with "//" (an id holding "/" sent percent-encoded) is 404, not a redirect to a merged path.
    app.url_map.merge_slashes = False
    app.config["MAX_CONTENT_LENGTH"] = None  # the run view enforces its own limit while reading
    observer = _observer(settings)
    store = ThreadStore(settings.state_dir, lock_timeout_s=settings.lock_timeout_s, observer=observer)
    client = A2AClient(
        settings.a2a_url,
        settings.a2a_token,
        connect_timeout_s=settings.upstream_connect_timeout_s,
        read_timeout_s=settings.upstream_read_timeout_s,
        call_timeout_s=settings.upstream_call_timeout_s,
        pool_maxsize=settings.max_active_runs_per_worker + 64,
    )
    runtime = select_runtime(settings.runtime_backend)
    service = BridgeService(settings, store, client, runtime, observer)
    app.extensions[EXTENSION_KEY] = service
    # The worker's loops around the service, and the web layer's one way to its worker (docs/design.md#layers).
    loops = WorkerLoops(
        runtime, service, beacon_interval_s=settings.beacon_interval_s, idle_shutdown_s=settings.idle_shutdown_s
    )
    app.extensions[WORKER_KEY] = WorkerHost(runtime, loops)
    app.before_request(_bind_request_id)

    def _guard_request() -> None:
        return guard_request(settings)

    app.before_request(_guard_request)
    app.after_request(_echo_request_id)
    if tracing.enabled():  # set up by the process's entry point; nothing is hooked when off
        app.before_request(_begin_trace)
        app.after_request(_trace_status)
        app.teardown_request(_end_trace)
    app.register_blueprint(health_api.bp)
    app.register_blueprint(run_api.bp)
    app.register_blueprint(extension_api.bp)
    if settings.metrics_enabled:
        from agui_bridge.web import metrics_api

        app.register_blueprint(metrics_api.bp)
    app.register_blueprint(status_api.bp)
    app.register_blueprint(reattach_api.bp)
    app.register_blueprint(capabilities_api.bp)
    if settings.console_enabled:
        app.register_blueprint(console_api.bp)
    register_error_handlers(app, settings.default_language)
    return app
