"""gunicorn settings and hooks shared by `agui-bridge serve` and `deploy/gunicorn.conf.py`.

Only stdlib at module level: this runs in the unpatched master, and anything imported here would be
inherited by workers before gevent patches them (stack-notes 2.1). Hooks import inside their body.
"""

from __future__ import annotations

import os
from typing import Any

ENV = os.environ

bind = [f"{ENV.get('IAC_CODE_AGUI_HOST', '127.0.0.1')}:{ENV.get('IAC_CODE_AGUI_PORT', '8000')}"]
workers = int(ENV.get("IAC_CODE_AGUI_WORKERS", "2"))
worker_class = "gevent"
worker_connections = int(ENV.get("IAC_CODE_AGUI_WORKER_CONNECTIONS", "1000"))
timeout = 30
graceful_timeout = int(ENV.get("IAC_CODE_AGUI_GRACEFUL_TIMEOUT", "30"))
keepalive = 5
preload_app = False
#: gunicorn's worker heartbeat files; point it at a tmpfs when / is read-only (containers).
worker_tmp_dir = ENV.get("IAC_CODE_AGUI_WORKER_TMP_DIR") or None
max_requests = 0
control_socket_disable = True
accesslog = None
errorlog = "-"
loglevel = ENV.get("IAC_CODE_AGUI_LOG_LEVEL", "info")
log_format = ENV.get("IAC_CODE_AGUI_LOG_FORMAT", "text")
#: With JSON logs gunicorn's own error log uses the same formatter (the class is stdlib-only).
logconfig_dict = (
    {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "agui_bridge.logs.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": "WARNING"},
        "loggers": {
            "gunicorn.error": {"handlers": ["stderr"], "level": loglevel.upper(), "propagate": False},
            "gunicorn.access": {"handlers": ["stderr"], "level": loglevel.upper(), "propagate": False},
        },
    }
    if log_format == "json"
    else {}
)


#: Seconds of `graceful_timeout` kept for stopping the runs still active after the drain wait.
DRAIN_MARGIN_S = 10


def post_worker_init(worker: Any) -> None:
    """Fail at boot if gevent did not patch what the stream design relies on; drain on SIGTERM.

    gunicorn's own SIGTERM handler only stops the accept loop; without ours the master's SIGKILL cuts
    live streams after `graceful_timeout` with no terminal event and no cleanup (stack-notes 2.7).
    """
    import signal

    import gevent

    from agui_bridge.runtime import require_patched

    require_patched()

    def on_term(sig: int, frame: Any) -> None:
        worker.handle_exit(sig, frame)  # alive = False: gunicorn stops accepting
        gevent.spawn(drain_worker, worker)  # no blocking work inside a signal handler

    signal.signal(signal.SIGTERM, on_term)
    service = getattr(worker.wsgi, "extensions", {}).get("agui_bridge")
    if service is not None:
        # Idle shutdown stops the whole server: ask the master, which drains every worker.
        service.start_maintenance(lambda: os.kill(worker.ppid, signal.SIGTERM))


def child_exit(server: Any, worker: Any) -> None:
    """A dead worker's live gauges must stop counting (prometheus_client multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def drain_worker(worker: Any) -> None:
    service = getattr(worker.wsgi, "extensions", {}).get("agui_bridge")
    if service is None:
        return
    stopped = service.drain(max(0.0, float(worker.cfg.graceful_timeout) - DRAIN_MARGIN_S))
    if stopped:
        worker.log.info("drain: stopped %d active run(s) with RUN_ERROR", stopped)


def worker_abort(worker: Any) -> None:
    """On a watchdog kill, log which greenlet blocked the hub."""
    from gevent.util import format_run_info

    worker.log.error("worker aborted; run info:\n%s", "\n".join(format_run_info()))


SETTINGS = {
    "bind": bind,
    "workers": workers,
    "worker_class": worker_class,
    "worker_connections": worker_connections,
    "timeout": timeout,
    "graceful_timeout": graceful_timeout,
    "keepalive": keepalive,
    "preload_app": preload_app,
    "worker_tmp_dir": worker_tmp_dir,
    "max_requests": max_requests,
    "control_socket_disable": control_socket_disable,
    "accesslog": accesslog,
    "errorlog": errorlog,
    "loglevel": loglevel,
    "logconfig_dict": logconfig_dict,
    "post_worker_init": post_worker_init,
    "worker_abort": worker_abort,
    "child_exit": child_exit,
}
